package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator"
)

// The test binary doubles as the child command: with helperEnv set it
// reports what it was given instead of running tests.
const helperEnv = "WITHEMULATORS_TEST_CHILD"

var binary string

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(child(mode))
	}
	dir, err := os.MkdirTemp("", "withemulators-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "withemulators")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build withemulators: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// child prints, per variable, its value and whether an emulator answers
// there, then exits with the code in mode, or sleeps if mode is "sleep".
func child(mode string) int {
	for _, env := range []string{emulator.FirestoreEnv, emulator.PubSubEnv} {
		host := os.Getenv(env)
		fmt.Printf("%s=%s ready=%v\n", env, host, host != "" && emulator.Ready(context.Background(), host))
	}
	if mode == "sleep" {
		time.Sleep(5 * time.Minute)
		return 0
	}
	code, _ := strconv.Atoi(mode)
	return code
}

type report struct {
	hosts map[string]string
	ready map[string]bool
}

func parseReport(t *testing.T, out string) report {
	t.Helper()
	r := report{hosts: map[string]string{}, ready: map[string]bool{}}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		kv, ready, ok := strings.Cut(line, " ready=")
		if !ok {
			t.Fatalf("unexpected child output line %q", line)
		}
		k, v, _ := strings.Cut(kv, "=")
		r.hosts[k] = v
		r.ready[k] = ready == "true"
	}
	return r
}

// command runs withemulators with the test's environment minus the
// emulator variables, plus extraEnv.
func command(t *testing.T, mode string, extraEnv []string, flags ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append(flags, "--", self, "-test.run=^$")
	cmd := exec.Command(binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, emulator.FirestoreEnv+"=") && !strings.HasPrefix(kv, emulator.PubSubEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, helperEnv+"="+mode)
	cmd.Env = append(cmd.Env, extraEnv...)
	return cmd
}

func exitCodeOf(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("run withemulators: %v", err)
	}
	return ee.ExitCode()
}

// assertStopped checks that nothing answers on host any more and that no
// JVM serving that port is left.
func assertStopped(t *testing.T, host string) {
	t.Helper()
	if emulator.Ready(context.Background(), host) {
		t.Errorf("emulator on %s still answers after withemulators exited", host)
	}
	_, port, _ := strings.Cut(host, ":")
	matches, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmdline, "java") && strings.Contains(cmdline, "--port="+port) {
			t.Errorf("JVM still running after withemulators exited: %s: %s", filepath.Dir(m), cmdline)
		}
	}
}

func TestStartsBothAndPassesExitCode(t *testing.T) {
	t.Parallel()
	cmd := command(t, "3", nil)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if code := exitCodeOf(t, err); code != 3 {
		t.Fatalf("exit code %d, want the child's 3\nstderr:\n%s", code, &stderr)
	}
	r := parseReport(t, string(out))
	for _, env := range []string{emulator.FirestoreEnv, emulator.PubSubEnv} {
		if r.hosts[env] == "" || !r.ready[env] {
			t.Errorf("child saw %s=%q ready=%v, want a running emulator", env, r.hosts[env], r.ready[env])
		}
	}
	t.Logf("withemulators log:\n%s", &stderr)
	for _, env := range []string{emulator.FirestoreEnv, emulator.PubSubEnv} {
		assertStopped(t, r.hosts[env])
	}
}

func TestReusesAnsweringEmulators(t *testing.T) {
	t.Parallel()
	// Anything that answers GET / with "Ok" passes for an emulator.
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "Ok\n")
	}))
	defer fake.Close()
	host := strings.TrimPrefix(fake.URL, "http://")
	cmd := command(t, "0", []string{emulator.FirestoreEnv + "=" + host, emulator.PubSubEnv + "=" + host})
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	out, err := cmd.Output()
	if code := exitCodeOf(t, err); code != 0 {
		t.Fatalf("exit code %d\nstderr:\n%s", code, &stderr)
	}
	r := parseReport(t, string(out))
	for _, env := range []string{emulator.FirestoreEnv, emulator.PubSubEnv} {
		if r.hosts[env] != host {
			t.Errorf("child saw %s=%q, want the reused %s", env, r.hosts[env], host)
		}
	}
	if strings.Contains(stderr.String(), "started emulator") {
		t.Errorf("started an emulator although both were reusable:\n%s", &stderr)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("took %v; reusing should not wait for an emulator", d)
	}
}

func TestSignalStopsEverything(t *testing.T) {
	t.Parallel()
	// Only Pub/Sub, named by a variable that points at nothing: it must
	// be replaced, and Firestore must not appear at all.
	cmd := command(t, "sleep", []string{emulator.PubSubEnv + "=127.0.0.1:1"}, "-pubsub", "-project", "sig-test")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	for len(lines) < 2 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child reported %q\nstderr:\n%s", lines, &stderr)
	}
	r := parseReport(t, strings.Join(lines, "\n"))
	if h := r.hosts[emulator.FirestoreEnv]; h != "" {
		t.Errorf("child saw %s=%q with -pubsub only", emulator.FirestoreEnv, h)
	}
	host := r.hosts[emulator.PubSubEnv]
	if host == "127.0.0.1:1" || !r.ready[emulator.PubSubEnv] {
		t.Errorf("child saw %s=%q ready=%v, want a fresh running emulator", emulator.PubSubEnv, host, r.ready[emulator.PubSubEnv])
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if code := exitCodeOf(t, err); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code %d, want %d (child killed by the forwarded SIGTERM)\nstderr:\n%s", code, 128+int(syscall.SIGTERM), &stderr)
	}
	if !strings.Contains(stderr.String(), "does not answer") {
		t.Errorf("no warning about the dead %s:\n%s", emulator.PubSubEnv, &stderr)
	}
	assertStopped(t, host)
}

func TestUsage(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary).CombinedOutput()
	if code := exitCodeOf(t, err); code != 2 {
		t.Errorf("exit code without a command = %d, want 2", code)
	}
	if !strings.Contains(string(out), "usage: withemulators") {
		t.Errorf("no usage message: %s", out)
	}
	// Reuses a fake emulator so as not to wait for a real one.
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "Ok")
	}))
	defer fake.Close()
	cmd := exec.Command(binary, "-pubsub", "--", "/nonexistent/cmd")
	cmd.Env = append(os.Environ(), emulator.PubSubEnv+"="+strings.TrimPrefix(fake.URL, "http://"))
	if _, err := cmd.CombinedOutput(); exitCodeOf(t, err) != 127 {
		t.Errorf("exit code for a missing command = %d, want 127", exitCodeOf(t, err))
	}
}
