//go:build reliability

package bootstrap_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/loadstat"
	"github.com/specsync/specsync/pkg/store"
)

// 100 bootstrap requests a second for 10 seconds on loopback TCP: every
// one is accepted, all coalesce into one operation, published once.
// Run by `make reliability`.
func TestLoadBootstrap100PerSecond(t *testing.T) {
	dur := 10 * time.Second
	if v := os.Getenv("SPECSYNC_LOAD_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SPECSYNC_LOAD_SECONDS=%q", v)
		}
		dur = time.Duration(min(n, 10)) * time.Second
	}
	client := checked(t)
	ops := bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour)
	pub := &countingPublisher{}
	svc := &bootstrap.Service{Operations: ops, Publisher: pub, Registries: rigRegistries,
		VerifyAdmin: func(*http.Request, string) bool { return true }, Logger: quiet}
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	var rec loadstat.Recorder
	var mu sync.Mutex
	opIDs := map[string]int{}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var wg sync.WaitGroup
	for time.Since(start) < dur {
		<-tick.C
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/bootstrap", nil)
			req.Header.Set("Authorization", "Bearer admin")
			t0 := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				var out api.BootstrapAccepted
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &out) != nil {
					err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
				} else {
					mu.Lock()
					opIDs[out.Operation]++
					mu.Unlock()
				}
			}
			rec.Add(time.Since(t0), err)
		})
	}
	wg.Wait()
	s := rec.Summary(time.Since(start))
	for _, l := range s.Lines("bootstrap_load") {
		t.Log(l)
	}
	t.Log(loadstat.Figure("bootstrap_load.operations", float64(len(opIDs)), "operations"))
	t.Log(loadstat.Figure("bootstrap_load.published", float64(len(pub.msgs)), "messages"))
	if s.Errors != 0 {
		t.Fatalf("%d of %d requests failed, first: %v", s.Errors, s.Requests, rec.FirstErr)
	}
	if len(opIDs) != 1 || len(pub.msgs) != len(rigRegistries) {
		t.Fatalf("%d operations, %d messages published; want 1 and %d", len(opIDs), len(pub.msgs), len(rigRegistries))
	}
	invariant.Require(t, client, invariant.Options{Settled: true})
}
