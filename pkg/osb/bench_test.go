package osb_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// benchSpecs is about the size of a real catalog: enough that a render
// dominates a cold request, few enough that seeding stays quick.
const benchSpecs = 50

// benchEnv seeds benchSpecs specs and returns a broker on them with the
// given refresh window. Benchmarks call the handler in process
// (ServeHTTP on a recorder): the loopback TCP of an httptest server
// would add noise without adding anything specsync does.
func benchEnv(b *testing.B, window time.Duration) (*env, http.Handler) {
	b.Helper()
	e := newEnv(b, window)
	specs := make([]*spec.Spec, benchSpecs)
	for i := range specs {
		specs[i] = parseSpec(b, specYAML(fmt.Sprintf("svc-%02d", i)))
	}
	e.seed(specs...)
	return e, e.broker.Handler()
}

func catalogRequest() *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/v2/catalog", nil)
	req.SetBasicAuth(brokerUser, brokerPass)
	req.Header.Set("X-Broker-API-Version", apiVersion)
	return req
}

// serveCatalog runs one GET /v2/catalog and returns the Firestore reads
// the handler reports for it.
func serveCatalog(b *testing.B, h http.Handler, req *http.Request) int64 {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("GET /v2/catalog: %d %s", w.Code, w.Body)
	}
	n, err := strconv.ParseInt(w.Header().Get("X-Specsync-Firestore-Reads"), 10, 64)
	if err != nil {
		b.Fatalf("X-Specsync-Firestore-Reads: %v", err)
	}
	return n
}

func reportReads(b *testing.B, reads, ops int64) {
	if ops > 0 {
		b.ReportMetric(float64(reads)/float64(ops), "reads/op")
	}
}

// BenchmarkCatalogWarm is a warm instance inside its refresh window: the
// rendered body from memory, no Firestore at all.
func BenchmarkCatalogWarm(b *testing.B) {
	_, h := benchEnv(b, time.Hour)
	req := catalogRequest()
	serveCatalog(b, h, req) // render once, outside the measurement
	var reads, ops int64
	for b.Loop() {
		reads += serveCatalog(b, h, req)
		ops++
	}
	reportReads(b, reads, ops)
}

// BenchmarkCatalogRevisionCheck is a warm instance whose window has
// passed (window 0: every request) with an unchanged revision: one read
// of meta/catalog, then the cached body.
func BenchmarkCatalogRevisionCheck(b *testing.B) {
	_, h := benchEnv(b, 0)
	req := catalogRequest()
	serveCatalog(b, h, req)
	var reads, ops int64
	for b.Loop() {
		reads += serveCatalog(b, h, req)
		ops++
	}
	reportReads(b, reads, ops)
}

// BenchmarkCatalogCold is a cold instance (or a new revision): read the
// revision, query every active spec, render and encode the catalog.
func BenchmarkCatalogCold(b *testing.B) {
	e, h := benchEnv(b, time.Hour)
	req := catalogRequest()
	var reads, ops int64
	for b.Loop() {
		// The handler reads Broker.Cache per request, so a fresh Cache is
		// a fresh instance without rebuilding the routes.
		e.broker.Cache = &osb.Cache{Store: e.st, Window: time.Hour, Now: e.clock.Now}
		reads += serveCatalog(b, h, req)
		ops++
	}
	reportReads(b, reads, ops)
}

// BenchmarkCatalogRefresh is the warm catalog's refresh: a warm instance at
// 1,000 and 10,000 services sees the revision move by k = 1, 10 and 100
// changes (updates of k specs, committed) and refreshes, applying the k
// changes; in the same iteration, at the same state, the refresh as it was
// before (the revision, every active spec, RenderOfferings, encode, tag) and
// a cold instance of today (its full render). Reads are counted (store.Ops),
// times measured; the bodies must be equal. The daily figures are for 10,000
// specs changed hourly and three warm instances each refreshing after every
// hourly change: 24 x 3 x the reads of one refresh (the revision checks
// every window, the same before and after, come on top). Run with -benchtime
// 1x: one iteration is one refresh.
func BenchmarkCatalogRefresh(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			e := newEnv(b, 0)
			offers := e.seedMany(n)
			warm := &osb.Cache{Store: e.st, Window: 0}
			first, _, err := warm.Get(e.ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(first.Size())/(1<<20), "body-MiB")
			version := 0
			for _, k := range []int{1, 10, 100} {
				b.Run(fmt.Sprintf("changes=%d", k), func(b *testing.B) {
					se := *e
					se.t = b
					var inc, old, cold time.Duration
					var incReads, oldReads, coldReads int64
					runs := 0
					for b.Loop() {
						version++
						for i := range k {
							se.upsert(offerSpec(b, testReg, offers[(version*k+i)%n].Spec.Name, "", version))
						}
						se.commit()

						t0 := time.Now()
						r, reads, err := warm.Get(se.ctx)
						inc += time.Since(t0)
						if err != nil || warm.LastRefresh() != "changes" {
							b.Fatalf("refresh: %v (%s)", err, warm.LastRefresh())
						}
						incReads += reads

						ops := &store.Ops{}
						t0 = time.Now()
						before, err := renderAsBefore(se.ctx, se.st.WithOps(ops))
						old += time.Since(t0)
						if err != nil {
							b.Fatal(err)
						}
						oldReads += ops.Snapshot().Reads

						t0 = time.Now()
						c, reads, err := (&osb.Cache{Store: se.st}).Get(se.ctx)
						cold += time.Since(t0)
						if err != nil {
							b.Fatal(err)
						}
						coldReads += reads
						if !bytes.Equal(r.Body(), before.Body) || !bytes.Equal(c.Body(), before.Body) || r.ETag != before.ETag {
							b.Fatal("the refreshed catalog is not the full render's")
						}
						runs++
					}
					per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(runs) }
					b.ReportMetric(float64(incReads)/float64(runs), "reads")
					b.ReportMetric(float64(oldReads)/float64(runs), "before-reads")
					b.ReportMetric(float64(coldReads)/float64(runs), "cold-reads")
					b.ReportMetric(per(inc), "ms")
					b.ReportMetric(per(old), "before-ms")
					b.ReportMetric(per(cold), "cold-ms")
					b.ReportMetric(float64(old)/float64(inc), "before/now")
					b.ReportMetric(24*3*float64(incReads)/float64(runs), "reads/day")
					b.ReportMetric(24*3*float64(oldReads)/float64(runs), "before-reads/day")
				})
			}
		})
	}
}

// BenchmarkCatalogHeld is what a warm instance keeps in memory at 1,000
// and 10,000 services: before, the body; now, the body and the specs
// behind it (each service's encoded JSON and claims), measured as the
// heap the cache holds after a collection.
func BenchmarkCatalogHeld(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			e := newEnv(b, 0)
			e.seedMany(n)
			for b.Loop() {
				// Three instances at once, so what one holds stands out of
				// the heap's own noise.
				const held = 3
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&m0)
				caches := make([]*osb.Cache, held)
				var body int
				for i := range caches {
					caches[i] = &osb.Cache{Store: e.st}
					r, _, err := caches[i].Get(e.ctx)
					if err != nil {
						b.Fatal(err)
					}
					body = r.Size()
				}
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&m1)
				b.ReportMetric(float64(body)/(1<<20), "body-MiB")
				b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/held/(1<<20), "held-MiB")
				runtime.KeepAlive(caches)
			}
		})
	}
}

// BenchmarkBodyLimitOverhead is what the body limit costs a request that
// has no body (a catalog read, warm): the same handler with and without
// one more LimitBody in front, in the same run, so the ratio is what
// counts on a shared machine.
func BenchmarkBodyLimitOverhead(b *testing.B) {
	_, h := benchEnv(b, time.Hour)
	req := catalogRequest()
	serveCatalog(b, h, req)
	for name, handler := range map[string]http.Handler{"as served": h, "one more LimitBody": web.LimitBody(testMaxBody, h)} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				serveCatalog(b, handler, req)
			}
		})
	}
}
