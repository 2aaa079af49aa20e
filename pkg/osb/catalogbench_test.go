package osb_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/loadstat"
	"github.com/specsync/specsync/pkg/spec"
)

// BenchmarkCatalogVsMemory: GET /v2/catalog on a warm broker (production
// refresh window, 5 s) with 100 and 1,000 services, over loopback TCP with
// 32 keep-alive clients, against a handler that serves the same bytes and
// headers from memory, in the same iteration so the ratio is of one
// moment: p50, p99, requests per second of both, their ratios, and
// Firestore reads per request. Run with -benchtime 1x (each iteration is
// 5,000 requests to each).
func BenchmarkCatalogVsMemory(b *testing.B) {
	for _, services := range []int{100, 1000} {
		b.Run(fmt.Sprintf("services=%d", services), func(b *testing.B) {
			e := newEnv(b, 5*time.Second)
			specs := make([]*spec.Spec, services)
			for i := range specs {
				specs[i] = parseSpec(b, specYAML(fmt.Sprintf("svc-%04d", i)))
			}
			e.seed(specs...)
			e.broker.Cache.Now = time.Now
			// What the broker serves, captured once, served by the
			// reference handler as is.
			w := httptest.NewRecorder()
			e.broker.Handler().ServeHTTP(w, catalogRequest())
			if w.Code != http.StatusOK {
				b.Fatalf("warm-up: %d", w.Code)
			}
			body, etag := w.Body.Bytes(), w.Header().Get("ETag")
			mem := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("ETag", etag)
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				_, _ = w.Write(body)
			}))
			defer mem.Close()
			b.ReportMetric(float64(len(body))/1024, "catalog-KiB")
			for b.Loop() {
				s, reads := hammer(b, e.srv.URL, 5000)
				m, _ := hammer(b, mem.URL, 5000)
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
				b.ReportMetric(ms(s.P50), "p50-ms")
				b.ReportMetric(ms(s.P99), "p99-ms")
				b.ReportMetric(s.RPS, "rps")
				b.ReportMetric(ms(m.P50), "mem-p50-ms")
				b.ReportMetric(ms(m.P99), "mem-p99-ms")
				b.ReportMetric(m.RPS, "mem-rps")
				b.ReportMetric(float64(s.P50)/float64(m.P50), "p50/mem")
				b.ReportMetric(float64(s.P99)/float64(m.P99), "p99/mem")
				b.ReportMetric(m.RPS/s.RPS, "mem-rps/rps")
				b.ReportMetric(float64(reads)/float64(s.Requests), "reads/req")
			}
		})
	}
}

// hammer sends n catalog requests from 32 clients and returns the summary
// and the Firestore reads the broker reported.
func hammer(b *testing.B, url string, n int) (loadstat.Summary, int64) {
	b.Helper()
	var rec loadstat.Recorder
	var left, reads atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			// Without compression: the broker's JSON form against the same
			// bytes (BenchmarkCatalogSize compares the gzip form).
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			defer client.CloseIdleConnections()
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				n, err := getCatalogCounted(client, url)
				reads.Add(n)
				rec.Add(time.Since(t0), err)
			}
		})
	}
	wg.Wait()
	s := rec.Summary(time.Since(start))
	if s.Errors > 0 {
		b.Fatalf("%d of %d requests failed: %v", s.Errors, s.Requests, rec.FirstErr)
	}
	return s, reads.Load()
}

// getCatalogCounted fetches /v2/catalog as a platform does and returns the
// Firestore reads the broker says the request cost.
func getCatalogCounted(client *http.Client, base string) (int64, error) {
	req, _ := http.NewRequest(http.MethodGet, base+"/v2/catalog", nil)
	req.SetBasicAuth(brokerUser, brokerPass)
	req.Header.Set("X-Broker-API-Version", apiVersion)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	n, _ := strconv.ParseInt(resp.Header.Get("X-Specsync-Firestore-Reads"), 10, 64)
	return n, nil
}
