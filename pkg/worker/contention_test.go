package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/worker"
)

// One committer: 100 registries of 100 specs each reconciled at once, as
// the fan-out starts them, each run asking for a commit through the
// Pub/Sub emulator's ordered push subscription to the committer. Watching
// every gRPC call of the runs' Firestore client, no reconcile run touches
// meta/catalog in any transaction, let alone has one aborted and retried
// there (before the committer every run ended with a meta/catalog
// transaction, and runs that finished together aborted each other); the
// committer's own meta/catalog transactions are never aborted either (one
// at a time). The feed ends dense with all 10,000 changes.
//
// The runs are the runner's, not the worker's, so that this measures the
// feed alone; a hundred runs through the worker, their reports riding the
// same ordered topic to the operation's one document:
// TestHundredReportsAtOnceNeverContendOnTheOperation.
func TestHundredRegistriesAtOnceNeverContendOnTheCatalog(t *testing.T) {
	const registries, specsEach = 100, 100
	ctx := context.Background()
	client, project, end := checkedProject(t)
	// The end check reads the top-level collections only: the emulator
	// lists a document's subcollections in time proportional to the
	// whole database, and the runs write none.
	end.Feed, end.Shallow = true, true
	runsWatch, commitWatch := emulatortest.NewTxWatch("meta/catalog"), emulatortest.NewTxWatch("meta/catalog")
	runsClient := emulatortest.FirestoreVia(t, project, "", runsWatch.Unary, grpc.WithStreamInterceptor(runsWatch.Stream))
	commitClient := emulatortest.FirestoreVia(t, project, "", commitWatch.Unary, grpc.WithStreamInterceptor(commitWatch.Stream))

	regs, names, _ := dirRegistries(t, registries, specsEach)

	// The commit topic and its ordered push subscription, pushing to the
	// committer the way the reconcile function receives it.
	w := &worker.Worker{Committer: &reconcile.Committer{Store: store.New(commitClient), Logger: quiet}, Logger: quiet}
	push := newOrderedPush(t, w)
	runner := &reconcile.Runner{Store: store.New(runsClient), Logger: quiet, LeaseTTL: time.Minute, Commits: push.Commits}

	// Every registry at once; a retryable failure is what Pub/Sub would
	// redeliver.
	var wg sync.WaitGroup
	gate := make(chan struct{})
	redelivered := atomic.Int64{}
	// Bounded, so that runs that do contend (they did before the
	// committer: a hundred meta/catalog transactions at once never
	// finished on the emulator) fail the test with the counts below.
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for _, name := range names {
		wg.Go(func() {
			<-gate
			for attempt := 1; ; attempt++ {
				run, err := runner.Reconcile(rctx, regs[name])
				if err == nil && run.Result == api.ResultSucceeded {
					return
				}
				if (err != nil && !failure.Retryable(err)) || attempt == 10 || rctx.Err() != nil {
					t.Errorf("%s: %s %v", name, run.Result, err)
					return
				}
				redelivered.Add(1)
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	ran := time.Since(start)
	if runs := runsWatch.Counts(); runs != (emulatortest.TxCounts{}) {
		t.Fatalf("reconcile runs touched meta/catalog: %+v (they must only write pending changes)", runs)
	}
	if t.Failed() {
		t.FailNow()
	}
	for deadline := time.Now().Add(3 * time.Minute); push.Handled.Load() < push.Sent.Load(); {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d commit requests handled after 3 minutes", push.Handled.Load(), push.Sent.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	const total = registries * specsEach
	if rev, err := store.New(client).Revision(ctx); err != nil || rev != total {
		t.Fatalf("catalog revision %d (%v), want %d", rev, err, total)
	}

	t.Logf("the runs took %s, their commits were done %s later", ran.Round(time.Millisecond), (time.Since(start) - ran).Round(time.Millisecond))
	runs, commit := runsWatch.Counts(), commitWatch.Counts()
	t.Logf("reconcile runs: %+v; committer: %+v; %d commit requests sent, %d handled, at most %d at once; %d runs again after a retryable failure",
		runs, commit, push.Sent.Load(), push.Handled.Load(), push.MaxInFlight.Load(), redelivered.Load())
	if runs != (emulatortest.TxCounts{}) {
		t.Errorf("reconcile runs touched meta/catalog while their commits ran: %+v", runs)
	}
	if commit.Retried != 0 || commit.Aborted != 0 {
		t.Errorf("the committer's meta/catalog transactions were aborted %d times and retried %d times; one committer at a time has no one to contend with", commit.Aborted, commit.Retried)
	}
	if commit.Commits == 0 || commit.PlainWrites != 0 {
		t.Errorf("the committer committed %d meta/catalog transactions and %d plain writes; want transactions only", commit.Commits, commit.PlainWrites)
	}
	if push.MaxInFlight.Load() != 1 {
		t.Errorf("%d commit requests were handled at once; the ordered subscription delivers one at a time", push.MaxInFlight.Load())
	}
}
