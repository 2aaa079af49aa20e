package functions_test

// Quick, exact answers, through the local stack and the real
// binaries: --wait sees a short operation end soon after it does, a dry
// run names each broken entry and why, an unchanged run counts what it
// left unchanged, the local stack prints a paste-ready export line, and
// `make run` ends with exit 0 on Ctrl-C.

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
)

// brokenIndex has two good entries and two that do not validate.
const brokenIndex = `- name: alpha
  description: the alpha service
  bindable: true
  plans:
    - name: default
      description: the plan
- name: beta
  description: the beta service
  bindable: true
  plans:
    - name: default
      description: the plan
- name: noplans
  description: a service without plans
  bindable: true
- name: nodescription
  bindable: true
  plans:
    - name: default
      description: the plan
`

func TestE2EQuickExactAnswers(t *testing.T) {
	t.Parallel()
	ix, u := newIndex(t)
	ix.setBody(brokenIndex)
	s := startStack(t, `registries:
  - name: team-a
    type: http
    http: {url: "`+u+`", timeout: 5s}
`)

	// The dry run names both broken entries, each with why, in text...
	r := s.cli(nil, "bootstrap", "--dry-run").must(t, 0, "bootstrap --dry-run")
	for _, name := range []string{"noplans", "nodescription"} {
		line := ""
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, "! entry "+name) {
				line = l
			}
		}
		if !strings.Contains(line, "does not parse or validate") || !strings.Contains(line, ": ") || len(line) < len("! entry "+name+" does not parse or validate (its last good version stays): x") {
			t.Errorf("the dry run does not name %s with its reason:\n%s", name, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "entries do not parse") {
		t.Errorf("the dry run counts entries it named:\n%s", r.stdout)
	}
	// ... and in JSON.
	r = s.cli(nil, "bootstrap", "--dry-run", "-o", "json").must(t, 0, "bootstrap --dry-run -o json")
	var op api.LastOperation
	if err := json.Unmarshal([]byte(r.stdout), &op); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	res := op.Registries["team-a"]
	var named []string
	for _, e := range res.EntryErrors {
		if e.Message == "" {
			t.Errorf("entry error without a reason: %+v", e)
		}
		named = append(named, e.Entry)
	}
	if strings.Join(named, ",") != "nodescription,noplans" || res.Counts.EntryErrors != 2 {
		t.Errorf("dry run JSON names %v (counts %d), want nodescription,noplans", named, res.Counts.EntryErrors)
	}

	// --wait without --poll-interval follows a short operation closely:
	// the server's Retry-After is 5 s, the CLI's first polls are shorter.
	start := time.Now()
	r = s.cli(nil, "bootstrap", "--wait").must(t, 0, "bootstrap --wait")
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("bootstrap --wait took %s for an operation of about a second; it waited out the Retry-After", took)
	}
	r.contains(t, "bootstrap --wait", "progress: 1/1 registry reported")
	if strings.Contains(r.stdout+r.stderr, "1 registries") {
		t.Errorf("plural for one:\n%s", r.stdout)
	}

	// An unchanged run counts the specs it left unchanged.
	r = s.cli(nil, "bootstrap", "--wait", "-o", "json").must(t, 0, "unchanged bootstrap")
	op = api.LastOperation{}
	if err := json.Unmarshal([]byte(r.stdout), &op); err != nil {
		t.Fatal(err)
	}
	if got := op.Registries["team-a"]; got.Result != api.ResultUnchanged || got.Counts.Unchanged != 2 {
		t.Errorf("unchanged run: %s with %d unchanged, want unchanged with 2", got.Result, got.Counts.Unchanged)
	}

	// The banner's export line, pasted into a shell, drives the stack.
	s.logsMu.Lock()
	logs := s.logs.String()
	s.logsMu.Unlock()
	var export string
	for _, l := range strings.Split(logs, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "export SPECSYNC_URL=") {
			export = strings.TrimSpace(l)
		}
	}
	// The test gave the stack its credentials: the line names where they
	// come from and never prints them (the banner is in every log).
	for _, want := range []string{"SPECSYNC_URL=" + s.url, "SPECSYNC_BROKER_USERNAME=" + brokerUser, "SPECSYNC_ADMIN_TOKEN: yours", "SPECSYNC_BROKER_PASSWORD: yours"} {
		if !strings.Contains(export, want) {
			t.Fatalf("export line %q lacks %s", export, want)
		}
	}
	if strings.Contains(export, adminToken) || strings.Contains(export, brokerPass) {
		t.Fatalf("export line %q prints a credential the user gave", export)
	}
	sh := exec.Command("sh", "-c", export+"\nexec "+specsyncBinary(t)+" catalog") // a line of its own: it may end in a comment
	// The pasted line, in a shell with the user's own credentials.
	sh.Env = []string{"PATH=" + os.Getenv("PATH"), "SPECSYNC_ADMIN_TOKEN=" + adminToken, "SPECSYNC_BROKER_PASSWORD=" + brokerPass}
	out, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "alpha") {
		t.Errorf("the pasted export line does not drive the CLI: %v\n%s", err, out)
	}
}

// make run stops cleanly on Ctrl-C (the terminal sends SIGINT to the
// whole foreground process group: make, and the stack it runs): the
// stack stops and exits 0, so make reports no error of its recipe; make
// itself ends with 0 or by the interrupt (a shell's 130), as an
// interrupted make does. Named for what it accepts: both.
func TestE2EMakeRunStopsCleanlyOnInterrupt(t *testing.T) {
	t.Parallel()
	requireEmulators(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed: %v", err)
	}
	cmd := exec.Command("make", "-s", "run")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(),
		"GOOGLE_CLOUD_PROJECT="+emulatortest.ProjectID(t),
		"PORT=0", // the stack binds a free port itself and prints its URL
		"SPECSYNC_LOCAL_REGISTRY=127.0.0.1:0",
		"SPECSYNC_LOCAL_PUSH_ADDR=127.0.0.1:0",
		"SPECSYNC_TOPIC=reconcile-make-run",
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	wait := func(prefix string, within time.Duration) bool {
		deadline := time.After(within)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return false
				}
				seen = append(seen, l)
				if strings.HasPrefix(l, prefix) {
					return true
				}
			case <-deadline:
				return false
			}
		}
	}
	if !wait("ready", 3*time.Minute) {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		t.Fatalf("make run did not get ready:\n%s", strings.Join(seen, "\n"))
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	stopped := wait("stopping", 30*time.Second)
	for l := range lines {
		seen = append(seen, l)
	}
	err = cmd.Wait()
	// The stack exits 0: make reports no error of its recipe ("make: ***
	// [Makefile:N: run] Error 1" was go run's exit status). make itself
	// got the SIGINT too, and ends as an interrupted make does (by the
	// signal, quietly) or with 0.
	var ee *exec.ExitError
	interrupted := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT
	out := strings.Join(seen, "\n")
	if !stopped || (err != nil && !interrupted) || strings.Contains(out, "make: ***") {
		t.Errorf("make run on Ctrl-C: stopped %v, exit %v, want the stack stopped and no error from make:\n%s", stopped, err, out)
	}
}
