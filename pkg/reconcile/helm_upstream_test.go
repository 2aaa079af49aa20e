package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
	"github.com/specsync/specsync/pkg/store"
)

// chartUpstream is one form of a helm registry (a chart repository, or
// charts in an OCI registry) whose requests are counted by kind: index
// GETs, archive GETs; manifest HEADs, manifest GETs, blob GETs.
type chartUpstream struct {
	form string
	repo *helmtest.Repo
	reg  *helmtest.Registry
}

func newChartUpstream(tb testing.TB, form string) *chartUpstream {
	if form == "repository" {
		return &chartUpstream{form: form, repo: helmtest.NewRepo(tb)}
	}
	return &chartUpstream{form: form, reg: helmtest.NewRegistry(tb)}
}

func (u *chartUpstream) push(tb testing.TB, c helmtest.Chart) {
	if u.repo != nil {
		u.repo.Add(tb, c)
		return
	}
	u.reg.Push(tb, "charts/"+c.Name, c)
}

// pushAll publishes a chart of each name at 1.0.0, sixteen at a time.
func (u *chartUpstream) pushAll(tb testing.TB, names []string) {
	var wg sync.WaitGroup
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for n := range work {
				u.push(tb, helmChart(n, "1.0.0"))
			}
		})
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
}

// source is a new source of the upstream: a new instance (cold).
func (u *chartUpstream) source(tb testing.TB, name string) reconcile.Registry {
	var src registry.Source
	if u.repo != nil {
		src = u.repo.Source(tb, registry.HelmConfig{})
	} else {
		src = u.reg.Source(tb, registry.HelmConfig{Prefix: "charts", PageSize: 5000})
	}
	return reconcile.Registry{Name: name, Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}}
}

// counts returns the requests since the last call, by kind.
func (u *chartUpstream) counts() map[string]int {
	get := func(match func(string, string) bool) func(string, string) bool {
		return func(m, p string) bool { return m == http.MethodGet && match(m, p) }
	}
	out := map[string]int{}
	if u.repo != nil {
		out["index-GETs"] = u.repo.Count(helmtest.IsIndex)
		out["archive-GETs"] = u.repo.Count(helmtest.IsArchive)
		u.repo.Reset()
		return out
	}
	out["manifest-HEADs"] = u.reg.Count(func(m, p string) bool { return m == http.MethodHead && helmtest.IsManifest(m, p) })
	out["manifest-GETs"] = u.reg.Count(get(helmtest.IsManifest))
	out["blob-GETs"] = u.reg.Count(get(helmtest.IsBlob))
	u.reg.Reset()
	return out
}

// chartReads is what reading charts' content costs: archive GETs, or
// manifest and blob GETs.
func chartReads(c map[string]int) int { return c["archive-GETs"] + c["manifest-GETs"] + c["blob-GETs"] }

// A new instance reconciling a helm registry reads only the charts that
// moved, through the real run and its manifest's hints: unchanged, no
// chart read at all (OCI: one HEAD a chart; a chart repository: the
// index, a 304); one chart moved, that chart alone (its archive, or its
// manifest, config and archive), adopted; without hints (the code before
// them) every chart again.
func TestColdHelmRunReadsOnlyWhatMoved(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"repository", "oci"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			const n = 20
			u := newChartUpstream(t, form)
			names := svcNames(n)
			u.pushAll(t, names)
			run := e.run(u.source(t, "charts"))
			if run.Counts.Created != n {
				t.Fatalf("first run: %+v %s", run.Counts, run.Error)
			}
			u.counts()

			run = e.run(u.source(t, "charts"))
			c := u.counts()
			if run.Result != api.ResultUnchanged || chartReads(c) != 0 {
				t.Fatalf("unchanged, cold: %s, requests %v", run.Result, c)
			}
			if form == "oci" && c["manifest-HEADs"] != n {
				t.Errorf("unchanged, cold: %d manifest HEADs, want %d", c["manifest-HEADs"], n)
			}

			u.push(t, helmChart(names[7], "1.1.0"))
			u.counts()
			run = e.run(u.source(t, "charts"))
			c = u.counts()
			want := 1
			if form == "oci" {
				want = 3
			}
			if run.Result != api.ResultSucceeded || run.Counts.Updated != 1 || chartReads(c) != want {
				t.Fatalf("one moved, cold: %s %+v, requests %v; want %d chart reads", run.Result, run.Counts, c, want)
			}

			u.push(t, helmChart(names[7], "1.2.0"))
			u.counts()
			before := &reconcile.Runner{Store: e.store, Logger: e.runner.Logger}
			reconcile.WithoutHints(before)
			if run, err := before.Reconcile(context.Background(), u.source(t, "charts")); err != nil || run.Counts.Updated != 1 {
				t.Fatalf("without hints: %+v %v", run, err)
			}
			e.commit()
			if c := u.counts(); chartReads(c) < n {
				t.Errorf("without hints a cold run read %v; the code before them reads every chart", c)
			}
		})
	}
}

// BenchmarkRunHelmUpstream is BenchmarkRunUpstream for a helm registry of
// 1,000 charts, in both forms: a chart repository (index.yaml and
// archives) and charts in an OCI registry; unchanged and one chart moved
// (a new version before each run), warm and cold, before (WithoutHints)
// and after, in one process, reporting the upstream requests by kind per
// run, its Firestore reads and writes, and the time.
func BenchmarkRunHelmUpstream(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, form := range []string{"repository", "oci"} {
		b.Run(form, func(b *testing.B) {
			client, _ := emulatortest.FirestoreProject(b)
			st := store.New(client)
			committer := &reconcile.Committer{Store: st, Logger: quiet}
			u := newChartUpstream(b, form)
			names := svcNames(n)
			u.pushAll(b, names)
			first := &reconcile.Runner{Store: st, Logger: quiet}
			if run, err := first.Reconcile(ctx, u.source(b, "charts")); err != nil || run.Counts.Created != n {
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
							reg := u.source(b, "charts")
							runOnce := func() store.Run {
								b.Helper()
								if change == "changed-one" {
									b.StopTimer()
									version++
									u.push(b, helmChart(moved, fmt.Sprintf("1.0.%d", version)))
									b.StartTimer()
								}
								if temp == "cold" {
									reg = u.source(b, "charts")
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
							u.counts()
							total := map[string]int{}
							var ops store.Counts
							b.ResetTimer()
							for range b.N {
								run := runOnce()
								ops.Reads += run.Ops.Reads
								ops.Writes += run.Ops.Writes
								b.StopTimer()
								for k, v := range u.counts() {
									total[k] += v
								}
								b.StartTimer()
							}
							b.StopTimer()
							per := func(v int) float64 { return float64(v) / float64(b.N) }
							for k, v := range total {
								b.ReportMetric(per(v), k+"/op")
							}
							b.ReportMetric(per(int(ops.Reads)), "firestore-reads/op")
							b.ReportMetric(per(int(ops.Writes)), "firestore-writes/op")
						})
					}
				}
			}
		})
	}
}
