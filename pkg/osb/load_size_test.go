//go:build reliability

package osb_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/loadstat"
)

// 200 concurrent catalog clients for 30 seconds on loopback TCP, against
// a warm broker on 20,000 services the size of the examples (about 90 MiB
// as JSON: over Cloud Run's 32 MiB, so served gzip-compressed only),
// production refresh window: every gzip request gets the whole gzip form
// (its Content-Length, decoded by nobody: the bytes on the wire are what
// is served), every request without gzip the 500 CatalogTooLarge, never
// a cut body; zero errors; p50, p99, requests per second and Firestore
// reads per request reported.
func TestLoadCatalog20000Services200Clients(t *testing.T) {
	const clients, services = 200, 20000
	dur := loadSeconds(t, 30)
	e := newEnv(t, 5*time.Second)
	e.end.Skip("20,000 specs: reading them back outlasts the checker's deadline, and this test writes nothing but the seed; TestLoadCatalog200Clients ends with the checker on the same paths")
	e.seedOffers(exampleOffers(t, services))
	e.broker.Cache.Now = time.Now
	cat, _, err := e.broker.Cache.Get(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !cat.TooLarge() || cat.GzipTooLarge() || cat.Services != services {
		t.Fatalf("%d services, %d bytes, %d gzip: want %d, identity over the limit, gzip under", cat.Services, cat.Size(), cat.GzipBytes, services)
	}
	var rec loadstat.Recorder
	var reads, refused atomic.Int64
	deadline := time.Now().Add(dur)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range clients {
		gzipClient := i%10 != 0 // one client in ten does not accept gzip
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}, Timeout: 60 * time.Second}
			defer client.CloseIdleConnections()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				n, err := func() (int64, error) {
					req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v2/catalog", nil)
					req.SetBasicAuth(brokerUser, brokerPass)
					req.Header.Set("X-Broker-API-Version", apiVersion)
					if gzipClient {
						req.Header.Set("Accept-Encoding", "gzip")
					}
					resp, err := client.Do(req)
					if err != nil {
						return 0, err
					}
					defer resp.Body.Close()
					k, err := io.Copy(io.Discard, resp.Body)
					if err != nil {
						return 0, err
					}
					switch {
					case gzipClient && (resp.StatusCode != http.StatusOK || k != cat.GzipBytes || resp.Header.Get("Content-Encoding") != "gzip"):
						return 0, fmt.Errorf("gzip: %d, %d bytes, Content-Encoding %q; want 200 with %d gzip bytes", resp.StatusCode, k, resp.Header.Get("Content-Encoding"), cat.GzipBytes)
					case !gzipClient && (resp.StatusCode != http.StatusInternalServerError || k > 4096):
						return 0, fmt.Errorf("identity: %d with %d bytes, want the 500 CatalogTooLarge", resp.StatusCode, k)
					case !gzipClient:
						refused.Add(1)
					}
					return strconv.ParseInt(resp.Header.Get("X-Specsync-Firestore-Reads"), 10, 64)
				}()
				reads.Add(n)
				rec.Add(time.Since(t0), err)
			}
		})
	}
	wg.Wait()
	s := rec.Summary(time.Since(start))
	for _, l := range s.Lines("catalog_load_20000") {
		t.Log(l)
	}
	if s.Requests > 0 {
		t.Log(loadstat.Figure("catalog_load_20000.reads_per_request", float64(reads.Load())/float64(s.Requests), "reads"))
	}
	if s.Errors != 0 {
		t.Fatalf("%d of %d requests failed, first: %v", s.Errors, s.Requests, rec.FirstErr)
	}
	if refused.Load() == 0 {
		t.Fatal("no request without gzip was answered")
	}
}
