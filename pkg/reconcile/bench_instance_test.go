package reconcile_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
)

// The peak heap of one function instance's work, each alone in the
// process: what a reconcile instance holds for its one registry, and
// what the committer holds for a commit. BenchmarkBootstrapCost's peak is
// every registry's run in one process at once (a hundred of them at
// 100 x 100), which no instance ever holds. New code only: before the
// committer there was none (this file is not copied to the old code; see
// docs/BENCHMARKS.md).

// discardPublisher counts the changes it is given, as the changes topic
// would take them.
type discardPublisher struct{ n atomic.Int64 }

func (p *discardPublisher) PublishChanges(_ context.Context, cs []store.Change) error {
	p.n.Add(int64(len(cs)))
	return nil
}

// heapInUse is HeapInuse after a collection: what the process holds
// before the measured work begins.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkBootstrapCostOneInstance: one registry of 10,000 specs
// imported alone (the largest run a registry of that size makes: every
// spec created), then, alone, the committer numbering and publishing its
// 10,000 changes (batches of 400, pages of 1,000 to a publisher that
// discards them). For each, the peak HeapInuse sampled every 20 ms while
// it runs, and the heap before it (after a collection: the Firestore
// client, the registry's files in memory, the benchmark's own). Against
// Cloud Functions' smallest memory, 128 MiB. Run with -benchtime 1x.
func BenchmarkBootstrapCostOneInstance(b *testing.B) {
	const specs = 10000
	ctx := context.Background()
	for b.Loop() {
		client, _ := emulatortest.FirestoreProject(b)
		st := store.New(client)
		w := newBenchWorld(b, 1, specs)
		runner := &reconcile.Runner{Store: st, Logger: quiet, LeaseTTL: time.Minute}
		pub := &discardPublisher{}
		committer := &reconcile.Committer{Store: st, Logger: quiet, Publisher: pub}

		var run store.Run
		var err error
		runBase := heapInUse()
		runPeak := peakHeap(func() { run, err = runner.Reconcile(ctx, w.regs[0]) })
		if err != nil || run.Result != api.ResultSucceeded || run.Counts.Created != specs {
			b.Fatalf("the import: %s %+v %v", run.Result, run.Counts, err)
		}
		var c reconcile.Commit
		commitBase := heapInUse()
		commitPeak := peakHeap(func() { c, err = committer.Commit(ctx) })
		if err != nil || c.Changes != specs || pub.n.Load() != specs {
			b.Fatalf("the commit: %+v (published %d) %v", c, pub.n.Load(), err)
		}
		const mib = 1 << 20
		b.ReportMetric(float64(runBase)/mib, "run-base-MiB")
		b.ReportMetric(float64(runPeak)/mib, "run-peak-heap-MiB")
		b.ReportMetric(float64(commitBase)/mib, "commit-base-MiB")
		b.ReportMetric(float64(commitPeak)/mib, "commit-peak-heap-MiB")
	}
}
