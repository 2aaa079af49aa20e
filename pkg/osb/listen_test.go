package osb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
)

// polled is a long poll's answer.
type polled struct {
	r    response
	page api.ChangePage
	err  error
}

// longPoll starts GET /v2/catalog/changes?since=N&wait=20s and returns
// where its answer will come. The wait only bounds a broken test: every
// test here makes the change the poll waits for.
func (e *env) longPoll(since int64) <-chan polled {
	out := make(chan polled, 1)
	req := e.request(http.MethodGet, fmt.Sprintf("/v2/catalog/changes?since=%d&wait=20s", since), "")
	go func() {
		r, err := e.try(req)
		p := polled{r: r, err: err}
		if err == nil && r.status == http.StatusOK {
			p.err = json.Unmarshal(r.body, &p.page)
		}
		out <- p
	}()
	return out
}

// wantChange checks that a long poll answered with exactly one change,
// revision rev, of the service name.
func wantChange(t *testing.T, p polled, rev int64, name string) {
	t.Helper()
	if p.err != nil {
		t.Fatal(p.err)
	}
	if p.r.status != http.StatusOK {
		t.Fatalf("long poll: %d %s", p.r.status, p.r.body)
	}
	if len(p.page.Changes) != 1 || p.page.Changes[0].Revision != rev || p.page.Changes[0].Name != name || p.page.Next != rev || p.page.Revision != rev {
		t.Fatalf("long poll answered %s; want the change of %s at revision %d", p.r.body, name, rev)
	}
}

// waitingOn waits until n long polls wait on a live listener.
func (e *env) waitingOn(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d long polls waiting on a live listener", n), func() bool {
		s := e.broker.Listener()
		return s.Waiters == n && s.Live
	})
}

// A waiting long poll hears a commit through the listener, on a broker
// whose cached revision is not read again for an hour: the old loop,
// which waited on the cached revision only, answered such a poll empty
// when its wait was over. The plain GET keeps its window: the catalog
// this instance serves is still the one it cached.
func TestLongPollHearsACommit(t *testing.T) {
	e := newEnv(t, time.Hour) // the clock never moves: the cache never refreshes by itself
	e.seed(parseSpec(t, specYAML("alpha")))
	if _, r := e.catalog(); r.header.Get(api.RevisionHeader) != "1" {
		t.Fatalf("X-Catalog-Revision %q, want 1", r.header.Get(api.RevisionHeader))
	}
	poll := e.longPoll(1)
	waitFor(t, "the long poll to wait", func() bool { return e.broker.Listener().Waiters == 1 })
	e.seed(parseSpec(t, specYAML("beta")))
	wantChange(t, <-poll, 2, "beta")
	if _, r := e.catalog(); r.header.Get(api.RevisionHeader) != "1" {
		t.Fatalf("GET /v2/catalog inside its window says revision %s, want the cached 1", r.header.Get(api.RevisionHeader))
	}
}

// Fifty waiters share one listener: all of them get the change, the
// listener was started once, and it read two snapshots (the revision as
// it started, and the commit), not one per waiter.
func TestLongPollWaitersShareOneListener(t *testing.T) {
	const waiters = 50
	e := newEnv(t, time.Hour)
	e.seed(parseSpec(t, specYAML("alpha")))
	e.catalog()
	polls := make([]<-chan polled, waiters)
	for i := range polls {
		polls[i] = e.longPoll(1)
	}
	e.waitingOn(t, waiters)
	if s := e.broker.Listener(); s.Started != 1 || s.Reads != 1 {
		t.Fatalf("%d waiters: %d listens started, %d reads; want 1 and 1", waiters, s.Started, s.Reads)
	}
	e.seed(parseSpec(t, specYAML("beta")))
	for _, p := range polls {
		wantChange(t, <-p, 2, "beta")
	}
	if s := e.broker.Listener(); s.Started != 1 || s.Reads != 2 || s.Revision != 2 {
		t.Fatalf("after one commit heard by %d waiters: %d listens started, %d reads, revision %d; want 1, 2 and 2", waiters, s.Started, s.Reads, s.Revision)
	}
}

// The listener outlives the last waiter by its linger: a watcher that
// asks again after its answer finds it still listening (and already
// knowing the revision), so one listen serves both polls.
func TestListenerLingersBetweenPolls(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.broker.TuneListener(time.Hour, 10*time.Millisecond, 50*time.Millisecond)
	e.seed(parseSpec(t, specYAML("alpha")))
	e.catalog()
	poll := e.longPoll(1)
	e.waitingOn(t, 1)
	e.seed(parseSpec(t, specYAML("beta")))
	wantChange(t, <-poll, 2, "beta")
	if s := e.broker.Listener(); s.Waiters != 0 || !s.Live || s.Running != 1 {
		t.Fatalf("after the last waiter left: %+v; want the listener lingering, live", s)
	}
	poll = e.longPoll(2)
	e.waitingOn(t, 1)
	e.seed(parseSpec(t, specYAML("gamma")))
	wantChange(t, <-poll, 3, "gamma")
	if s := e.broker.Listener(); s.Started != 1 || s.Reads != 3 {
		t.Fatalf("two polls one after the other: %d listens started, %d reads; want 1 (one listener) and 3", s.Started, s.Reads)
	}
}

// listenGate stands between a Firestore client and the emulator for the
// Listen calls (a stream interceptor for FirestoreVia): it counts the
// listen streams open, and can cut them (as a broken connection:
// Unavailable, which the client library answers by opening another),
// refuse new ones (PermissionDenied, which it gives up on), or hold new
// ones unanswered (the client retries silently, deaf meanwhile).
type listenGate struct {
	refuse, hang atomic.Bool
	open         atomic.Int64

	mu      sync.Mutex
	streams map[*gatedStream]bool
}

func newListenGate() *listenGate { return &listenGate{streams: map[*gatedStream]bool{}} }

// client is a client on project whose Listen calls go through g.
func (g *listenGate) client(t *testing.T, project string) *firestore.Client {
	pass := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	return emulatortest.FirestoreVia(t, project, "", pass, grpc.WithStreamInterceptor(g.stream))
}

func (g *listenGate) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if !strings.HasSuffix(method, "/Listen") {
		return streamer(ctx, desc, cc, method, opts...)
	}
	if g.refuse.Load() {
		return nil, status.Error(codes.PermissionDenied, "listen refused by the test")
	}
	if g.hang.Load() {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	ctx, cancel := context.WithCancel(ctx)
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		cancel()
		return nil, err
	}
	gs := &gatedStream{ClientStream: s, g: g, cancel: cancel}
	g.mu.Lock()
	g.streams[gs] = true
	g.mu.Unlock()
	g.open.Add(1)
	return gs, nil
}

// cut breaks every open listen stream.
func (g *listenGate) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for s := range g.streams {
		s.cut.Store(true)
		s.cancel()
	}
}

type gatedStream struct {
	grpc.ClientStream
	g      *listenGate
	cancel context.CancelFunc
	cut    atomic.Bool
	once   sync.Once
}

func (s *gatedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		return nil
	}
	s.once.Do(func() {
		s.cancel()
		s.g.mu.Lock()
		delete(s.g.streams, s)
		s.g.mu.Unlock()
		s.g.open.Add(-1)
	})
	if s.cut.Load() {
		return status.Error(codes.Unavailable, "listen stream cut by the test")
	}
	return err
}

// The listener stops when the last waiter has left and its linger is
// over: its goroutine ends, its listen stream is closed, and the process
// is back to the goroutines it had before anyone waited.
func TestListenerStopsWhenTheLastWaiterLeaves(t *testing.T) {
	gate := newListenGate()
	e := newEnvOn(t, gate.client(t, emulatortest.ProjectID(t)), time.Hour)
	e.broker.TuneListener(50*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond)
	e.seed(parseSpec(t, specYAML("alpha")))
	e.catalog()
	e.srv.Client().CloseIdleConnections()
	before := runtime.NumGoroutine()
	polls := []<-chan polled{e.longPoll(1), e.longPoll(1), e.longPoll(1)}
	e.waitingOn(t, len(polls))
	if gate.open.Load() != 1 {
		t.Fatalf("%d listen streams open for %d waiters, want 1", gate.open.Load(), len(polls))
	}
	e.seed(parseSpec(t, specYAML("beta")))
	for _, p := range polls {
		wantChange(t, <-p, 2, "beta")
	}
	waitFor(t, "the listener to stop after its linger", func() bool { return e.broker.Listener().Running == 0 })
	waitFor(t, "the listen stream to close", func() bool { return gate.open.Load() == 0 })
	e.srv.Client().CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after the last waiter left, %d before the first came:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := e.broker.Listener(); s.Live || s.Started != 1 {
		t.Fatalf("stopped listener: %+v; want not live, started once", s)
	}
}

// logLines counts the lines of logs that contain msg.
func logLines(logs *logBuffer, msg string) int {
	return strings.Count(logs.String(), msg)
}

const (
	listenFailedLog = "catalog revision listener failed: waiting long polls fall back"
	listenBackLog   = "catalog revision listener is back"
)

// A listener whose stream is cut and whose listens are refused from then
// on never fails nor hangs a waiter: the waiters fall back to the cached
// revision and get the change once the refresh window has passed (the
// old path). The failure is logged once, however many waiters and
// retries; once Firestore accepts listens again the listener is back
// and a waiter hears the next commit without the window.
func TestListenerFailureFallsBackToTheWindow(t *testing.T) {
	gate := newListenGate()
	e := newEnvOn(t, gate.client(t, emulatortest.ProjectID(t)), time.Minute)
	logs := &logBuffer{}
	e.broker.ListenerLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	e.broker.TuneListener(time.Hour, 10*time.Millisecond, 50*time.Millisecond)
	e.seed(parseSpec(t, specYAML("alpha")))
	e.catalog()
	polls := []<-chan polled{e.longPoll(1), e.longPoll(1), e.longPoll(1)}
	e.waitingOn(t, len(polls))

	gate.refuse.Store(true)
	gate.cut()
	waitFor(t, "the listener to fail and be retried", func() bool {
		s := e.broker.Listener()
		return !s.Live && s.Failures >= 3
	})
	e.seed(parseSpec(t, specYAML("beta")))
	e.clock.Advance(time.Minute) // the window passes: the next poll of the cache reads revision 2
	for _, p := range polls {
		wantChange(t, <-p, 2, "beta")
	}
	if n := logLines(logs, listenFailedLog); n != 1 {
		t.Fatalf("the failing listener (%d failures) logged %d warnings, want 1:\n%s", e.broker.Listener().Failures, n, logs)
	}

	gate.refuse.Store(false)
	poll := e.longPoll(2)
	e.waitingOn(t, 1)
	e.seed(parseSpec(t, specYAML("gamma")))
	wantChange(t, <-poll, 3, "gamma") // the window has not passed again: heard
	if n := logLines(logs, listenBackLog); n != 1 {
		t.Fatalf("the listener back logged %d times, want 1:\n%s", n, logs)
	}
}

// A listener that is deaf without failing (its stream broken, the client
// library reopening it silently and the reopen unanswered) still looks
// live: the cached revision, polled alongside it, delivers the change
// once the window has passed.
func TestDeafListenerFallsBackToTheWindow(t *testing.T) {
	gate := newListenGate()
	e := newEnvOn(t, gate.client(t, emulatortest.ProjectID(t)), time.Minute)
	e.broker.TuneListener(0, 10*time.Millisecond, 50*time.Millisecond)
	e.seed(parseSpec(t, specYAML("alpha")))
	e.catalog()
	poll := e.longPoll(1)
	e.waitingOn(t, 1)
	gate.hang.Store(true)
	gate.cut()
	waitFor(t, "the cut stream to close", func() bool { return gate.open.Load() == 0 })
	e.seed(parseSpec(t, specYAML("beta")))
	e.clock.Advance(time.Minute)
	wantChange(t, <-poll, 2, "beta")
	if s := e.broker.Listener(); s.Failures != 0 {
		t.Fatalf("the deaf listener failed %d times; the test meant it deaf, not failed", s.Failures)
	}
}

// The revision going back (the broker pointed at another database, here
// the emulator's project emptied and written again) is what the feed
// answers today for a since ahead of the catalog: 410 Gone with the
// current revision, told by the listener at once instead of when the
// cached revision is read again (here: in an hour).
func TestLongPollRevisionGoesBack(t *testing.T) {
	client, project := emulatortest.FirestoreProject(t)
	e := newEnvOn(t, client, time.Hour)
	e.seed(parseSpec(t, specYAML("alpha")), parseSpec(t, specYAML("beta")), parseSpec(t, specYAML("gamma")))
	if _, r := e.catalog(); r.header.Get(api.RevisionHeader) != "3" {
		t.Fatalf("X-Catalog-Revision %q, want 3", r.header.Get(api.RevisionHeader))
	}
	poll := e.longPoll(3)
	e.waitingOn(t, 1)
	if err := emulator.ResetFirestore(e.ctx, os.Getenv(emulator.FirestoreEnv), project); err != nil {
		t.Fatal(err)
	}
	e.seed(parseSpec(t, specYAML("delta"))) // revision 1 of the new database
	// The listener may hear the emptied database (revision 0) first:
	// either is the catalog's revision when the poll answers.
	p := <-poll
	var gone api.Gone
	if p.err != nil || p.r.status != http.StatusGone || json.Unmarshal(p.r.body, &gone) != nil || gone.Revision > 1 || p.r.header.Get(api.RevisionHeader) != fmt.Sprint(gone.Revision) {
		t.Fatalf("a poll at 3 when the catalog went back to 1: %v %d %s", p.err, p.r.status, p.r.body)
	}
}
