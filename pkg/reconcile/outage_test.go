package reconcile_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
)

// outageProxy forwards TCP to the Firestore emulator until cut; cut, it
// drops every connection and refuses new ones — the database gone, as far
// as the client can tell — until restored, with its data intact, as
// Firestore comes back from an outage. (The emulator itself is shared by
// every test here and keeps its data only while it runs.)
type outageProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func newOutageProxy(t *testing.T, target string) *outageProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &outageProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *outageProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

// cut drops every connection and refuses new ones until restore.
func (p *outageProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *outageProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// The database goes away in the middle of a run (after its third write)
// and comes back: after a moment (the client rides it out), or after
// longer than a run may take (the run fails, a later one recovers).
// Either way the runs reach exactly the state of one uninterrupted run,
// and every state on the way passes the checker.
func TestFirestoreOutageMidRun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		outage, limit time.Duration
		mustFail      bool
	}{
		{"brief", 300 * time.Millisecond, time.Minute, false},
		{"longer than a run", 3 * time.Second, time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			outageMidRun(t, c.outage, c.limit, c.mustFail)
		})
	}
}

func outageMidRun(t *testing.T, outage, limit time.Duration, mustFail bool) {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	refClient, _ := emulatortest.FirestoreProject(t)
	_, refReg := crashWorld(t, refClient)
	if run, err := reconcileAndCommit(ctx, refClient, refReg); err != nil || run.Result != api.ResultSucceeded {
		t.Fatalf("uninterrupted run: %s %v", run.Result, err)
	}
	want := outcome(t, refClient)

	client, project := emulatortest.FirestoreProject(t)
	_, reg := crashWorld(t, client)
	proxy := newOutageProxy(t, os.Getenv("FIRESTORE_EMULATOR_HOST"))
	var commits, unavailable atomic.Int64
	var once sync.Once
	via := emulatortest.FirestoreVia(t, project, proxy.ln.Addr().String(), func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if grpcstatus.Code(err) == codes.Unavailable {
			unavailable.Add(1)
		}
		if err == nil && strings.HasSuffix(method, "/Commit") && commits.Add(1) == 3 {
			once.Do(func() {
				proxy.cut()
				time.AfterFunc(outage, proxy.restore)
			})
		}
		return err
	})
	runner := &reconcile.Runner{Store: store.New(via), Logger: logger}

	var results []string
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, limit)
		run, err := runner.Reconcile(rctx, reg)
		cancel()
		results = append(results, string(run.Result))
		invariant.Require(t, client, invariant.Options{})
		if err == nil && run.Result == api.ResultSucceeded {
			break
		}
		if err != nil && !failure.Retryable(err) {
			t.Fatalf("run %d failed with a permanent error: %v", attempt, err)
		}
		if attempt == 5 {
			t.Fatalf("no run succeeded after the outage: %v (last: %v)", results, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if mustFail && len(results) < 2 {
		t.Fatalf("runs %v: no run failed during an outage longer than a run may take", results)
	}
	if unavailable.Load() == 0 {
		t.Fatalf("the outage was never seen by the client (results %v): the test tested nothing", results)
	}
	if _, err := (&reconcile.Committer{Store: store.New(via), Logger: logger}).Commit(ctx); err != nil {
		t.Fatalf("the commit after the outage: %v", err)
	}
	invariant.Require(t, client, invariant.Options{Settled: true, Feed: true})
	if got := outcome(t, client); got != want {
		t.Fatalf("after the outage (runs %v) the state is\n%s\nwant the uninterrupted run's\n%s", results, got, want)
	}
	t.Logf("runs %v; %d calls saw the database unavailable", results, unavailable.Load())
}
