package osb_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/spec"
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

// BenchmarkBodyLimitOverhead is what the body limit costs a request that
// has no body (a catalog read, warm): the same handler with and without
// one more LimitBody in front, in the same run, so the ratio is what
// counts on a shared machine.
func BenchmarkBodyLimitOverhead(b *testing.B) {
	_, h := benchEnv(b, time.Hour)
	req := catalogRequest()
	serveCatalog(b, h, req)
	for name, handler := range map[string]http.Handler{"as served": h, "one more LimitBody": osb.LimitBody(testMaxBody, h)} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				serveCatalog(b, handler, req)
			}
		})
	}
}
