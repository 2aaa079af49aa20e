package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
)

// BenchmarkRunUpstream measures what a full run of an OCI registry of
// 1,000 repositories costs upstream, counted by kind at the in-process
// reference registry (catalog pages of 100, HEADs and GETs of manifests,
// GETs of blobs, the /v2/ pings of go-containerregistry), per run, with
// its Firestore reads and writes and its time:
//
//   - unchanged: nothing moved upstream; changed-one: one repository
//     moved to a new image before each run (two versions in turn);
//   - warm: one source for every run (its manifest cache filled, as a
//     warm instance's); cold: a new source for each run (a new instance);
//   - before: the same code without hints (reconcile.WithoutHints: the
//     source gets neither the hints nor the previous digest, so it reads
//     every manifest its cache does not know, as before the manifest kept
//     upstream digests); after: with them.
//
// TestColdRunCostsOneHeadARepository asserts the counts of the cold runs
// exactly; this reports them, and the time, which only a quiet machine
// measures (docs/BENCHMARKS.md).
func BenchmarkRunUpstream(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	client, _ := emulatortest.FirestoreProject(b)
	st := store.New(client)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	committer := &reconcile.Committer{Store: st, Logger: quiet}
	up := newUpstream(b)
	names := svcNames(n)
	up.pushAll(b, names)
	first := &reconcile.Runner{Store: st, Logger: quiet}
	if run, err := first.Reconcile(ctx, up.source(b, "team")); err != nil || run.Counts.Created != n {
		b.Fatalf("first run: %+v %v", run.Counts, err)
	}
	if _, err := committer.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	moved := names[n/2]
	version := 0
	for _, change := range []string{"unchanged", "changed-one"} {
		for _, temp := range []string{"warm", "cold"} {
			for _, when := range []string{"before", "after"} {
				b.Run(fmt.Sprintf("%s/%s/%s", change, temp, when), func(b *testing.B) {
					runner := &reconcile.Runner{Store: st, Logger: quiet}
					if when == "before" {
						reconcile.WithoutHints(runner)
					}
					reg := up.source(b, "team")
					runOnce := func() store.Run {
						b.Helper()
						if change == "changed-one" {
							b.StopTimer()
							version++
							text := specYAML(moved)
							if version%2 == 1 {
								text = changedSpec(moved)
							}
							up.push(b, moved, text)
							b.StartTimer()
						}
						if temp == "cold" {
							reg = up.source(b, "team")
						}
						run, err := runner.Reconcile(ctx, reg)
						want := api.ResultUnchanged
						if change == "changed-one" {
							want = api.ResultSucceeded
						}
						if err != nil || run.Result != want {
							b.Fatalf("run: %s %+v %v %s", run.Result, run.Counts, err, run.Error)
						}
						b.StopTimer()
						if _, err := committer.Commit(ctx); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						return run
					}
					if temp == "warm" {
						runOnce() // fills the source's cache
					}
					up.counts()
					total := map[string]int{}
					var ops store.Counts
					b.ResetTimer()
					for range b.N {
						run := runOnce()
						ops.Reads += run.Ops.Reads
						ops.Writes += run.Ops.Writes
						for k, v := range up.counts() {
							total[k] += v
						}
					}
					b.StopTimer()
					per := func(v int64) float64 { return float64(v) / float64(b.N) }
					b.ReportMetric(per(int64(total[reqCatalog])), "catalog-pages/op")
					b.ReportMetric(per(int64(total[reqHead])), "manifest-HEADs/op")
					b.ReportMetric(per(int64(total[reqGetManifest])), "manifest-GETs/op")
					b.ReportMetric(per(int64(total[reqGetBlob])), "blob-GETs/op")
					b.ReportMetric(per(int64(total[reqPing])), "pings/op")
					b.ReportMetric(per(ops.Reads), "firestore-reads/op")
					b.ReportMetric(per(ops.Writes), "firestore-writes/op")
				})
			}
		}
	}
}
