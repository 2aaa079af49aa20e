package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// BenchmarkRunVerify measures what a verify block costs a run of an OCI
// registry of 1,000 signed repositories, on a new instance (a new source
// each run, as most runs start cold), verify on and off in the same
// benchmark: an unchanged run, and a run with one repository moved to a
// new signed image (a version in turn). It reports the upstream requests
// by kind (a signature lookup: the referrers API or tag; the one
// signature's manifest and bundle count as a manifest and a blob GET) and
// the Firestore reads and writes per run, with the time.
// TestVerifyCostStaysWithTheChange asserts the counts; the time only a
// quiet machine measures (docs/BENCHMARKS.md).
func BenchmarkRunVerify(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	client, _ := emulatortest.FirestoreProject(b)
	st := store.New(client)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runner := &reconcile.Runner{Store: st, Logger: quiet}
	committer := &reconcile.Committer{Store: st, Logger: quiet}
	up := newUpstream(b)
	names := svcNames(n)
	up.pushAll(b, names)
	owner := verifytest.NewKey(b)
	var wg sync.WaitGroup
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for r := range work {
				up.sign(b, owner, r)
			}
		})
	}
	for _, r := range names {
		work <- r
	}
	close(work)
	wg.Wait()
	policy := verifytest.Policy(b, owner)
	moved := names[n/2]
	version := 0
	for _, verifyOn := range []bool{false, true} {
		source := func() reconcile.Registry {
			if verifyOn {
				return up.verifiedSource(b, "team", policy)
			}
			return up.source(b, "team")
		}
		// Turning verify on or off reads every entry once.
		if run, err := runner.Reconcile(ctx, source()); err != nil || !run.Result.OK() {
			b.Fatalf("first run: %s %v %s", run.Result, err, run.Error)
		}
		if _, err := committer.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		for _, change := range []string{"unchanged", "moved-one"} {
			b.Run(fmt.Sprintf("verify-%s/%s", map[bool]string{true: "on", false: "off"}[verifyOn], change), func(b *testing.B) {
				up.counts()
				total := map[string]int{}
				var ops store.Counts
				for b.Loop() {
					want := api.ResultUnchanged
					if change == "moved-one" {
						b.StopTimer()
						version++
						up.push(b, moved, fmt.Sprintf("%sversion: \"%d\"\n", specYAML(moved), version))
						up.sign(b, owner, moved)
						b.StartTimer()
						want = api.ResultSucceeded
					}
					run, err := runner.Reconcile(ctx, source())
					if err != nil || run.Result != want {
						b.Fatalf("run: %s %+v %v %s", run.Result, run.Counts, err, run.Error)
					}
					b.StopTimer()
					if _, err := committer.Commit(ctx); err != nil {
						b.Fatal(err)
					}
					ops.Reads += run.Ops.Reads
					ops.Writes += run.Ops.Writes
					for k, v := range up.counts() {
						total[k] += v
					}
					b.StartTimer()
				}
				per := func(v int) float64 { return float64(v) / float64(b.N) }
				b.ReportMetric(per(total[reqCatalog]), "catalog-pages/op")
				b.ReportMetric(per(total[reqHead]), "manifest-HEADs/op")
				b.ReportMetric(per(total[reqGetManifest]), "manifest-GETs/op")
				b.ReportMetric(per(total[reqGetBlob]), "blob-GETs/op")
				b.ReportMetric(per(total[reqSignature]), "signature-lookups/op")
				b.ReportMetric(per(int(ops.Reads)), "firestore-reads/op")
				b.ReportMetric(per(int(ops.Writes)), "firestore-writes/op")
			})
		}
	}
}
