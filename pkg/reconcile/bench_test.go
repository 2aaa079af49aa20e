package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
)

const benchRegistries = 10

// benchRetries counts redeliveries bootstrapAll needed.
var benchRetries atomic.Int64

// benchWorld is 10 dir registries sharing total specs between them.
type benchWorld struct {
	fs   []fstest.MapFS
	regs []reconcile.Registry
}

func newBenchWorld(b *testing.B, total int) *benchWorld {
	b.Helper()
	w := &benchWorld{}
	for r := range benchRegistries {
		fsys := fstest.MapFS{}
		for i := range total / benchRegistries {
			n := fmt.Sprintf("svc-%02d-%05d", r, i)
			fsys[n+".yaml"] = &fstest.MapFile{Data: []byte(specYAML(n))}
		}
		name := fmt.Sprintf("reg-%02d", r)
		src, err := registry.NewDir(registry.DirConfig{FS: fsys, Root: "bench:" + name})
		if err != nil {
			b.Fatal(err)
		}
		w.fs = append(w.fs, fsys)
		w.regs = append(w.regs, reconcile.Registry{Name: name, Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}})
	}
	return w
}

// change rewrites share of every registry's specs (a new description).
func (w *benchWorld) change(share float64, gen int) int {
	changed := 0
	for _, fsys := range w.fs {
		n := 0
		limit := int(float64(len(fsys))*share + 0.5)
		for name, f := range fsys {
			if n == limit {
				break
			}
			f.Data = []byte(strings.Replace(specYAML(strings.TrimSuffix(name, ".yaml")), "description: the", fmt.Sprintf("description: (v%d) the", gen), 1))
			n++
		}
		changed += n
	}
	return changed
}

// bootstrap reconciles every registry at once, as the fan-out does, and
// sums their Firestore operations.
func bootstrapAll(b *testing.B, runner *reconcile.Runner, w *benchWorld) store.Counts {
	b.Helper()
	var mu sync.Mutex
	var sum store.Counts
	var wg sync.WaitGroup
	for _, reg := range w.regs {
		wg.Go(func() {
			// A retryable failure (contention on meta/catalog when the
			// registries commit their changes at once) is what Pub/Sub
			// redelivers: run again, and count what every attempt cost.
			for attempt := 1; ; attempt++ {
				run, err := runner.Reconcile(context.Background(), reg)
				mu.Lock()
				sum.Reads += run.Ops.Reads
				sum.Writes += run.Ops.Writes
				sum.Deletes += run.Ops.Deletes
				mu.Unlock()
				if err != nil && failure.Retryable(err) && attempt < 10 {
					benchRetries.Add(1)
					continue
				}
				if err != nil || (run.Result != reconcile.ResultSucceeded && run.Result != reconcile.ResultUnchanged) {
					b.Errorf("reconcile %s: %s %v", reg.Name, run.Result, err)
				}
				return
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return sum
}

// classic is what the abandoned approach (delete every spec, re-add every
// offered one, every bootstrap) costs on the same data: one query read per
// stored spec (at least one per registry), a delete per stored spec, a
// write per offered spec, plus the same one status write per registry.
func classic(stored, offered int) store.Counts {
	reads := max(stored, benchRegistries)
	return store.Counts{Reads: int64(reads), Writes: int64(offered + benchRegistries), Deletes: int64(stored)}
}

func report(b *testing.B, prefix string, c store.Counts) {
	b.ReportMetric(float64(c.Reads), prefix+"-reads")
	b.ReportMetric(float64(c.Writes), prefix+"-writes")
	b.ReportMetric(float64(c.Deletes), prefix+"-deletes")
}

// peakHeap samples the heap while f runs.
func peakHeap(f func()) uint64 {
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	return peak.Load()
}

// BenchmarkBootstrapCost: Firestore documents read, written and deleted by
// a bootstrap of 10 registries (first import; unchanged re-run; 1%
// changed), beside the classic delete-all-re-add on the same data; the
// first import's wall time against the BulkWriter floor (the same
// documents written straight with the client's bulk writer, same run);
// the peak heap of the import. Run with -benchtime 1x: one iteration is a
// whole import.
func BenchmarkBootstrapCost(b *testing.B) {
	// The emulator is a JVM: its first thousand transactions run
	// interpreted and would be charged to whichever import came first.
	// One untimed import in a project of its own warms it.
	warm, _ := emulatortest.FirestoreProject(b)
	bootstrapAll(b, &reconcile.Runner{Store: store.New(warm), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, newBenchWorld(b, 1000))
	for _, total := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("specs=%d", total), func(b *testing.B) {
			for b.Loop() {
				client, _ := emulatortest.FirestoreProject(b)
				st := store.New(client)
				runner := &reconcile.Runner{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LeaseTTL: time.Minute}
				w := newBenchWorld(b, total)

				benchRetries.Store(0)
				runtime.GC()
				var first store.Counts
				start := time.Now()
				heap := peakHeap(func() { first = bootstrapAll(b, runner, w) })
				importWall := time.Since(start)
				unchanged := bootstrapAll(b, runner, w)
				changed := w.change(0.01, 2)
				oneChanged := bootstrapAll(b, runner, w)

				floor := bulkFloor(b, client, st, total)

				report(b, "first", first)
				report(b, "first-classic", classic(0, total))
				report(b, "unchanged", unchanged)
				report(b, "unchanged-classic", classic(total, total))
				report(b, "1pct", oneChanged)
				report(b, "1pct-classic", classic(total, total))
				b.ReportMetric(float64(changed), "1pct-changed-specs")
				b.ReportMetric(importWall.Seconds(), "import-s")
				b.ReportMetric(floor.Seconds(), "bulkwriter-floor-s")
				b.ReportMetric(importWall.Seconds()/floor.Seconds(), "import/floor")
				b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(benchRetries.Swap(0)), "redeliveries")
			}
		})
	}
}

// bulkFloor writes the stored spec documents again into a collection of
// their own with the client's BulkWriter and times the writing: the least
// any import of these documents could take on this emulator.
func bulkFloor(b *testing.B, client *firestore.Client, st *store.Store, total int) time.Duration {
	b.Helper()
	ctx := context.Background()
	recs, err := st.ActiveSpecs(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if len(recs) != total {
		b.Fatalf("%d specs stored, want %d", len(recs), total)
	}
	start := time.Now()
	bw := client.BulkWriter(ctx)
	jobs := make([]*firestore.BulkWriterJob, 0, len(recs))
	for _, r := range recs {
		job, err := bw.Create(client.Collection("bench_floor").Doc(r.ID), r)
		if err != nil {
			b.Fatal(err)
		}
		jobs = append(jobs, job)
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}
