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
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/worker"
)

// The operation document is the bootstrap's hot document, and the
// reports reach it one at a time: a hundred registries reconciled at once
// through the real worker, each run publishing its report (and its own
// commit request) to the commit topic, whose ordered push subscription
// delivers them to the worker's HandleCommit as it does to the Reconcile
// function. Watching every gRPC call of the operations' Firestore client:
// each report is one transaction on operations/{id}, never aborted or
// retried, the last report's handler commits and finishes the operation
// (one transaction more), the operation succeeds with every registry's
// result and the catalog revision of all their changes, and the project
// ends settled.
//
// When every run wrote its report itself, a read-modify-write transaction
// on that one document, reports that arrived together aborted each other:
// on the emulator of 100 at once only 1 landed within 3 minutes (of 50,
// 2; 25 took 26 s), so a bootstrap of 50 or more registries whose runs
// finished together never finished (docs/feed.md, "The operation
// document is the bootstrap's hot document").
func TestHundredReportsAtOnceNeverContendOnTheOperation(t *testing.T) {
	const registries = 100
	ctx := context.Background()
	client, project, end := checkedProject(t)
	end.Feed = true
	regs, names, _ := dirRegistries(t, registries, 1)
	plain := bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour)
	op, _, err := plain.Start(ctx, names, false)
	if err != nil {
		t.Fatal(err)
	}
	// The worker's operations go through a client that watches every
	// transaction on the operation's document.
	watch := emulatortest.NewTxWatch(store.OperationsCollection + "/" + op.ID)
	opsClient := emulatortest.FirestoreVia(t, project, "", watch.Unary, grpc.WithStreamInterceptor(watch.Stream))
	st := store.New(client)
	w := &worker.Worker{
		Operations: bootstrap.NewOperations(store.New(opsClient), 10*time.Minute, time.Hour),
		Lookup:     func(n string) (reconcile.Registry, bool) { r, ok := regs[n]; return r, ok },
		Committer:  &reconcile.Committer{Store: st, Logger: quiet},
		Logger:     quiet,
	}

	// The commit topic and its ordered push subscription, pushing to the
	// worker the way the reconcile function receives it.
	push := newOrderedPush(t, w)
	w.Commits = push.Commits
	w.Runner = &reconcile.Runner{Store: st, Logger: quiet, LeaseTTL: time.Minute, Commits: w.Commits}

	// Every registry at once; a retryable failure is what Pub/Sub would
	// redeliver. Bounded, so that reports that do contend fail the test
	// with the counts below rather than hang it.
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var redelivered atomic.Int64
	gate := make(chan struct{})
	for _, name := range names {
		wg.Go(func() {
			<-gate
			for attempt := 1; ; attempt++ {
				err := w.Handle(rctx, queue.Message{Operation: op.ID, Registry: name})
				if err == nil {
					return
				}
				if !failure.Retryable(err) || attempt == 10 || rctx.Err() != nil {
					t.Errorf("%s: %v", name, err)
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
	if t.Failed() {
		t.FailNow()
	}
	var got *api.Operation
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if got, err = plain.Get(ctx, op.ID); err != nil {
			t.Fatal(err)
		}
		if got.State != api.InProgress && push.Handled.Load() >= push.Sent.Load() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes: operation %s (%s), %d of %d messages handled, the operation document: %+v",
				got.State, got.Description, push.Handled.Load(), push.Sent.Load(), watch.Counts())
		}
	}
	took := time.Since(start)
	tx := watch.Counts()
	t.Logf("%d registries at once through the worker: runs done in %s, the operation finished %s after the start; %d messages on the commit topic (%d reports), at most %d handled at once, %d refused and pushed again; the operation document: %+v; %d runs again after a retryable failure",
		registries, ran.Round(time.Millisecond), took.Round(time.Millisecond), push.Sent.Load(), push.Reports.Load(), push.MaxInFlight.Load(), push.Refused.Load(), tx, redelivered.Load())

	if got.State != api.Succeeded || len(got.Results) != registries || got.CatalogRevision == nil || *got.CatalogRevision != registries {
		t.Fatalf("operation %s (%s) with %d results at catalog revision %v; want succeeded, %d results, revision %d",
			got.State, got.Description, len(got.Results), got.CatalogRevision, registries, registries)
	}
	for _, name := range names {
		if r := got.Results[name]; r.Result != api.ResultSucceeded || r.Counts.Created != 1 {
			t.Errorf("%s reported %s %+v, want its one spec created", name, r.Result, r.Counts)
		}
	}
	if push.Reports.Load() != registries {
		t.Errorf("%d reports handled, want one a registry (%d)", push.Reports.Load(), registries)
	}
	if tx.Aborted != 0 || tx.Retried != 0 {
		t.Errorf("transactions on the operation document were aborted %d times and retried %d times; reports applied one at a time have no one to contend with", tx.Aborted, tx.Retried)
	}
	// One transaction a report, and the one that finished the operation.
	if tx.Transactions != registries+1 || tx.Commits != registries+1 || tx.PlainWrites != 0 {
		t.Errorf("the operation document took %d transactions (%d committed) and %d plain writes; want %d, one a report and the finish",
			tx.Transactions, tx.Commits, tx.PlainWrites, registries+1)
	}
	if push.MaxInFlight.Load() != 1 {
		t.Errorf("%d commit-topic messages were handled at once; the ordered subscription delivers one at a time", push.MaxInFlight.Load())
	}
}
