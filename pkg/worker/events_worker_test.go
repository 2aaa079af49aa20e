package worker_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/worker"
)

// upstream is an in-process OCI registry (go-containerregistry's) behind
// a switch that takes it down, and a gate that holds the first request
// for one path until let go.
type upstream struct {
	host string
	down atomic.Bool

	mu      sync.Mutex
	hold    string        // a path prefix whose first request waits
	held    chan struct{} // closed when that request arrived
	release chan struct{} // closed to let it through
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	reg := ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.down.Load() {
			http.Error(w, "registry is down", http.StatusServiceUnavailable)
			return
		}
		u.mu.Lock()
		var wait chan struct{}
		if u.hold != "" && strings.HasPrefix(r.URL.Path, u.hold) {
			u.hold = ""
			close(u.held)
			wait = u.release
		}
		u.mu.Unlock()
		if wait != nil {
			<-wait
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.host = strings.TrimPrefix(srv.URL, "http://")
	return u
}

// holdFirst makes the next request under path wait: held says it came,
// letGo lets it through.
func (u *upstream) holdFirst(path string) (held <-chan struct{}, letGo func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.hold, u.held, u.release = path, make(chan struct{}), make(chan struct{})
	return u.held, sync.OnceFunc(func() { close(u.release) })
}

// spec is a valid spec of name whose description says version.
func spec(name, version string) string {
	return fmt.Sprintf("name: %s\ndescription: %s %s\nplans:\n  - name: p\n    description: p\n", name, name, version)
}

func (u *upstream) push(t *testing.T, repo, version string) {
	t.Helper()
	if _, err := emulator.PushSpecImage(context.Background(), u.host, repo, "latest", base64.StdEncoding.EncodeToString([]byte(spec(repo, version))), nil); err != nil {
		t.Fatalf("push %s: %v", repo, err)
	}
}

func (u *upstream) untag(t *testing.T, repo string) {
	t.Helper()
	ref, err := name.NewTag(u.host+"/"+repo+":latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(ref); err != nil {
		t.Fatalf("delete %s: %v", ref, err)
	}
}

// eventWorld is a worker for one OCI registry, "team", over upstream,
// with leases and commit requests queued in process, as deployed.
type eventWorld struct {
	t      *testing.T
	client *firestore.Client
	st     *store.Store
	up     *upstream
	reg    reconcile.Registry
	w      *worker.Worker
	// fetches counts the fetches of the registry upstream (whole or of
	// named entries): what each run costs there.
	fetches atomic.Int64
}

func newEventWorld(t *testing.T, repos ...string) *eventWorld {
	t.Helper()
	e := &eventWorld{t: t, client: checked(t), up: newUpstream(t)}
	e.st = store.New(e.client)
	for _, r := range repos {
		e.up.push(t, r, "v1")
	}
	src, err := registry.NewOCI(registry.OCIConfig{Host: e.up.host, Insecure: true, Filter: mustDeny(t, "internal/.*")})
	if err != nil {
		t.Fatal(err)
	}
	e.reg = reconcile.Registry{Name: "team", Source: &countingSource{OCI: src, n: &e.fetches}, Policy: reconcile.Policy{MaxMarkShare: 0.5}}
	e.w = newWorker(e.st, bootstrap.NewOperations(e.st, 10*time.Minute, time.Hour), map[string]reconcile.Registry{"team": e.reg})
	return e
}

func mustDeny(t *testing.T, deny ...string) *registry.Filter {
	t.Helper()
	f, err := registry.NewFilter(nil, deny)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// countingSource is the OCI source, counting its fetches.
type countingSource struct {
	*registry.OCI
	n *atomic.Int64
}

func (c *countingSource) Fetch(ctx context.Context, o registry.FetchOptions) (*registry.Listing, error) {
	c.n.Add(1)
	return c.OCI.Fetch(ctx, o)
}

func (c *countingSource) FetchEntries(ctx context.Context, names []string, o registry.FetchOptions) (*registry.Listing, error) {
	c.n.Add(1)
	return c.OCI.FetchEntries(ctx, names, o)
}

// event hands the worker an event's message, received now.
func (e *eventWorld) event(entries ...string) error {
	return e.w.Handle(context.Background(), queue.Message{Registry: "team", EventAt: time.Now().UTC(), Entries: entries})
}

// full runs the registry in full, as a scheduled bootstrap does, and
// commits.
func (e *eventWorld) full() store.Run {
	e.t.Helper()
	run, err := e.w.Runner.Reconcile(context.Background(), e.reg)
	if err != nil {
		e.t.Fatalf("full run: %v", err)
	}
	deliverCommits(e.t, e.w)
	return run
}

func (e *eventWorld) status() *store.RegistryStatus {
	e.t.Helper()
	st, err := e.st.RegistryStatus(context.Background(), "team")
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *eventWorld) specs() map[string]store.SpecRecord {
	e.t.Helper()
	recs, err := e.st.OwnedSpecs(context.Background(), "team")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]store.SpecRecord{}
	for _, r := range recs {
		out[r.Name] = r
	}
	return out
}

// inSync reports what a full run would still change: nothing when the
// store holds upstream's state (a dry run plans no create, update,
// unmark, repair or mark).
func (e *eventWorld) inSync() {
	e.t.Helper()
	dry, err := e.w.Runner.DryRun(context.Background(), e.reg)
	if err != nil {
		e.t.Fatal(err)
	}
	if c := dry.Counts; c.Created+c.Updated+c.Unmarked+c.Repaired+c.Marked+c.EntryErrors != 0 {
		e.t.Fatalf("the store is not upstream's state: a full run would still do %+v (%v)", c, dry.Planned)
	}
}

// An event's message that names entries is a targeted run of them: the
// change lands, the run asks for its own commit, and what the event cost
// in Firestore, all told (the worker's status read, the run, the commit),
// is counted exactly. Its replay, older than the run, is acknowledged
// without a run, reading the status only.
func TestWorkerRunsAnEventsEntries(t *testing.T) {
	ctx := context.Background()
	e := newEventWorld(t, "a", "b", "c")
	full := e.full()
	ops := &store.Ops{}
	w := *e.w
	w.Runner = &reconcile.Runner{Store: e.st.WithOps(ops), Logger: quiet, LeaseTTL: time.Minute, Commits: e.w.Commits}
	w.Now = func() time.Time { return time.Now().Add(time.Hour) } // past any cooldown
	// Clocks that agree: an event received after the full run started is
	// not covered by it, and the run it causes covers its replay.
	w.EventClockSkew = time.Nanosecond

	e.up.push(t, "b", "v2")
	m := queue.Message{Registry: "team", EventAt: full.StartedAt.Add(time.Microsecond), Entries: []string{"b"}}
	if err := w.Handle(ctx, m); err != nil {
		t.Fatalf("event: %v", err)
	}
	workerCost := ops.Snapshot()
	reqs := w.Commits.(*queuedCommits).take()
	if len(reqs) != 1 || reqs[0].Report != nil {
		t.Fatalf("commit requests %+v, want the run's own", reqs)
	}
	commit, err := w.Committer.Commit(ctx)
	if err != nil || commit.Changes != 1 {
		t.Fatalf("the commit: %+v %v", commit, err)
	}
	if got := e.specs()["b"]; got.Generation != 2 {
		t.Fatalf("b after the event: generation %d", got.Generation)
	}
	st := e.status()
	if st.LastTargeted == nil || fmt.Sprint(st.LastTargeted.Entries) != "[b]" || st.LastRun.ID == st.LastTargeted.ID {
		t.Fatalf("not a targeted run: %+v", st.LastTargeted)
	}
	// The worker's status read (the run counts its own operations, and
	// records them); the run: the lease (1 read, 1 write), the shard (1),
	// the spec (1) and the query counting its instances (1), its update and change (2 writes), the record (1 read,
	// 2 writes: the status, the shard); the commit: the pending changes
	// (1 query, one change), meta/catalog (1), the change and meta/catalog
	// written (2).
	run := st.LastTargeted.Ops
	total := store.Counts{Reads: workerCost.Reads + run.Reads + commit.Ops.Reads, Writes: workerCost.Writes + run.Writes + commit.Ops.Writes}
	if workerCost != emulatortest.EventStatusRead || run != emulatortest.EventRunChanged || commit.Ops != emulatortest.EventCommit {
		t.Errorf("one event cost: the worker %+v, the run %+v, the commit %+v", workerCost, run, commit.Ops)
	}
	if total != emulatortest.Event {
		t.Errorf("one event cost %+v all told, want %+v", total, emulatortest.Event)
	}
	t.Logf("one event of one changed entry costs %+v in Firestore, all told (worker %+v, run %+v, commit %+v)", total, workerCost, run, commit.Ops)

	fetches := e.fetches.Load()
	if err := w.Handle(ctx, m); err != nil {
		t.Fatalf("the replayed event: %v", err)
	}
	if got := ops.Snapshot(); got != (store.Counts{Reads: workerCost.Reads + 1}) || e.fetches.Load() != fetches {
		t.Errorf("the replayed event cost %+v and %d fetches, want the status read alone", store.Counts{Reads: got.Reads - workerCost.Reads, Writes: got.Writes}, e.fetches.Load()-fetches)
	}
}

// A message the lease's holder does not cover is busy, and one that comes
// less than a cooldown after a run cools down: both are handed back to
// Pub/Sub (retryable), with no run; once the cooldown is past, the
// redelivery runs. A message the holder covers is done.
func TestWorkerEventBusyAndCooldown(t *testing.T) {
	ctx := context.Background()
	e := newEventWorld(t, "a", "b")
	e.full()
	now := time.Now()
	e.w.Now = func() time.Time { return now }

	// Cooling down after the full run just now.
	err := e.event("a")
	if !failure.Is(err, failure.Precondition) || !failure.Retryable(err) {
		t.Fatalf("an event right after a run: %v, want a retryable precondition", err)
	}
	now = now.Add(worker.DefaultEventCooldown + time.Millisecond)

	// Another run holds the lease, and started before the event.
	if _, err := e.st.TakeLease(ctx, "team", store.Lease{Holder: "other", StartedAt: time.Now().Add(-time.Minute)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	fetches := e.fetches.Load()
	if err := e.event("a"); !failure.Is(err, failure.Precondition) {
		t.Fatalf("an event while another run holds the lease: %v", err)
	}
	if e.fetches.Load() != fetches {
		t.Fatal("a busy event fetched upstream")
	}
	// The holder started after the event (by more than the skew) and
	// reads everything: done.
	old := queue.Message{Registry: "team", EventAt: time.Now().Add(-time.Hour), Entries: []string{"a"}}
	if err := e.w.Handle(ctx, old); err != nil {
		t.Fatalf("an event the holder covers: %v", err)
	}
	if err := e.st.ReleaseLease(ctx, "team", "other"); err != nil {
		t.Fatal(err)
	}
	e.up.push(t, "a", "v2")
	if err := e.event("a"); err != nil {
		t.Fatalf("the redelivery: %v", err)
	}
	if e.specs()["a"].Generation != 2 {
		t.Fatal("the redelivery did not run")
	}
	deliverCommits(t, e.w)
}

// An event for a repository the registry does not select runs nothing
// and writes nothing.
func TestWorkerEventForARepositoryNotSelected(t *testing.T) {
	e := newEventWorld(t, "a", "internal/x")
	e.full()
	e.w.Now = func() time.Time { return time.Now().Add(time.Hour) }
	before := snapshot(t, e.client)
	fetches := e.fetches.Load()
	if err := e.event("internal/x"); err != nil {
		t.Fatalf("event: %v", err)
	}
	if e.fetches.Load() != fetches {
		t.Error("an event for nothing selected fetched upstream")
	}
	if after := snapshot(t, e.client); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Error("an event for nothing selected wrote")
	}
	if _, ok := e.specs()["internal/x"]; ok {
		t.Error("internal/x was reconciled")
	}
}

// An event while the registry is down marks nothing and is acknowledged
// (no endless redelivery); the next run catches up.
func TestWorkerEventWhileTheRegistryIsDown(t *testing.T) {
	e := newEventWorld(t, "a", "b")
	e.full()
	e.w.Now = func() time.Time { return time.Now().Add(time.Hour) }
	e.up.untag(t, "a")
	e.up.down.Store(true)
	if err := e.event("a", "b"); err != nil {
		t.Fatalf("an event while the registry is down: %v, want it acknowledged", err)
	}
	for n, r := range e.specs() {
		if r.State != api.SpecActive {
			t.Fatalf("%s was marked while the registry was down", n)
		}
	}
	if st := e.status(); st.LastTargeted == nil || st.LastTargeted.Result != api.ResultFetchFailed || st.Lease != nil {
		t.Fatalf("status after the outage: %+v", st)
	}
	e.up.down.Store(false)
	if err := e.event("a"); err != nil {
		t.Fatal(err)
	}
	deliverCommits(t, e.w)
	if e.specs()["a"].State != api.SpecMarked {
		t.Fatal("the run after the outage did not catch up")
	}
	e.inSync()
}

// Events racing a full run, both ways round, through the worker: the
// full run fetched before the event's run wrote and takes the lease
// after it (it fetches again), or the event's run holds the lease while
// the full run wants it (the full run is busy and retried). Either way
// nothing goes back: the store ends in upstream's state.
func TestWorkerEventRacesAFullRun(t *testing.T) {
	ctx := context.Background()
	t.Run("full run first", func(t *testing.T) {
		e := newEventWorld(t, "a", "b")
		e.full()
		e.w.Now = func() time.Time { return time.Now().Add(time.Hour) }
		e.up.push(t, "a", "v2")
		// The full run's fetch waits in its catalog request.
		held, letGo := e.up.holdFirst("/v2/_catalog")
		defer letGo()
		done := make(chan error)
		go func() {
			_, err := e.w.Runner.Reconcile(ctx, e.reg)
			done <- err
		}()
		<-held
		// Meanwhile a is pushed again and its event runs to the end.
		e.up.push(t, "a", "v3")
		if err := e.event("a"); err != nil {
			t.Fatalf("the event: %v", err)
		}
		letGo()
		if err := <-done; err != nil {
			t.Fatalf("the full run: %v", err)
		}
		deliverCommits(t, e.w)
		if got := e.specs()["a"]; !strings.Contains(got.SpecJSON, "a v3") {
			t.Fatalf("a went back: %s", got.SpecJSON)
		}
		e.inSync()
	})
	t.Run("event first", func(t *testing.T) {
		e := newEventWorld(t, "a", "b")
		e.full()
		e.w.Now = func() time.Time { return time.Now().Add(time.Hour) }
		e.up.push(t, "a", "v2")
		// The event's run holds the lease, waiting in its fetch of a.
		held, letGo := e.up.holdFirst("/v2/a/")
		defer letGo()
		done := make(chan error)
		go func() { done <- e.event("a") }()
		<-held
		e.up.push(t, "b", "v2")
		_, err := e.w.Runner.Reconcile(ctx, e.reg)
		if !failure.Is(err, failure.Precondition) || !failure.Retryable(err) {
			t.Fatalf("the full run beside the event's: %v, want busy (retried by Pub/Sub)", err)
		}
		letGo()
		if err := <-done; err != nil {
			t.Fatalf("the event: %v", err)
		}
		e.full() // the redelivered bootstrap message
		if got := e.specs(); !strings.Contains(got["a"].SpecJSON, "a v2") || !strings.Contains(got["b"].SpecJSON, "b v2") {
			t.Fatalf("after both: a %s, b %s", got["a"].SpecJSON, got["b"].SpecJSON)
		}
		e.inSync()
	})
}

// delivery is an event's message as a push subscription delivers it: its
// attempts so far.
type delivery struct {
	m        queue.Message
	attempts int
}

// stormResult is what a storm did.
type stormResult struct {
	events, deliveries, fetches int64
}

// eventStorm sends events messages for the registry's entries over span,
// each right after the change it announces (a push of the entry's new
// version; near the end, one entry's tag deleted), and delivers them to
// the worker like a push subscription: concurrently, a retryable error
// delivered again after a short backoff, until every message is
// acknowledged (Pub/Sub's exponential backoff, scaled down). Then the
// store must be upstream's final state, without a lease left behind.
func eventStorm(t *testing.T, events int, span, cooldown, skew time.Duration) stormResult {
	t.Helper()
	entries := []string{"s0", "s1", "s2", "s3", "s4"}
	e := newEventWorld(t, append(entries, "t0", "t1", "t2", "t3", "t4")...)
	e.full()
	e.w.EventCooldown, e.w.EventClockSkew = cooldown, skew
	// The storm starts after the cooldown of the full run.
	time.Sleep(cooldown)
	startFetches := e.fetches.Load()

	queueCh := make(chan delivery, events)
	var pending sync.WaitGroup
	var deliveries atomic.Int64
	var failed atomic.Value
	deliver := func(d delivery) {
		defer pending.Done()
		deliveries.Add(1)
		err := e.w.Handle(context.Background(), d.m)
		switch {
		case err == nil:
		case failure.Retryable(err) && d.attempts < 100:
			pending.Add(1)
			go func() {
				// Pub/Sub's exponential backoff, scaled down: from 50 ms,
				// doubling, to 1 s at most.
				time.Sleep(min(50*time.Millisecond<<min(d.attempts, 5), time.Second))
				queueCh <- delivery{d.m, d.attempts + 1}
			}()
		default:
			failed.Store(fmt.Sprintf("message %+v: %v after %d attempts", d.m, err, d.attempts+1))
		}
	}
	stop := make(chan struct{})
	var pushers sync.WaitGroup
	for range 16 { // a push subscription's concurrent requests
		pushers.Go(func() {
			for {
				select {
				case d := <-queueCh:
					deliver(d)
				case <-stop:
					return
				}
			}
		})
	}

	gone := entries[len(entries)-1]
	every := span / time.Duration(events)
	start := time.Now()
	for i := range events {
		entry := entries[i%len(entries)]
		switch {
		case entry == gone && i >= events*3/4:
			if i < events*3/4+len(entries) {
				e.up.untag(t, gone)
			}
		case i%10 < len(entries):
			e.up.push(t, entry, fmt.Sprintf("v%d", i))
		}
		pending.Add(1)
		queueCh <- delivery{m: queue.Message{Registry: "team", EventAt: time.Now().UTC(), Entries: []string{entry}}}
		if wait := time.Until(start.Add(time.Duration(i+1) * every)); wait > 0 {
			time.Sleep(wait)
		}
	}
	pending.Wait()
	t.Logf("every message acknowledged %s after the first was sent", time.Since(start))
	close(stop)
	pushers.Wait()
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	deliverCommits(t, e.w)
	st := e.status()
	if st.Lease != nil {
		t.Fatalf("a lease was left behind: %+v", st.Lease)
	}
	if e.specs()[gone].State != api.SpecMarked {
		t.Fatalf("%s, whose tag went, is not marked", gone)
	}
	e.inSync()
	invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})
	return stormResult{events: int64(events), deliveries: deliveries.Load(), fetches: e.fetches.Load() - startFetches}
}

// A storm of events for one registry (200 in 2 s over five entries, a
// cooldown of 200 ms) converges to upstream's final state with a few
// runs: each run fetches upstream once, and there are at most a few per
// cooldown, never one per event (a clock skew of 100 ms). (The storm of the reliability rows,
// 1,000 events in 10 s with the default cooldown, is
// TestWorkerEventStormThousand, under the build tag reliability.)
func TestWorkerEventStorm(t *testing.T) {
	const events, span, cooldown = 200, 2 * time.Second, 200 * time.Millisecond
	r := eventStorm(t, events, span, cooldown, 100*time.Millisecond)
	t.Logf("%d events, %d deliveries, %d runs (fetches upstream)", r.events, r.deliveries, r.fetches)
	// One run a cooldown during the storm, and one an entry after it,
	// with room for the runs that start together at a cooldown's end
	// (the lease lets one through).
	if limit := int64(span/cooldown) + 5 + 10; r.fetches > limit {
		t.Fatalf("%d runs for %d events, more than %d", r.fetches, r.events, limit)
	}
}

// A push right after another run of its registry (inside the event
// cooldown) waits out the rest of the cooldown in the worker and runs:
// handed back to Pub/Sub it would wait for a redelivery, 10 s or more as
// deployed, for a registry that is free within the second.
func TestWorkerEventWaitsOutTheCooldown(t *testing.T) {
	e := newEventWorld(t, "a", "b")
	e.full()
	now := time.Now()
	var waited []time.Duration
	e.w.Now = func() time.Time { return now }
	e.w.After = func(d time.Duration) <-chan time.Time {
		waited = append(waited, d)
		now = now.Add(d) // the clock the worker judges by moves on
		ch := make(chan time.Time, 1)
		ch <- now
		return ch
	}
	e.up.push(t, "a", "v2")
	if err := e.event("a"); err != nil {
		t.Fatalf("an event inside the cooldown: %v, want it run after the cooldown", err)
	}
	if len(waited) != 1 || waited[0] <= 0 || waited[0] > worker.DefaultEventCooldown {
		t.Errorf("waited %v, want once, at most the cooldown", waited)
	}
	if e.specs()["a"].Generation != 2 {
		t.Fatal("the event did not run after its wait")
	}
	deliverCommits(t, e.w)
}
