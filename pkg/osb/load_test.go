//go:build reliability

package osb_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/loadstat"
	"github.com/specsync/specsync/pkg/spec"
)

// loadSeconds is SPECSYNC_LOAD_SECONDS (default def).
func loadSeconds(t *testing.T, def int) time.Duration {
	if v := os.Getenv("SPECSYNC_LOAD_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SPECSYNC_LOAD_SECONDS=%q", v)
		}
		return time.Duration(n) * time.Second
	}
	return time.Duration(def) * time.Second
}

// 200 concurrent catalog clients for 30 seconds on loopback TCP, against
// a warm broker on 100 services with the production refresh window (5s):
// zero errors; p50, p99, requests per second and Firestore reads per
// request are reported. Run by `make reliability`.
func TestLoadCatalog200Clients(t *testing.T) {
	const clients, services = 200, 100
	dur := loadSeconds(t, 30)
	e := newEnv(t, 5*time.Second)
	specs := make([]*spec.Spec, services)
	for i := range specs {
		specs[i] = parseSpec(t, specYAML(fmt.Sprintf("svc-%03d", i)))
	}
	e.seed(specs...)
	// Real time for the refresh window: the load test is about a warm
	// instance as it runs, re-checking the revision every 5 s.
	e.broker.Cache.Now = time.Now
	var rec loadstat.Recorder
	var reads atomic.Int64
	deadline := time.Now().Add(dur)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 30 * time.Second}
			defer client.CloseIdleConnections()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				n, err := getCatalogCounted(client, e.srv.URL)
				reads.Add(n)
				rec.Add(time.Since(t0), err)
			}
		})
	}
	wg.Wait()
	s := rec.Summary(time.Since(start))
	for _, l := range s.Lines("catalog_load") {
		t.Log(l)
	}
	if s.Requests > 0 {
		t.Log(loadstat.Figure("catalog_load.reads_per_request", float64(reads.Load())/float64(s.Requests), "reads"))
	}
	if s.Errors != 0 {
		t.Fatalf("%d of %d requests failed, first: %v", s.Errors, s.Requests, rec.FirstErr)
	}
	invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Canaries: []string{brokerPass, adminToken}})
}
