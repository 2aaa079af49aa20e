package osb_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// TestCacheConcurrentColdGets: callers arriving together at a cold cache
// share one render instead of each querying every spec.
func TestCacheConcurrentColdGets(t *testing.T) {
	e := newEnv(t, time.Minute)
	specs := []*spec.Spec{parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")), parseSpec(t, specYAML("c"))}
	e.seed(specs...)
	c := e.newCache(time.Minute)
	const callers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	tags := map[string]bool{}
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			r, reads, err := c.Get(e.ctx)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			total += reads
			tags[r.ETag] = true
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if want := int64(1 + len(specs)); total != want || len(tags) != 1 {
		t.Fatalf("%d callers: %d reads in all, %d tags; want %d and 1", callers, total, len(tags), want)
	}
}

// TestCacheConcurrentRefreshes: many requests (inside the window, past
// it, fresh) while registries write and commit, for the race detector;
// afterwards the cache serves exactly a full render.
func TestCacheConcurrentRefreshes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Minute)
	offers := e.seedMany(10)
	c := &osb.Cache{Store: e.st, Window: 2 * time.Millisecond} // the real clock
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				get := c.Get
				if i%3 == 0 {
					get = c.GetFresh
				}
				r, _, err := get(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				if r.ETag != catalog.ETag(r.Revision, string(r.Body())) {
					errs <- fmt.Errorf("ETag %s does not match revision %d and its body", r.ETag, r.Revision)
					return
				}
			}
		})
	}
	for v := 1; v <= 8; v++ {
		for i := range 3 {
			e.upsert(offerSpec(t, testReg, offers[(v+i)%len(offers)].Spec.Name, "", v))
		}
		if v%3 == 0 {
			if ok, err := e.st.MarkSpec(e.ctx, testReg, offers[v].Spec.ID, fmt.Sprintf("run-%d", v)); err != nil || !ok {
				t.Errorf("mark: %v %v", ok, err)
			}
		}
		e.commit()
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r, _, err := c.GetFresh(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.wantFullRender("after concurrent refreshes", r)
}

// gate forwards TCP to the Firestore emulator; closed, it holds what the
// emulator answers until opened, so a test can keep a read in flight
// after the emulator served it.
type gate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
	held   int // chunks held since closed
}

func newGate(t *testing.T) (*gate, string) {
	t.Helper()
	target := os.Getenv("FIRESTORE_EMULATOR_HOST")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	var conns []net.Conn
	var connsMu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		g.open()
		connsMu.Lock()
		defer connsMu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			connsMu.Lock()
			conns = append(conns, c, up)
			connsMu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go g.pipe(c, up)
		}
	}()
	return g, ln.Addr().String()
}

func (g *gate) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			g.mu.Lock()
			if g.closed {
				g.held++
			}
			for g.closed {
				g.cond.Wait()
			}
			g.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (g *gate) close() { g.mu.Lock(); g.closed, g.held = true, 0; g.mu.Unlock() }

func (g *gate) open() { g.mu.Lock(); g.closed = false; g.cond.Broadcast(); g.mu.Unlock() }

func (g *gate) heldChunks() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// waitFor polls cond (test synchronisation, not a timed assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCacheFreshSeesEveryEarlierCommit is read-your-writes: a fresh
// caller that arrives while a revision read is in flight does not take
// that read's answer (it may predate the caller's write), but callers
// that arrive together share the next one. The first read is held in
// flight after the emulator answered it; a change is committed; seven
// fresh callers arrive; then the first read is let through.
func TestCacheFreshSeesEveryEarlierCommit(t *testing.T) {
	t.Parallel()
	client, project := emulatortest.FirestoreProject(t)
	writer := storeEnv(t, client)
	writer.seedMany(3)
	g, addr := newGate(t)
	via := emulatortest.FirestoreVia(t, project, addr, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	c := &osb.Cache{Store: store.New(via), Window: time.Hour, Now: writer.clock.Now}
	cold, _ := writer.get(c)

	g.close()
	type result struct {
		r     *osb.Rendered
		reads int64
		err   error
	}
	first := make(chan result, 1)
	go func() {
		r, reads, err := c.GetFresh(writer.ctx)
		first <- result{r, reads, err}
	}()
	waitFor(t, "the first revision read to be answered", func() bool { return g.heldChunks() > 0 })
	time.Sleep(50 * time.Millisecond) // the rest of the answer
	writer.upsert(offerSpec(t, testReg, "late", "", 0))
	rev := writer.commit()
	const callers = 7
	rest := make(chan result, callers)
	for range callers {
		go func() {
			r, reads, err := c.GetFresh(writer.ctx)
			rest <- result{r, reads, err}
		}()
	}
	waitFor(t, "the fresh callers to wait", func() bool { return c.Waiters() == callers })
	g.open()

	f := <-first
	if f.err != nil {
		t.Fatal(f.err)
	}
	if f.r.Revision != cold.Revision {
		t.Fatalf("the first read saw revision %d: it was not held before the commit, so this test tested nothing", f.r.Revision)
	}
	total := f.reads
	for range callers {
		res := <-rest
		if res.err != nil {
			t.Fatal(res.err)
		}
		if res.r.Revision != rev || serviceCount(t, res.r.Body()) != 4 {
			t.Fatalf("a caller that arrived after revision %d was committed got revision %d with %d services", rev, res.r.Revision, serviceCount(t, res.r.Body()))
		}
		total += res.reads
	}
	// The held read (1), then one more for all seven: revision + change.
	if total != 3 {
		t.Fatalf("%d fresh callers read %d documents in all, want 3 (they share the read after the one in flight)", callers+1, total)
	}
}
