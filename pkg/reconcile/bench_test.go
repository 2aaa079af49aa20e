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
	"google.golang.org/api/iterator"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
)

// This file is the same in the code before the committer (e6a017d); only
// bench_commit_test.go differs (how commits are made), so the two can be
// measured the same day (docs/BENCHMARKS.md).

// benchRetries counts redeliveries bootstrapAll needed.
var benchRetries atomic.Int64

// benchWorld is n dir registries sharing total specs between them.
type benchWorld struct {
	fs   []fstest.MapFS
	regs []reconcile.Registry
}

func newBenchWorld(b *testing.B, registries, total int) *benchWorld {
	b.Helper()
	w := &benchWorld{}
	for r := range registries {
		fsys := fstest.MapFS{}
		for i := range total / registries {
			n := fmt.Sprintf("svc-%03d-%05d", r, i)
			fsys[n+".yaml"] = &fstest.MapFile{Data: []byte(specYAML(n))}
		}
		name := fmt.Sprintf("reg-%03d", r)
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

// runsDone is when the last run of the last bootstrapAll returned (before
// its commits were waited for).
var runsDone time.Time

// bootstrapAll reconciles every registry at once, as the fan-out does,
// waits for the commits they asked for, and sums the Firestore operations
// of the runs and of the commits (where a committer makes them; before
// it, each run's count includes its own commit).
func bootstrapAll(b *testing.B, runner *reconcile.Runner, commits benchCommits, w *benchWorld) (runs, commit store.Counts) {
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
				if err != nil || (run.Result != api.ResultSucceeded && run.Result != api.ResultUnchanged) {
					b.Errorf("reconcile %s: %s %v", reg.Name, run.Result, err)
				}
				return
			}
		})
	}
	wg.Wait()
	runsDone = time.Now()
	if b.Failed() {
		b.FailNow()
	}
	return sum, commits.wait(b)
}

func plus(a, b store.Counts) store.Counts {
	return store.Counts{Reads: a.Reads + b.Reads, Writes: a.Writes + b.Writes, Deletes: a.Deletes + b.Deletes}
}

// classic is what the abandoned approach (delete every spec, re-add every
// offered one, every bootstrap) costs on the same data: one query read per
// stored spec (at least one per registry), a delete per stored spec, a
// write per offered spec, plus the same one status write per registry.
func classic(registries, stored, offered int) store.Counts {
	reads := max(stored, registries)
	return store.Counts{Reads: int64(reads), Writes: int64(offered + registries), Deletes: int64(stored)}
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

// BenchmarkBootstrapCost: a bootstrap of many registries at once (first
// import; unchanged re-run; 1% and 10% changed), in Firestore documents
// read, written and deleted beside the classic delete-all-re-add on the
// same data, and reads per changed run against the registry's size; the
// first import's wall time (until its changes are committed) against the
// BulkWriter floor: every document the import ends with, written again
// straight with the client's bulk writer right after it, same run; the
// peak heap of the import (every registry's run in this one process).
// Run with -benchtime 1x: one iteration is a whole import.
func BenchmarkBootstrapCost(b *testing.B) {
	// The emulator is a JVM: its first thousand transactions run
	// interpreted and would be charged to whichever import came first.
	// One untimed import in a project of its own warms it.
	warm, _ := emulatortest.FirestoreProject(b)
	{
		st := store.New(warm)
		runner, commits := newBenchRunner(b, st, 0)
		_, _ = bootstrapAll(b, runner, commits, newBenchWorld(b, 10, 1000))
	}
	for _, size := range []struct{ registries, total int }{{10, 1000}, {10, 10000}, {100, 10000}} {
		b.Run(fmt.Sprintf("registries=%d/specs=%d", size.registries, size.total), func(b *testing.B) {
			for b.Loop() {
				client, _ := emulatortest.FirestoreProject(b)
				st := store.New(client)
				runner, commits := newBenchRunner(b, st, time.Minute)
				w := newBenchWorld(b, size.registries, size.total)

				benchRetries.Store(0)
				runtime.GC()
				var firstRuns, firstCommit store.Counts
				start := time.Now()
				heap := peakHeap(func() { firstRuns, firstCommit = bootstrapAll(b, runner, commits, w) })
				importWall, ran := time.Since(start), runsDone.Sub(start)
				// The floor is taken here, on the documents the import
				// ends with: the later bootstraps add changes (the 1% and
				// 10% runs') that are not the import's.
				floor, docs := bulkFloor(b, client)
				unchanged := plus(bootstrapAll(b, runner, commits, w))
				perReg := size.total / size.registries
				changed1 := w.change(0.01, 2)
				runs1, commit1 := bootstrapAll(b, runner, commits, w)
				changed10 := w.change(0.10, 3)
				runs10, commit10 := bootstrapAll(b, runner, commits, w)

				report(b, "first", plus(firstRuns, firstCommit))
				report(b, "first-commit", firstCommit)
				report(b, "first-classic", classic(size.registries, 0, size.total))
				report(b, "unchanged", unchanged)
				report(b, "unchanged-classic", classic(size.registries, size.total, size.total))
				report(b, "1pct", plus(runs1, commit1))
				report(b, "10pct", plus(runs10, commit10))
				report(b, "changed-classic", classic(size.registries, size.total, size.total))
				regs := float64(size.registries)
				b.ReportMetric(float64(perReg), "registry-size")
				b.ReportMetric(float64(changed1)/regs, "1pct-changed-per-run")
				b.ReportMetric(float64(runs1.Reads)/regs, "1pct-reads-per-run")
				b.ReportMetric(float64(commit1.Reads), "1pct-commit-reads")
				b.ReportMetric(float64(changed10)/regs, "10pct-changed-per-run")
				b.ReportMetric(float64(runs10.Reads)/regs, "10pct-reads-per-run")
				b.ReportMetric(float64(commit10.Reads), "10pct-commit-reads")
				b.ReportMetric(ran.Seconds(), "runs-s")
				b.ReportMetric(importWall.Seconds(), "import-s")
				b.ReportMetric(floor.Seconds(), "bulkwriter-floor-s")
				b.ReportMetric(float64(docs), "floor-docs")
				b.ReportMetric(importWall.Seconds()/floor.Seconds(), "import/floor")
				b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(benchRetries.Swap(0)), "redeliveries")
			}
		})
	}
}

// bulkFloor writes every document the project holds again, into
// collections of their own (bench_floor_*, which no later read of the
// store's touches), with the client's BulkWriter, and times the writing:
// the least any import that ends with these documents could take on this
// emulator. It returns the time and the number of documents.
func bulkFloor(b *testing.B, client *firestore.Client) (time.Duration, int) {
	b.Helper()
	ctx := context.Background()
	type doc struct {
		ref  *firestore.DocumentRef
		data map[string]any
	}
	var docs []doc
	cols := client.Collections(ctx)
	for {
		col, err := cols.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		snaps, err := col.Documents(ctx).GetAll()
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range snaps {
			docs = append(docs, doc{client.Collection("bench_floor_" + col.ID).Doc(s.Ref.ID), s.Data()})
		}
	}
	start := time.Now()
	bw := client.BulkWriter(ctx)
	jobs := make([]*firestore.BulkWriterJob, 0, len(docs))
	for _, d := range docs {
		job, err := bw.Create(d.ref, d.data)
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
	return time.Since(start), len(docs)
}

// quiet is a logger for the benchmark's runs.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
