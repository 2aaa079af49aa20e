package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
)

// Guarantee 3 (nothing in use is deleted) under real concurrency, many times
// over: for each of 60 specs a provision races the mark-then-delete of that
// spec, and for each of 20 more (marked, with one instance) a deprovision
// races the delete, all at once (bounded to 8 in flight: the emulator's
// transactions time out under heavier contention). Whatever interleaving each
// race gets, no instance may point at a deleted spec and no referenced spec
// may be deleted: the invariant checker decides, and both outcomes must
// have happened overall.
func TestRacesProvisionVersusDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	const provisions, deprovisions = 60, 20
	var names []string
	for i := range provisions + deprovisions {
		names = append(names, fmt.Sprintf("race-%03d", i))
	}
	e.run(dirRegistry(t, "local", specFiles(names...), defaultPolicy))
	specs := e.specs("local")
	planOf := func(n string) string {
		rec := specs[n]
		sp, err := rec.Spec()
		if err != nil {
			t.Fatal(err)
		}
		return sp.Plans[0].ID
	}
	// The marks and deletes below are a run's steps 5 and 3, called
	// directly: like a run, say first that the specs are being written,
	// so the registry's manifest is no longer trusted.
	if err := e.store.BeginWriting(ctx, "local", "run-mark"); err != nil {
		t.Fatal(err)
	}
	// The deprovision races start from a marked spec with one instance.
	for _, n := range names[provisions:] {
		rec := specs[n]
		if _, err := e.store.CreateInstance(ctx, store.Instance{ID: "pinned-" + n, SpecID: rec.ID, PlanID: planOf(n)}); err != nil {
			t.Fatal(err)
		}
		if ok, err := e.store.MarkSpec(ctx, "local", rec.ID, "run-mark"); err != nil || !ok {
			t.Fatalf("mark %s: %v %v", n, ok, err)
		}
	}

	var provWon, markWon, deprovFirst, deleteFirst atomic.Int64
	errs := make(chan error, 2*(provisions+deprovisions))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	retry := func(f func() error) error {
		// Contention on one document is a retryable failure (the client
		// gives up after its own retries); a caller retries it.
		var err error
		for range 5 {
			if err = f(); err == nil || !failure.Retryable(err) {
				return err
			}
		}
		return err
	}
	for _, n := range names[:provisions] {
		rec, plan := specs[n], planOf(n)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var inner sync.WaitGroup
			var provErr error
			inner.Go(func() {
				provErr = retry(func() error {
					_, err := e.store.CreateInstance(ctx, store.Instance{ID: "inst-" + n, SpecID: rec.ID, PlanID: plan})
					return err
				})
			})
			inner.Go(func() {
				if err := retry(func() error { _, err := e.store.MarkSpec(ctx, "local", rec.ID, "run-1"); return err }); err != nil {
					errs <- fmt.Errorf("%s: mark: %w", n, err)
					return
				}
				if err := retry(func() error { _, _, err := e.store.DeleteMarked(ctx, "local", rec.ID, "run-2", time.Now()); return err }); err != nil {
					errs <- fmt.Errorf("%s: delete: %w", n, err)
				}
			})
			inner.Wait()
			switch {
			case provErr == nil:
				provWon.Add(1)
			case failure.Is(provErr, failure.Invalid), failure.Is(provErr, failure.NotFound):
				markWon.Add(1)
			default:
				errs <- fmt.Errorf("%s: provision failed uncleanly: %w", n, provErr)
			}
		})
	}
	for _, n := range names[provisions:] {
		rec := specs[n]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var inner sync.WaitGroup
			var outcome store.DeleteOutcome
			inner.Go(func() {
				if err := retry(func() error { _, err := e.store.DeleteInstance(ctx, "pinned-"+n); return err }); err != nil {
					errs <- fmt.Errorf("%s: deprovision: %w", n, err)
				}
			})
			inner.Go(func() {
				if err := retry(func() error {
					var err error
					outcome, _, err = e.store.DeleteMarked(ctx, "local", rec.ID, "run-2", time.Now())
					return err
				}); err != nil {
					errs <- fmt.Errorf("%s: delete: %w", n, err)
				}
			})
			inner.Wait()
			switch outcome {
			case store.Deleted:
				deprovFirst.Add(1)
			case store.Referenced:
				deleteFirst.Add(1)
			default:
				errs <- fmt.Errorf("%s: delete outcome %q", n, outcome)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("provision vs delete: provision first %d, mark first %d; deprovision vs delete: deprovision first %d, delete first %d",
		provWon.Load(), markWon.Load(), deprovFirst.Load(), deleteFirst.Load())
	invariant.Require(t, e.client, invariant.Options{})
	// Reconciles afterwards delete what is now unreferenced and keep the
	// rest; the state is settled and still consistent. Two runs: the marks
	// above were made outside a finished run, so the first run that
	// finishes makes them "earlier" and the second may delete.
	empty := dirRegistry(t, "local", specFiles(), reconcile.Policy{MaxMarkShare: 1, AllowMassDeletion: true})
	e.run(empty)
	e.run(empty)
	st := invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})
	// The spec keeps no counters: its references are the instance records.
	refs := map[string]int{}
	for _, in := range st.Instances {
		refs[in.SpecID]++
	}
	for id, r := range st.Specs {
		if refs[id] == 0 && r.State == api.SpecMarked {
			t.Fatalf("spec %s is marked and unreferenced after a full run", r.Name)
		}
	}
	if int64(len(st.Instances)) != provWon.Load() {
		t.Fatalf("%d instances stored, %d provisions succeeded", len(st.Instances), provWon.Load())
	}
}
