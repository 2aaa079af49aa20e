package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEmulatorsStartAndStop starts its own emulators even when the env
// variables name running ones: what is under test is the starting and,
// above all, the stopping.
func TestEmulatorsStartAndStop(t *testing.T) {
	t.Run("firestore", func(t *testing.T) {
		t.Parallel()
		p := startForTest(t, "firestore", StartFirestore)
		if got, want := p.Env(), FirestoreEnv+"="+p.Host; got != want {
			t.Errorf("Env() = %q, want %q", got, want)
		}
		exerciseFirestore(t, p.Host)
		stopAndCheckGroupGone(t, p)
	})
	t.Run("pubsub", func(t *testing.T) {
		t.Parallel()
		p := startForTest(t, "pubsub", func(ctx context.Context) (*Process, error) {
			return StartPubSub(ctx, "emulator-test")
		})
		if got, want := p.Env(), PubSubEnv+"="+p.Host; got != want {
			t.Errorf("Env() = %q, want %q", got, want)
		}
		exercisePubSub(t, p.Host)
		stopAndCheckGroupGone(t, p)
	})
}

func startForTest(t *testing.T, name string, start func(context.Context) (*Process, error)) *Process {
	t.Helper()
	t0 := time.Now()
	p, err := start(t.Context())
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { _ = p.Stop() }) // in case an assertion fails first
	t.Logf("%s emulator answered on %s after %v", name, p.Host, time.Since(t0).Round(time.Millisecond))
	if p.Name != name {
		t.Errorf("Name = %q, want %q", p.Name, name)
	}
	if !regexp.MustCompile(`^127\.0\.0\.1:\d+$`).MatchString(p.Host) {
		t.Errorf("Host = %q, want 127.0.0.1:PORT", p.Host)
	}
	if !Ready(t.Context(), p.Host) {
		t.Errorf("Ready(%s) = false right after start", p.Host)
	}
	return p
}

func stopAndCheckGroupGone(t *testing.T, p *Process) {
	t.Helper()
	// The point of the process group: the JVM is not the gcloud process,
	// so signalling gcloud alone would leave it behind.
	javas := javaMembers(t, p.pgid)
	if len(javas) == 0 {
		t.Fatalf("no java process in process group %d before Stop; the group check below would prove nothing", p.pgid)
	}
	for _, j := range javas {
		if j.pid == p.pgid {
			t.Fatalf("java is the group leader %d; expected it under the gcloud wrapper", j.pid)
		}
	}
	logDir := filepath.Dir(p.LogPath())

	t0 := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("%s stopped in %v", p.Name, time.Since(t0).Round(time.Millisecond))
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}

	if err := syscall.Kill(-p.pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(-%d, 0) after Stop = %v, want ESRCH", p.pgid, err)
	}
	if left := javaMembers(t, p.pgid); len(left) > 0 {
		t.Errorf("java processes of group %d left after Stop: %+v", p.pgid, left)
	}
	for _, j := range javas {
		if alive, state := pidAlive(j.pid); alive {
			t.Errorf("java pid %d still exists after Stop (state %c): %s", j.pid, state, j.cmdline)
		}
	}
	if Ready(t.Context(), p.Host) {
		t.Errorf("%s still answers after Stop", p.Host)
	}
	if _, err := os.Stat(logDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("emulator temp dir %s left after Stop (stat: %v)", logDir, err)
	}
}

func javaMembers(t *testing.T, pgid int) []procInfo {
	t.Helper()
	members, ok := groupMembers(pgid)
	if !ok {
		t.Fatal("cannot read /proc")
	}
	var javas []procInfo
	for _, m := range members {
		if strings.Contains(m.cmdline, "java") && m.state != 'Z' {
			javas = append(javas, m)
		}
	}
	return javas
}

// pidAlive reports whether pid exists and is not a zombie. A pid reused by
// an unrelated process would be a false alarm, which is unlikely within a
// test and errs on the loud side.
func pidAlive(pid int) (bool, byte) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, 0
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true, '?'
	}
	state := s[i+2]
	return state != 'Z', state
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// exerciseFirestore writes through the emulator's REST API and checks that
// ResetFirestore empties only the project it names.
func exerciseFirestore(t *testing.T, host string) {
	t.Helper()
	doc := func(project string) string {
		return fmt.Sprintf("http://%s/v1/projects/%s/databases/(default)/documents/things/a", host, project)
	}
	create := func(project string) {
		u := fmt.Sprintf("http://%s/v1/projects/%s/databases/(default)/documents/things?documentId=a", host, project)
		if code, body := do(t, http.MethodPost, u, `{"fields":{"n":{"integerValue":"1"}}}`); code != http.StatusOK {
			t.Fatalf("create document in %s: %d %s", project, code, body)
		}
	}
	create("proj-a")
	create("proj-b")
	if code, body := do(t, http.MethodGet, doc("proj-a"), ""); code != http.StatusOK || !strings.Contains(body, `"integerValue": "1"`) {
		t.Fatalf("read back document: %d %s", code, body)
	}
	if err := ResetFirestore(t.Context(), host, "proj-a"); err != nil {
		t.Fatalf("ResetFirestore: %v", err)
	}
	if code, body := do(t, http.MethodGet, doc("proj-a"), ""); code != http.StatusNotFound {
		t.Errorf("document after ResetFirestore: %d %s, want 404", code, body)
	}
	if code, body := do(t, http.MethodGet, doc("proj-b"), ""); code != http.StatusOK {
		t.Errorf("other project's document after ResetFirestore: %d %s, want 200", code, body)
	}
}

func exercisePubSub(t *testing.T, host string) {
	t.Helper()
	topic := fmt.Sprintf("http://%s/v1/projects/any-project/topics/topic-1", host)
	if code, body := do(t, http.MethodPut, topic, "{}"); code != http.StatusOK {
		t.Fatalf("create topic: %d %s", code, body)
	}
	if code, body := do(t, http.MethodGet, topic, ""); code != http.StatusOK || !strings.Contains(body, "projects/any-project/topics/topic-1") {
		t.Fatalf("get topic: %d %s", code, body)
	}
}

func TestResetFirestoreReportsFailure(t *testing.T) {
	r, err := StartRegistry("127.0.0.1:0") // answers, but not as Firestore
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = ResetFirestore(t.Context(), r.Host(), "p")
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("ResetFirestore against a non-emulator = %v, want a 404 error", err)
	}
}

func TestStartWithoutGcloud(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := StartFirestore(t.Context())
	if !errors.Is(err, ErrNoGcloud) {
		t.Errorf("StartFirestore without gcloud = %v, want ErrNoGcloud", err)
	}
	_, err = StartPubSub(t.Context(), "p")
	if !errors.Is(err, ErrNoGcloud) {
		t.Errorf("StartPubSub without gcloud = %v, want ErrNoGcloud", err)
	}
}

// fakeGcloud puts a shell script named gcloud first on PATH.
func fakeGcloud(t *testing.T, script string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gcloud"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
}

func TestStartComponentMissing(t *testing.T) {
	// What gcloud 528 prints when the component is absent and prompts are
	// disabled.
	fakeGcloud(t, `echo "You need the [cloud-firestore-emulator] component to use the Firestore emulator." >&2
echo "ERROR: (gcloud.emulators.firestore.start) The following components are required to run this command, but are not currently installed" >&2
exit 1
`)
	_, err := StartFirestore(t.Context())
	if !errors.Is(err, ErrComponentMissing) {
		t.Fatalf("StartFirestore with the component missing = %v, want ErrComponentMissing", err)
	}
	for _, want := range []string{"cloud-firestore-emulator", "gcloud components install", "are not currently installed", "exit status 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestStartFailureKillsGroup uses a fake gcloud that never answers, ignores
// SIGTERM and leaves a child behind, the worst case for Stop.
func TestStartFailureKillsGroup(t *testing.T) {
	defer func(st, sg time.Duration) { StartTimeout, StopGrace = st, sg }(StartTimeout, StopGrace)
	StartTimeout, StopGrace = time.Second, 300*time.Millisecond
	pidFile := filepath.Join(t.TempDir(), "pid")
	fakeGcloud(t, `trap '' TERM
echo $$ > `+pidFile+`
echo "boom: something broke on $*"
/bin/sleep 300 &
wait
`)
	t0 := time.Now()
	_, err := StartPubSub(t.Context(), "p")
	if err == nil {
		t.Fatal("StartPubSub with a fake gcloud succeeded")
	}
	t.Logf("failed after %v: %v", time.Since(t0).Round(time.Millisecond), err)
	for _, want := range []string{"not answering", "boom: something broke on beta emulators pubsub start --host-port=127.0.0.1:", "--project=p"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if errors.Is(err, ErrComponentMissing) {
		t.Errorf("error wrongly classified as a missing component: %v", err)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pgid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(-%d, 0) after a failed start = %v, want ESRCH", pgid, err)
	}
}

// A port another process takes between the pick and the JVM's bind
// costs a start on a fresh port, not the test run: the first port picked
// here is held by a listener that accepts and never answers.
func TestStartRetriesAPortTakenBeforeTheBind(t *testing.T) {
	defer func(f func() (string, error)) { freeAddr = f }(freeAddr)
	var taken []string
	freeAddr = func() (string, error) {
		if len(taken) > 0 {
			return freeLoopbackAddr()
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		t.Cleanup(func() { l.Close() })
		taken = append(taken, l.Addr().String())
		return l.Addr().String(), nil
	}
	p := startForTest(t, "firestore", StartFirestore)
	if len(taken) != 1 || p.Host == taken[0] {
		t.Errorf("started on %s, after taking %v: want a fresh port after the taken one", p.Host, taken)
	}
	exerciseFirestore(t, p.Host)
	stopAndCheckGroupGone(t, p)
}

func TestStartHonoursContext(t *testing.T) {
	fakeGcloud(t, "exec /bin/sleep 300\n")
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := StartFirestore(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("StartFirestore with an expiring context = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("StartFirestore took %v to give up", d)
	}
}
