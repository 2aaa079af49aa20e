package worker_test

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/worker"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func testWorker(t *testing.T) (*worker.Worker, *bootstrap.Operations, *store.Store) {
	t.Helper()
	return workerOn(t, checked(t), nil)
}

// workerOn is worker on client; opsClient, when set, is the client its
// operations go through (the reconcile itself still uses client).
func workerOn(t *testing.T, client, opsClient *firestore.Client) (*worker.Worker, *bootstrap.Operations, *store.Store) {
	t.Helper()
	if opsClient == nil {
		opsClient = client
	}
	st := store.New(client)
	src, err := registry.NewDir(registry.DirConfig{FS: fstest.MapFS{
		"a.yaml": {Data: []byte("name: a\ndescription: d\nplans:\n  - name: p\n    description: p\n")},
	}, Root: "test"})
	if err != nil {
		t.Fatal(err)
	}
	regs := map[string]reconcile.Registry{"local": {Name: "local", Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}}}
	ops := bootstrap.NewOperations(store.New(opsClient), 10*time.Minute, time.Hour)
	return newWorker(st, ops, regs), ops, st
}

// newWorker is a worker on st and ops for regs (with leases, as
// deployed), its commit requests queued in process (deliverCommits).
func newWorker(st *store.Store, ops *bootstrap.Operations, regs map[string]reconcile.Registry) *worker.Worker {
	commits := &queuedCommits{}
	return &worker.Worker{
		Operations: ops,
		Runner:     &reconcile.Runner{Store: st, Logger: quiet, LeaseTTL: time.Minute, Commits: commits},
		Lookup:     func(n string) (reconcile.Registry, bool) { r, ok := regs[n]; return r, ok },
		Commits:    commits,
		Committer:  &reconcile.Committer{Store: st, Logger: quiet},
		Logger:     quiet,
	}
}

// queuedCommits stands in for the commit topic in process: it keeps the
// commit requests (and the reports riding them) in order, and
// deliverCommits hands them to the worker's HandleCommit one at a time,
// as the ordered push subscription does. failReports makes the next
// publishes of reports fail (a run's own commit request still goes out);
// reports counts every publish of a report, failed or not.
type queuedCommits struct {
	mu       sync.Mutex
	reqs     []queue.CommitRequest
	fail     error
	failures int
	reports  int
}

func (q *queuedCommits) RequestCommit(_ context.Context, r queue.CommitRequest) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.Report != nil {
		q.reports++
		if q.failures > 0 {
			q.failures--
			return q.fail
		}
	}
	q.reqs = append(q.reqs, r)
	return nil
}

// failReports makes the next n publishes of a report fail with err.
func (q *queuedCommits) failReports(n int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fail, q.failures = err, n
}

func (q *queuedCommits) take() []queue.CommitRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.reqs
	q.reqs = nil
	return out
}

// deliverCommits delivers every queued commit request (and those their
// handling queues) and returns them.
func deliverCommits(t *testing.T, w *worker.Worker) []queue.CommitRequest {
	t.Helper()
	var all []queue.CommitRequest
	for {
		reqs := w.Commits.(*queuedCommits).take()
		if len(reqs) == 0 {
			return all
		}
		for _, r := range reqs {
			if err := w.HandleCommit(context.Background(), r); err != nil {
				t.Fatalf("commit request %+v: %v", r, err)
			}
		}
		all = append(all, reqs...)
	}
}

// Redelivery is harmless: a redelivered message changes nothing more: the registry
// counts once and the second delivery does not even reconcile.
func TestWorkerRedeliveryCountsOnce(t *testing.T) {
	ctx := context.Background()
	w, ops, st := testWorker(t)
	op, _, err := ops.Start(ctx, []string{"local"}, false)
	if err != nil {
		t.Fatal(err)
	}
	m := queue.Message{Operation: op.ID, Registry: "local"}
	if err := w.Handle(ctx, m); err != nil {
		t.Fatal(err)
	}
	deliverCommits(t, w)
	got, _ := ops.Get(ctx, op.ID)
	if got.State != api.Succeeded || got.Results["local"].Counts.Created != 1 || got.Description != "the registry reconciled; 1 change committed, catalog at revision 1" {
		t.Fatalf("after one delivery: %+v", got)
	}
	status, _ := st.RegistryStatus(ctx, "local")
	if err := w.Handle(ctx, m); err != nil {
		t.Fatal(err)
	}
	if reqs := deliverCommits(t, w); len(reqs) != 0 {
		t.Fatalf("a redelivery to a finished operation asked for commits: %+v", reqs)
	}
	again, _ := ops.Get(ctx, op.ID)
	if !reflect.DeepEqual(again.Results["local"], got.Results["local"]) {
		t.Fatalf("redelivery changed the recorded result: %+v -> %+v", got.Results["local"], again.Results["local"])
	}
	after, _ := st.RegistryStatus(ctx, "local")
	if after.LastRun.ID != status.LastRun.ID {
		t.Fatal("a redelivered message ran the reconcile again")
	}
}

// A report rides the commit topic, so a reconcile message can be
// redelivered after its run published its report and before the
// committer recorded it: the worker finds no result yet and runs again
// (the re-run is unchanged), a second report follows the first, and the
// first one recorded counts: the run that wrote. Every report message
// delivered twice records nothing more, and the operation is finished
// once, by the first delivery of the last report.
func TestWorkerReportsRedeliveredOrRunTwiceCountOnce(t *testing.T) {
	ctx := context.Background()
	w, ops, st := testWorker(t)
	op, _, err := ops.Start(ctx, []string{"local"}, false)
	if err != nil {
		t.Fatal(err)
	}
	m := queue.Message{Operation: op.ID, Registry: "local"}
	if err := w.Handle(ctx, m); err != nil {
		t.Fatal(err)
	}
	first, _ := st.RegistryStatus(ctx, "local")
	if err := w.Handle(ctx, m); err != nil {
		t.Fatal(err)
	}
	reqs := w.Commits.(*queuedCommits).take()
	var reports []queue.CommitRequest
	for _, r := range reqs {
		if r.Report != nil {
			reports = append(reports, r)
		}
	}
	if len(reports) != 2 || reports[0].Report.RunID != first.LastRun.ID || reports[0].Report.Counts.Created != 1 ||
		reports[1].Report.RunID == first.LastRun.ID || reports[1].Report.Result != api.ResultUnchanged {
		t.Fatalf("published %+v, want the first run's report (created 1), then a second run's (unchanged)", reqs)
	}
	var finished *api.Operation
	for _, r := range reqs {
		for range 2 {
			if err := w.HandleCommit(ctx, r); err != nil {
				t.Fatalf("commit request %+v: %v", r, err)
			}
			got, _ := ops.Get(ctx, op.ID)
			if finished == nil && got.State == api.Succeeded {
				finished = got
			} else if finished != nil && !reflect.DeepEqual(got, finished) {
				t.Fatalf("a report after the operation finished changed it: %+v -> %+v", finished, got)
			}
		}
	}
	if more := deliverCommits(t, w); len(more) != 0 {
		t.Fatalf("handling the reports asked for %+v", more)
	}
	if finished == nil {
		t.Fatal("the operation never finished")
	}
	r := finished.Results["local"]
	if r.RunID != first.LastRun.ID || r.Counts.Created != 1 || finished.CatalogRevision == nil || *finished.CatalogRevision != 1 {
		t.Fatalf("the operation recorded run %s %+v at revision %v; want the first run's (%s), which created the spec, at revision 1",
			r.RunID, r.Counts, finished.CatalogRevision, first.LastRun.ID)
	}
}

// failingCommits lets a client's Commit calls through until armed, then
// fails the next `fail` of them with Internal, a transient error the
// client library does not retry on its own (Unavailable it retries inside
// the Commit call, so the worker would never see it); attempts counts the
// commits made while armed.
type failingCommits struct {
	armed    atomic.Bool
	fail     atomic.Int64
	attempts atomic.Int64
}

func (f *failingCommits) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if f.armed.Load() && strings.HasSuffix(method, "/Commit") {
		f.attempts.Add(1)
		if f.fail.Add(-1) >= 0 {
			return grpcstatus.Error(codes.Internal, "injected: firestore internal error")
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// The run is done when its report fails. Publishing it fails: the worker
// tries again in process, so the operation records what the run did (a
// redelivery would re-run and report the re-run's "unchanged"); Pub/Sub
// down for longer than those attempts hands the message back, and the
// redelivery reports once. Recording it fails (the store, while the
// committer handles the report): the report message is redelivered, and
// records the run that wrote, once.
func TestWorkerRetriesAFailedReport(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// publishFailures fail the report's publish; recordFailures the
		// transaction that records it.
		publishFailures, recordFailures int
	}{
		{"one failed publish", 1, 0},
		{"two failed publishes", 2, 0},
		{"pubsub down for longer than the attempts", 3, 0},
		{"recording fails once", 0, 1},
		{"recording fails twice", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, project, _ := checkedProject(t)
			fc := &failingCommits{}
			w, ops, st := workerOn(t, client, emulatortest.FirestoreVia(t, project, "", fc.intercept))
			op, _, err := ops.Start(ctx, []string{"local"}, false)
			if err != nil {
				t.Fatal(err)
			}
			m := queue.Message{Operation: op.ID, Registry: "local"}
			commits := w.Commits.(*queuedCommits)
			commits.failReports(tc.publishFailures, grpcstatus.Error(codes.Unavailable, "injected: pubsub unavailable"))
			err = w.Handle(ctx, m)
			if got := commits.reports; got != min(tc.publishFailures+1, 3) {
				t.Errorf("%d publishes of the report, want %d", got, min(tc.publishFailures+1, 3))
			}
			status, serr := st.RegistryStatus(ctx, "local")
			if serr != nil || status.LastRun.Counts.Created != 1 {
				t.Fatalf("the run itself: %+v %v", status.LastRun, serr)
			}
			if tc.publishFailures >= 3 {
				if !failure.Retryable(err) {
					t.Fatalf("pubsub down past the attempts: %v, want a retryable error (redelivery)", err)
				}
				// The run's own commit request went out; no report did.
				for _, r := range commits.take() {
					if r.Report != nil {
						t.Fatalf("a report went out: %+v", r)
					}
				}
				if got, _ := ops.Get(ctx, op.ID); len(got.Results) != 0 || got.State != api.InProgress {
					t.Fatalf("nothing should be recorded yet: %+v", got)
				}
				// The redelivery re-runs (one read: the listing is
				// unchanged) and reports what it did.
				if err := w.Handle(ctx, m); err != nil {
					t.Fatal(err)
				}
				deliverCommits(t, w)
				got, _ := ops.Get(ctx, op.ID)
				if r := got.Results["local"]; got.State != api.Succeeded || r.Result != api.ResultUnchanged {
					t.Fatalf("after the redelivery: %s %+v", got.State, r)
				}
				return
			}
			if err != nil {
				t.Fatalf("a report published on attempt %d: %v", tc.publishFailures+1, err)
			}
			// The committer handles the report; recording it fails
			// recordFailures times, each time handed back to Pub/Sub.
			reqs := commits.take()
			if len(reqs) != 2 || reqs[1].Report == nil {
				t.Fatalf("published %+v, want the run's commit request and its report", reqs)
			}
			fc.fail.Store(int64(tc.recordFailures))
			fc.armed.Store(true)
			deliveries := 0
			for _, r := range reqs {
				for {
					deliveries++
					err := w.HandleCommit(ctx, r)
					if err == nil {
						break
					}
					if !failure.Retryable(err) || deliveries > 10 {
						t.Fatalf("commit request %+v: %v", r, err)
					}
					if got, _ := ops.Get(ctx, op.ID); len(got.Results) != 0 {
						t.Fatalf("a report whose recording failed was recorded: %+v", got.Results)
					}
				}
			}
			fc.armed.Store(false)
			if deliveries != 2+tc.recordFailures {
				t.Errorf("%d deliveries, want %d", deliveries, 2+tc.recordFailures)
			}
			if reqs := deliverCommits(t, w); len(reqs) != 0 {
				t.Errorf("the last report asked for more: %+v", reqs)
			}
			got, _ := ops.Get(ctx, op.ID)
			r := got.Results["local"]
			if got.State != api.Succeeded || r.Result != api.ResultSucceeded || r.Counts.Created != 1 || r.RunID != status.LastRun.ID {
				t.Fatalf("the operation must record the run that wrote: %s %+v (run %s)", got.State, r, status.LastRun.ID)
			}
			if got.CatalogRevision == nil || *got.CatalogRevision != 1 {
				t.Fatalf("the operation finished at catalog revision %v, want 1", got.CatalogRevision)
			}
		})
	}
}

// Permanent problems are recorded and acknowledged (nil), never retried.
func TestWorkerPermanentFailuresAreAcknowledged(t *testing.T) {
	ctx := context.Background()
	w, ops, _ := testWorker(t)
	op, _, err := ops.Start(ctx, []string{"local", "gone"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(ctx, queue.Message{Operation: op.ID, Registry: "gone"}); err != nil {
		t.Fatalf("unknown registry must be acknowledged: %v", err)
	}
	deliverCommits(t, w)
	got, _ := ops.Get(ctx, op.ID)
	if r := got.Results["gone"]; r.State != api.Failed || !strings.Contains(r.Error, "not in this deployment") {
		t.Fatalf("unknown registry result %+v", r)
	}
	for _, m := range []queue.Message{
		{Operation: "no-such-operation", Registry: "local"},
		{Operation: "bad id with spaces", Registry: "local"},
		{Operation: op.ID, Registry: "Not_A_Name"},
	} {
		if err := w.Handle(ctx, m); err != nil {
			t.Fatalf("%+v must be acknowledged: %v", m, err)
		}
	}
	// Reports the committer cannot record: for an operation that is
	// gone (expired, or never started) or a registry the operation does
	// not include, and one that names no operation. Acknowledged (nil),
	// recording nothing.
	res := api.RegistryResult{State: api.Succeeded, Result: api.ResultUnchanged, RunID: "run-1"}
	for _, r := range []queue.CommitRequest{
		{Operation: "no-such-operation", Registry: "local", Report: &res},
		{Operation: op.ID, Registry: "elsewhere", Report: &res},
		{Registry: "local", Report: &res},
	} {
		if err := w.HandleCommit(ctx, r); err != nil {
			t.Fatalf("report %+v must be acknowledged: %v", r, err)
		}
	}
	if again, _ := ops.Get(ctx, op.ID); !reflect.DeepEqual(again, got) {
		t.Fatalf("reports it cannot record changed the operation: %+v -> %+v", got, again)
	}
	if reqs := deliverCommits(t, w); len(reqs) != 0 {
		t.Fatalf("unrecordable reports asked for %+v", reqs)
	}
}

// A second delivery while another run holds the registry's lease is
// retried through Pub/Sub (an error), not waited for.
func TestWorkerBusyLeaseIsRetried(t *testing.T) {
	ctx := context.Background()
	w, ops, st := testWorker(t)
	op, _, _ := ops.Start(ctx, []string{"local"}, false)
	if err := st.AcquireLease(ctx, "local", "someone-else", time.Minute); err != nil {
		t.Fatal(err)
	}
	err := w.Handle(ctx, queue.Message{Operation: op.ID, Registry: "local"})
	if !failure.Is(err, failure.Precondition) || !failure.Retryable(err) {
		t.Fatalf("busy registry: %v, want a retryable precondition error", err)
	}
	if got, _ := ops.Get(ctx, op.ID); len(got.Results) != 0 {
		t.Fatal("a busy delivery reported a result")
	}
	if err := st.ReleaseLease(ctx, "local", "someone-else"); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(ctx, queue.Message{Operation: op.ID, Registry: "local"}); err != nil {
		t.Fatal(err)
	}
	deliverCommits(t, w)
	if got, _ := ops.Get(ctx, op.ID); got.State != api.Succeeded {
		t.Fatalf("after the lease was freed: %+v", got)
	}
}

func TestLeaseExpires(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	if err := st.AcquireLease(ctx, "r", "a", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := st.AcquireLease(ctx, "r", "a", time.Minute); err != nil {
		t.Fatalf("holder re-acquiring: %v", err)
	}
	if err := st.AcquireLease(ctx, "r", "b", time.Minute); !failure.Is(err, failure.Precondition) {
		t.Fatalf("second holder: %v", err)
	}
	if err := st.ReleaseLease(ctx, "r", "b"); err != nil {
		t.Fatal(err)
	}
	if err := st.AcquireLease(ctx, "r", "b", time.Minute); err == nil {
		t.Fatal("a non-holder's release freed the lease")
	}
	if err := st.AcquireLease(ctx, "r2", "a", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // let the 1ms lease lapse; not a timing assertion
	if err := st.AcquireLease(ctx, "r2", "b", time.Minute); err != nil {
		t.Fatalf("an expired lease must be taken over: %v", err)
	}
}

// brokenCommitter is a committer on project whose every Firestore call
// fails with a transient error (its client is closed): a commit that
// fails after the report it follows was recorded.
func brokenCommitter(t *testing.T, project string) *reconcile.Committer {
	t.Helper()
	c := emulatortest.FirestoreVia(t, project, "", func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return &reconcile.Committer{Store: store.New(c), Logger: quiet}
}

// Read-your-writes: an operation is not succeeded before the changes its
// runs wrote are committed. The run publishes its report on the commit
// topic; the committer records it, and, the report being the last, commits
// everything pending in the same handler and finishes the operation with
// the catalog revision the changes reached, which the catalog serves.
// Until the committer has recorded the report, nothing is recorded; if its
// commit fails after the recording, the operation says it is committing,
// the catalog does not show the changes, and the redelivered report
// records nothing more and finishes it. A bootstrap that changed nothing
// gets the current revision. An operation left waiting for its commit is
// asked for again by the redelivered reconcile message, without a second
// run.
func TestWorkerOperationWaitsForItsCommit(t *testing.T) {
	ctx := context.Background()
	client, project, _ := checkedProject(t)
	w, ops, st := workerOn(t, client, nil)
	committer := w.Committer
	commits := w.Commits.(*queuedCommits)
	op, _, err := ops.Start(ctx, []string{"local"}, false)
	if err != nil {
		t.Fatal(err)
	}
	m := queue.Message{Operation: op.ID, Registry: "local"}
	if err := w.Handle(ctx, m); err != nil {
		t.Fatal(err)
	}
	if sent, _ := ops.Get(ctx, op.ID); sent.State != api.InProgress || len(sent.Results) != 0 || sent.Description != "reconciling 1 registry" {
		t.Fatalf("before the committer recorded the report: %s %q %+v", sent.State, sent.Description, sent.Results)
	}
	status, _ := st.RegistryStatus(ctx, "local")
	reqs := commits.take()
	if len(reqs) != 2 || reqs[0] != (queue.CommitRequest{Registry: "local", Run: status.LastRun.ID}) ||
		reqs[1].Operation != op.ID || reqs[1].Registry != "local" || reqs[1].Report == nil || reqs[1].Report.RunID != status.LastRun.ID {
		t.Fatalf("commit requests %+v, want the run's, then its report", reqs)
	}
	// The report first (the last report's commit takes in everything
	// pending, whoever asked), its commit failing.
	w.Committer = brokenCommitter(t, project)
	if err := w.HandleCommit(ctx, reqs[1]); !failure.Retryable(err) {
		t.Fatalf("a failed commit after the last report: %v, want a retryable error (redelivery)", err)
	}
	waiting, _ := ops.Get(ctx, op.ID)
	if waiting.State != api.InProgress || waiting.Description != "the registry reported; committing 1 change" || waiting.CatalogRevision != nil {
		t.Fatalf("before the commit: %s %q %v", waiting.State, waiting.Description, waiting.CatalogRevision)
	}
	if rev, _ := st.Revision(ctx); rev != 0 {
		t.Fatalf("the catalog moved to %d before the committer ran", rev)
	}
	w.Committer = committer
	if err := w.HandleCommit(ctx, reqs[1]); err != nil {
		t.Fatalf("the redelivered report: %v", err)
	}
	if err := w.HandleCommit(ctx, reqs[0]); err != nil {
		t.Fatal(err)
	}
	if more := deliverCommits(t, w); len(more) != 0 {
		t.Fatalf("the last report asked for %+v; it commits itself", more)
	}
	done, _ := ops.Get(ctx, op.ID)
	rev, _ := st.Revision(ctx)
	if done.State != api.Succeeded || done.CatalogRevision == nil || *done.CatalogRevision != 1 || rev != 1 {
		t.Fatalf("after the commit: %s %q revision %v, catalog at %d", done.State, done.Description, done.CatalogRevision, rev)
	}
	if !done.Results["local"].ReportedAt.Equal(waiting.Results["local"].ReportedAt) {
		t.Fatalf("the redelivered report was recorded again: reported at %s, then %s", waiting.Results["local"].ReportedAt, done.Results["local"].ReportedAt)
	}

	// Nothing changed: the run asks nothing, its report finishes the
	// operation at the current revision.
	op2, _, err := ops.Start(ctx, []string{"local"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(ctx, queue.Message{Operation: op2.ID, Registry: "local"}); err != nil {
		t.Fatal(err)
	}
	if reqs := deliverCommits(t, w); len(reqs) != 1 || reqs[0].Operation != op2.ID || reqs[0].Report == nil {
		t.Fatalf("an unchanged bootstrap sent %+v, want its report only", reqs)
	}
	done2, _ := ops.Get(ctx, op2.ID)
	if done2.State != api.Succeeded || *done2.CatalogRevision != 1 || done2.Description != "the registry reconciled; no catalog change, catalog at revision 1" {
		t.Fatalf("unchanged bootstrap: %s %q %v", done2.State, done2.Description, *done2.CatalogRevision)
	}

	// The commit after the last report fails and its message is not
	// redelivered (dead-lettered, say); the reconcile message is.
	op3, _, err := ops.Start(ctx, []string{"local"}, false)
	if err != nil {
		t.Fatal(err)
	}
	m3 := queue.Message{Operation: op3.ID, Registry: "local"}
	if err := w.Handle(ctx, m3); err != nil {
		t.Fatal(err)
	}
	w.Committer = brokenCommitter(t, project)
	for _, r := range commits.take() {
		if err := w.HandleCommit(ctx, r); !failure.Retryable(err) {
			t.Fatalf("a failed commit after the last report: %v, want a retryable error", err)
		}
	}
	w.Committer = committer
	stuck, _ := ops.Get(ctx, op3.ID)
	if !stuck.AwaitsCommit() {
		t.Fatalf("after the failed commit: %+v", stuck)
	}
	before, _ := st.RegistryStatus(ctx, "local")
	if err := w.Handle(ctx, m3); err != nil {
		t.Fatalf("the redelivery: %v", err)
	}
	if reqs := deliverCommits(t, w); len(reqs) != 1 || reqs[0] != (queue.CommitRequest{Operation: op3.ID, Registry: "local"}) {
		t.Fatalf("the redelivery asked for %+v, want one commit request for the operation", reqs)
	}
	if after, _ := st.RegistryStatus(ctx, "local"); after.LastRun.ID != before.LastRun.ID {
		t.Fatal("the redelivered reconcile message ran again")
	}
	done3, _ := ops.Get(ctx, op3.ID)
	if done3.State != api.Succeeded || *done3.CatalogRevision != 1 || done3.Results["local"].RunID != stuck.Results["local"].RunID {
		t.Fatalf("after the redelivery: %s %q, run %s (was %s)", done3.State, done3.Description, done3.Results["local"].RunID, stuck.Results["local"].RunID)
	}
	// Duplicate commit requests and reports change nothing more.
	again := *done3
	dup := api.RegistryResult{State: api.Failed, Result: api.ResultError, Error: "a late duplicate"}
	for _, r := range []queue.CommitRequest{{Operation: op3.ID}, {Operation: op3.ID, Registry: "local", Report: &dup}} {
		if err := w.HandleCommit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if after, _ := ops.Get(ctx, op3.ID); !reflect.DeepEqual(*after, again) {
		t.Fatalf("a duplicate commit request or report changed the operation: %+v -> %+v", again, *after)
	}
}

// An event's message (no operation) runs its registry outside any
// bootstrap: the specs land, the run asks for its own commit, and no
// report goes anywhere; an event for a registry the deployment does not
// configure is acknowledged.
func TestWorkerRunsAnEventsRegistry(t *testing.T) {
	w, _, st := testWorker(t)
	ctx := context.Background()
	if err := w.Handle(ctx, queue.Message{Registry: "local", EventAt: time.Now()}); err != nil {
		t.Fatalf("event: %v", err)
	}
	specs, err := st.OwnedSpecs(ctx, "local")
	if err != nil || len(specs) != 1 {
		t.Fatalf("after the event's run the registry owns %d specs (%v), want 1", len(specs), err)
	}
	reqs := deliverCommits(t, w)
	if len(reqs) != 1 || reqs[0].Report != nil || reqs[0].Operation != "" || reqs[0].Registry != "local" {
		t.Fatalf("commit requests %+v, want the run's own and no report", reqs)
	}
	if err := w.Handle(ctx, queue.Message{Registry: "nowhere", EventAt: time.Now()}); err != nil {
		t.Errorf("an event for an unknown registry: %v, want it acknowledged", err)
	}
}
