package functions_test

// End-to-end tests of the operator CLI: the specsync binary, built for
// real and run as a subprocess against the local stack. The operator's
// other surface, the status page, is statuspage_e2e_test.go.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/config"
)

// cliResult is one run of the specsync binary.
type cliResult struct {
	code           int
	stdout, stderr string
}

// cli runs the specsync binary against the stack with the operator's
// environment (URL and credentials), plus env overrides.
func (s *stack) cli(env []string, args ...string) cliResult {
	s.t.Helper()
	bin := specsyncBinary(s.t)
	if len(args) > 0 && filepath.IsAbs(args[0]) {
		bin, args = args[0], args[1:] // a wrapper (script) that runs the binary
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"SPECSYNC_URL="+s.url,
		"SPECSYNC_BOOTSTRAP_URL=", "SPECSYNC_CATALOG_URL=", "SPECSYNC_OUTPUT=",
		"SPECSYNC_ADMIN_TOKEN="+adminToken,
		"SPECSYNC_BROKER_USERNAME="+brokerUser,
		"SPECSYNC_BROKER_PASSWORD="+brokerPass,
	)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("specsync %v: %v", args, err)
	}
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

func (r cliResult) must(t *testing.T, code int, what string) cliResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, code, r.stdout, r.stderr)
	}
	return r
}

func (r cliResult) contains(t *testing.T, what string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.stdout+r.stderr, s) {
			t.Errorf("%s: output lacks %q\nstdout:\n%s\nstderr:\n%s", what, s, r.stdout, r.stderr)
		}
	}
}

func TestE2EOperatorCLI(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t, "alpha", "beta")
	b, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))
	const poll = "--poll-interval=200ms"

	// A healthy bootstrap: exit 0, every registry's line, the summary.
	r := s.cli(nil, "bootstrap", "--wait", poll).must(t, 0, "bootstrap --wait")
	r.contains(t, "bootstrap --wait", "team-a", "team-b", "progress: 2/2 registries reported", "succeeded: all 2 registries reconciled; 3 changes committed, catalog at revision 3")
	// Read-your-writes: the revision, and a no-cache catalog read that
	// shows it.
	r.contains(t, "bootstrap --wait", "catalog revision 3: the catalog serves revision 3, which reflects the bootstrap")
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("bootstrap --wait warned: %s", r.stderr)
	}

	// On a terminal the progress is a bar redrawn in place, not lines
	// (script(1), from Debian's essential bsdutils, gives it a pty).
	if scriptBin, err := exec.LookPath("script"); err != nil {
		t.Errorf("script(1) is needed to test the terminal progress bar: %v", err)
	} else {
		release := a.hold() // team-a answers late: several polls draw the bar
		go func() { time.Sleep(1500 * time.Millisecond); release() }()
		r = s.cli(nil, scriptBin, "-qefc", specsyncBinary(t)+" bootstrap --wait "+poll, "/dev/null")
		t.Logf("on a terminal: %q", r.stdout)
		if r.code != 0 || !regexp.MustCompile(`\r\x1b\[K`).MatchString(r.stdout) || strings.Contains(r.stdout, "progress: ") {
			t.Errorf("bootstrap --wait on a terminal: exit %d, want a redrawn bar and no progress lines:\n%q", r.code, r.stdout)
		}
	}

	// team-b goes down: the bootstrap fails, exit 1, naming it and why.
	b.set(true)
	r = s.cli(nil, "bootstrap", "--wait", poll).must(t, 1, "bootstrap with team-b down")
	if !regexp.MustCompile(`failed: .*team-b \(fetch_failed: .*502`).MatchString(r.stderr) || strings.Contains(r.stderr, "team-a (") {
		t.Errorf("the failure must name team-b and why, and only team-b:\n%s", r.stderr)
	}
	var op api.LastOperation
	r = s.cli(nil, "bootstrap", "--wait", poll, "--output", "json").must(t, 1, "bootstrap --wait -o json")
	if err := json.Unmarshal([]byte(r.stdout), &op); err != nil || op.State != api.Failed || op.Registries["team-b"].Result != api.ResultFetchFailed || op.Registries["team-a"].State != api.Succeeded {
		t.Errorf("bootstrap JSON: %v %+v\n%s", err, op, r.stdout)
	}

	// status: the table shows the failing registry and its error;
	// --check turns it into exit 1; JSON is the API's.
	r = s.cli(nil, "status").must(t, 0, "status")
	if !regexp.MustCompile(`(?m)^team-b\s+fetch_failed`).MatchString(r.stdout) || !regexp.MustCompile(`(?m)^team-a\s+succeeded`).MatchString(r.stdout) {
		t.Errorf("status table:\n%s", r.stdout)
	}
	r.contains(t, "status", "error: ", "502")
	s.cli(nil, "status", "--check").must(t, 1, "status --check with a failing registry")
	r = s.cli(nil, "status", "-o", "json").must(t, 0, "status -o json")
	var st api.RegistryList // status -o json's registries are GET /registries'
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Registries) != 2 {
		t.Errorf("status JSON: %v\n%s", err, r.stdout)
	}

	// catalog: the outage kept gamma; table and raw OSB JSON.
	r = s.cli(nil, "catalog").must(t, 0, "catalog")
	for _, n := range []string{"alpha", "beta", "gamma"} {
		if !regexp.MustCompile(`(?m)^` + n + `\s`).MatchString(r.stdout) {
			t.Errorf("catalog table lacks %s:\n%s", n, r.stdout)
		}
	}
	r = s.cli(nil, "catalog", "--output=json").must(t, 0, "catalog json")
	var cat catalog.Catalog
	if err := json.Unmarshal([]byte(r.stdout), &cat); err != nil || names(cat) != "alpha,beta,gamma" {
		t.Errorf("catalog JSON: %v %s", err, r.stdout)
	}

	// A provisioned instance pins beta once it leaves upstream.
	var betaID, betaPlan string
	for _, svc := range cat.Services {
		if svc.Name == "beta" {
			betaID, betaPlan = svc.ID, svc.Plans[0].ID
		}
	}
	if put := s.do(http.MethodPut, "/v2/service_instances/inst-1", "broker",
		strings.NewReader(fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1","context":{"oci_platform":"linux/amd64"}}`, betaID, betaPlan))); put.status != http.StatusCreated {
		t.Fatalf("provision: %d %s", put.status, put.body)
	}
	b.set(false)
	a.set(false, "alpha", "omega")

	// A dry run prints the plan as a diff and changes nothing.
	r = s.cli(nil, "bootstrap", "--dry-run", poll).must(t, 0, "bootstrap --dry-run")
	r.contains(t, "dry run", "--- catalog now", "@@ registry team-a @@", "+ omega (", "): would be created", "- beta ("+betaID+"): would be marked for deletion")
	if strings.Contains(r.stdout, "new specs would be created") || strings.Contains(r.stdout, "alpha (") {
		t.Errorf("the dry run diff counts what it named, or names an unchanged spec:\n%s", r.stdout)
	}
	if c, _ := s.catalog(); names(c) != "alpha,beta,gamma" {
		t.Fatalf("a dry run changed the catalog: %s", names(c))
	}

	s.cli(nil, "bootstrap", "--wait", poll).must(t, 0, "bootstrap after the change")
	r = s.cli(nil, "specs", "--marked").must(t, 0, "specs --marked")
	if !regexp.MustCompile(`(?m)^beta\s+`+regexp.QuoteMeta(betaID)+`\s+team-a\s+marked\s+default\s+1\s`).MatchString(r.stdout) || strings.Contains(r.stdout, "alpha") {
		t.Errorf("specs --marked:\n%s", r.stdout)
	}
	r = s.cli(nil, "specs", "--registry", "team-a", "-o", "json").must(t, 0, "specs --registry json")
	var specs api.SpecList
	if err := json.Unmarshal([]byte(r.stdout), &specs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sp := range specs.Specs {
		got = append(got, sp.Name+"="+string(sp.State))
		if sp.Registry != "team-a" {
			t.Errorf("specs --registry team-a listed %+v", sp)
		}
	}
	if strings.Join(sortedCopy(got), ",") != "alpha=active,beta=marked,omega=active" {
		t.Errorf("specs of team-a: %v", got)
	}
	r = s.cli(nil, "instances", "--marked").must(t, 0, "instances --marked")
	if !regexp.MustCompile(`(?m)^inst-1\s+beta\s+default\s+team-a\s+marked\s+linux/amd64`).MatchString(r.stdout) {
		t.Errorf("instances --marked:\n%s", r.stdout)
	}
	r = s.cli(nil, "instances", "--registry", "team-b", "-o", "json").must(t, 0, "instances --registry team-b")
	if !strings.Contains(r.stdout, `"instances": []`) {
		t.Errorf("team-b has no instances: %s", r.stdout)
	}
	r = s.cli(nil, "status").must(t, 0, "status with a pinned spec")
	r.contains(t, "status pinned", "pinned: beta ("+betaID+") is marked for deletion, 1 instance still uses it")

	// Exit codes for scripts: refused credentials 3, unreachable 4, usage 2.
	s.cli([]string{"SPECSYNC_ADMIN_TOKEN=wrong-token-0123456789"}, "status").must(t, 3, "wrong admin token")
	s.cli([]string{"SPECSYNC_BROKER_PASSWORD=wrong"}, "catalog").must(t, 3, "wrong broker password")
	s.cli([]string{"SPECSYNC_URL=http://127.0.0.1:1"}, "status").must(t, 4, "unreachable")
	s.cli(nil, "status", "--output", "yaml").must(t, 2, "bad --output")
	s.cli(nil, "reconcile").must(t, 2, "the old server-side command name")
	// The local tools are specsync-local's; the operator binary says so.
	for _, tool := range []string{"run", "demo", "local"} {
		s.cli(nil, tool).must(t, 2, "specsync "+tool).contains(t, "specsync "+tool, "specsync-local")
	}

	// Separate URLs per function, as production has: a wrong catalog URL
	// fails status while the bootstrap URL still works.
	s.cli([]string{"SPECSYNC_CATALOG_URL=http://127.0.0.1:1"}, "status").must(t, 4, "status on a wrong catalog URL")
	s.cli([]string{"SPECSYNC_URL=http://127.0.0.1:1", "SPECSYNC_BOOTSTRAP_URL=" + s.url}, "bootstrap").must(t, 0, "bootstrap on its own URL")
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// config check needs no stack: every problem of a bad file, with its line.
func TestE2EConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`registries:
  - name: team-a
    type: http
    http:
      url: https://example.com/index.yaml
      timeot: 5s
  - name: team-a
    type: oci
    oci: {host: "${SPECSYNC_TEST_SURELY_UNSET}"}
  - name: Team_C
    type: dir
    dir: {embedded: true}
    allow: ["(["]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t}
	r := s.cli(nil, "config", "check", bad).must(t, 1, "config check bad file")
	for _, want := range []string{
		bad + ":6: registries[0].http.timeot: unknown field",
		bad + ":7: registries[1] (team-a): name \"team-a\" is already used by registries[0]",
		bad + ":9: environment variable SPECSYNC_TEST_SURELY_UNSET is not set",
		bad + ":10: registries[2] (Team_C): name \"Team_C\" must be a DNS label",
		bad + ":13: registries[2] (Team_C): allow[0] \"([\" is not a valid regular expression",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("config check output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = s.cli(nil, "config", "check", "-o", "json", bad).must(t, 1, "config check -o json bad file")
	var res config.Report
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	var lines []int
	for _, p := range res.Problems {
		lines = append(lines, p.Line)
	}
	for _, want := range []int{6, 7, 9, 10, 13} {
		if !slices.Contains(lines, want) {
			t.Errorf("config check JSON has no problem on line %d: %+v", want, res)
		}
	}
	if res.OK || res.File != bad {
		t.Errorf("config check JSON: %+v", res)
	}
	// The demo file references ${SPECSYNC_DEMO_REGISTRY}: set, it is fine.
	r = s.cli([]string{"SPECSYNC_DEMO_REGISTRY=127.0.0.1:5000"}, "config", "check", "../examples/registries.yaml").must(t, 0, "config check the demo file")
	r.contains(t, "config check ok", "ok, 1 registry")
}

// lineWatcher collects a background process's stdout lines.
type lineWatcher struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.lines = append(l.lines, s)
	}
	return len(p), nil
}

func (l *lineWatcher) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		l.mu.Lock()
		for _, s := range l.lines {
			if re.MatchString(s) {
				l.mu.Unlock()
				return s
			}
		}
		all := strings.Join(l.lines, "\n")
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %s within %s; output:\n%s", re, within, all)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// specsync changes --follow is a watcher: a revision the feed does not
// hold (410) makes it re-list and resume, and then every change shows up
// as it happens; an interrupt ends it with exit 0.
func TestE2ECLIChangesFollow(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t, "alpha")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))
	s.bootstrap()

	r := s.cli(nil, "changes", "--since", "0", "-o", "json").must(t, 0, "changes --since 0")
	var page api.ChangePage
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Changes) != 2 || page.Next != 2 {
		t.Fatalf("changes since 0: %v %s", err, r.stdout)
	}
	r = s.cli(nil, "changes").must(t, 0, "changes table")
	if !regexp.MustCompile(`(?m)^1\s+\S+\s+created\s+team-./(alpha|gamma)\s`).MatchString(r.stdout) {
		t.Errorf("changes table:\n%s", r.stdout)
	}

	cmd := exec.Command(specsyncBinary(t), "changes", "--follow", "--since", "999", "--wait", "2s")
	cmd.Env = append(os.Environ(), "SPECSYNC_URL="+s.url, "SPECSYNC_OUTPUT=", "SPECSYNC_CATALOG_URL=",
		"SPECSYNC_BROKER_USERNAME="+brokerUser, "SPECSYNC_BROKER_PASSWORD="+brokerPass)
	out := &lineWatcher{}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	out.waitFor(t, regexp.MustCompile(`^# listed the catalog \(revision 999 is not in the feed \(410 Gone\)\): revision 2, 2 services$`), 20*time.Second)

	a.set(false, "alpha", "omega")
	s.bootstrap()
	out.waitFor(t, regexp.MustCompile(`^3\s+\S+\s+created\s+team-a/omega\s+\S+\s+\(3 services\)$`), 20*time.Second)
	a.set(false, "omega")
	s.bootstrap()
	out.waitFor(t, regexp.MustCompile(`^4\s+\S+\s+marked\s+team-a/alpha\s+\S+\s+\(2 services\)$`), 20*time.Second)

	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("changes --follow after an interrupt: %v\n%s", err, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("changes --follow did not stop on an interrupt")
	}
}

func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}
