package osb_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/loadstat"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// exampleOffers are n offers the size of the demo's specs
// (examples/registry: about 4.8 kB a service once rendered with its
// schemas), each example in turn under a name of its own.
func exampleOffers(b testing.TB, n int) []store.Offer {
	b.Helper()
	files, err := filepath.Glob("../../examples/registry/*.yaml")
	if err != nil || len(files) == 0 {
		b.Fatalf("examples/registry: %v (%d files)", err, len(files))
	}
	nameLine := regexp.MustCompile(`(?m)^name: (\S+)$`)
	idLine := regexp.MustCompile(`(?m)^id: .*$`) // an explicit id would be shared by every copy
	templates := make([]string, len(files))
	for i, f := range files {
		y, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		templates[i] = idLine.ReplaceAllString(string(y), "")
	}
	offers := make([]store.Offer, n)
	for i := range offers {
		y := nameLine.ReplaceAllString(templates[i%len(templates)], fmt.Sprintf("name: ${1}-%05d", i))
		s, err := spec.Parse([]byte(y))
		if err != nil {
			b.Fatalf("example %d: %v", i, err)
		}
		spec.AssignIDs(s, testReg)
		offers[i] = store.Offer{Registry: testReg, Entry: s.Name, Ref: "registry.test/" + s.Name + ":latest", Spec: s, Digest: spec.Digest(s), Run: "bench"}
	}
	return offers
}

// seedOffers creates offers in batches, as a first import does, and
// commits them.
func (e *env) seedOffers(offers []store.Offer) {
	e.t.Helper()
	batches, err := store.CreateBatches(offers)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, b := range batches {
		if _, err := e.st.CreateSpecs(e.ctx, b); err != nil {
			e.t.Fatal(err)
		}
	}
	e.commit()
}

// heapPeak samples the live heap (runtime/metrics, which does not stop
// the world) every millisecond until stopped, and returns the highest.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		read()
		return peak.Load()
	}
}

// BenchmarkCatalogSize is the catalog at platform scale: 1,000, 10,000
// and 20,000 services the size of the examples. Per size: a cold
// instance's render (revision, every spec, assemble, gzip) in ms and its
// peak live heap (sampled every millisecond; above the heap before it,
// and in all); the bytes on the wire of each form and whether each fits
// the deployment's limit (DefaultMaxCatalogBytes, Cloud Run's); then,
// for each form that is served, warm GETs (production window, 32
// keep-alive clients over loopback) against a handler serving the same
// bytes and headers from memory, in the same iteration: p50, p99, their
// ratios to memory's, and Firestore reads per request. A form over the
// limit is refused (500), so it has no serve figures; identity-fits 0
// says so. Run with -benchtime 1x (one iteration is one cold render and
// the serve runs; seeding 20,000 specs into the emulator comes first).
func BenchmarkCatalogSize(b *testing.B) {
	for _, n := range []int{1000, 10000, 20000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			e := newEnv(b, time.Hour)
			e.seedOffers(exampleOffers(b, n))
			for b.Loop() {
				runtime.GC()
				runtime.GC()
				var m0 runtime.MemStats
				runtime.ReadMemStats(&m0)
				stop := heapPeak()
				c := &osb.Cache{Store: e.st, Window: time.Hour}
				t0 := time.Now()
				r, _, err := c.Get(e.ctx)
				cold := time.Since(t0)
				peak := stop()
				if err != nil {
					b.Fatal(err)
				}
				mib := func(v float64) float64 { return v / (1 << 20) }
				b.ReportMetric(float64(cold.Microseconds())/1000, "cold-ms")
				b.ReportMetric(mib(float64(peak)-float64(m0.HeapAlloc)), "cold-peak-heap-MiB")
				b.ReportMetric(mib(float64(peak)), "cold-peak-heap-total-MiB")
				b.ReportMetric(mib(float64(r.Size())), "identity-MiB")
				b.ReportMetric(mib(float64(r.GzipBytes)), "gzip-MiB")
				b.ReportMetric(float64(r.Size())/float64(r.GzipBytes), "identity/gzip")
				b.ReportMetric(float64(r.Size())/float64(r.Services), "identity-B/service")
				fits := func(ok bool) float64 {
					if ok {
						return 1
					}
					return 0
				}
				b.ReportMetric(fits(!r.TooLarge()), "identity-fits")
				b.ReportMetric(fits(!r.GzipTooLarge()), "gzip-fits")

				// The warm serves: this cache, as the handler's.
				c.Now = time.Now
				e.broker.Cache = c
				for _, form := range []struct {
					name, accept string
					body         []byte
					etag         string
					refused      bool
				}{
					{"identity", "identity", r.Body(), r.ETag, r.TooLarge()},
					{"gzip", "gzip", r.Gzip, r.GzipETag, r.GzipTooLarge()},
				} {
					if form.refused {
						continue
					}
					body, etag, gz := form.body, form.etag, form.name == "gzip"
					mem := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
						w.Header().Add("Vary", "Accept-Encoding")
						w.Header().Set("ETag", etag)
						w.Header().Set("Content-Type", "application/json")
						if gz {
							w.Header().Set("Content-Encoding", "gzip")
						}
						w.Header().Set("Content-Length", strconv.Itoa(len(body)))
						_, _ = w.Write(body)
					}))
					// About 256 MiB through each server, 64 to 2,000 requests.
					requests := min(max((256<<20)/len(body), 64), 2000)
					s, reads := hammerForm(b, e.srv.URL, form.accept, len(body), requests)
					m, _ := hammerForm(b, mem.URL, form.accept, len(body), requests)
					mem.Close()
					ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
					b.ReportMetric(ms(s.P50), form.name+"-p50-ms")
					b.ReportMetric(ms(s.P99), form.name+"-p99-ms")
					b.ReportMetric(ms(m.P50), form.name+"-mem-p50-ms")
					b.ReportMetric(ms(m.P99), form.name+"-mem-p99-ms")
					b.ReportMetric(float64(s.P50)/float64(m.P50), form.name+"-p50/mem")
					b.ReportMetric(float64(s.P99)/float64(m.P99), form.name+"-p99/mem")
					b.ReportMetric(float64(reads)/float64(s.Requests), form.name+"-reads/req")
				}
			}
		})
	}
}

// hammerForm sends n catalog requests with the given Accept-Encoding
// from 32 keep-alive clients that neither add nor decode gzip (the bytes
// on the wire are what is measured), checks each body's length, and
// returns the summary and the Firestore reads the broker reported.
func hammerForm(b *testing.B, base, accept string, size, n int) (loadstat.Summary, int64) {
	b.Helper()
	var rec loadstat.Recorder
	var left, reads atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			defer client.CloseIdleConnections()
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				got, err := func() (int64, error) {
					req, _ := http.NewRequest(http.MethodGet, base+"/v2/catalog", nil)
					req.SetBasicAuth(brokerUser, brokerPass)
					req.Header.Set("X-Broker-API-Version", apiVersion)
					req.Header.Set("Accept-Encoding", accept)
					resp, err := client.Do(req)
					if err != nil {
						return 0, err
					}
					defer resp.Body.Close()
					k, err := io.Copy(io.Discard, resp.Body)
					if err != nil {
						return 0, err
					}
					if resp.StatusCode != http.StatusOK || k != int64(size) {
						return 0, fmt.Errorf("status %d, %d bytes, want 200 with %d", resp.StatusCode, k, size)
					}
					r, _ := strconv.ParseInt(resp.Header.Get("X-Specsync-Firestore-Reads"), 10, 64)
					return r, nil
				}()
				reads.Add(got)
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
