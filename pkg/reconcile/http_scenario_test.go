package reconcile_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
)

// indexServer serves an index document with an ETag and counts requests.
type indexServer struct {
	mu       sync.Mutex
	body     string
	etag     string
	requests int
	notMod   int
}

func (s *indexServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == s.etag {
		s.notMod++
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", s.etag)
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write([]byte(s.body))
}

func (s *indexServer) set(body, etag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.etag = body, etag
}

func indexOf(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString("- ")
		b.WriteString(strings.ReplaceAll(strings.TrimSuffix(specYAML(n), "\n"), "\n", "\n  "))
		b.WriteString("\n")
	}
	return b.String()
}

// An unchanged HTTP index costs one request (answered 304) and one
// Firestore read.
func TestScenarioHTTPIndexNotModified(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	idx := &indexServer{}
	idx.set(indexOf("alpha", "beta"), `"v1"`)
	srv := httptest.NewServer(idx)
	t.Cleanup(srv.Close)
	src, err := registry.NewHTTP(registry.HTTPConfig{URL: srv.URL + "/index.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	reg := reconcile.Registry{Name: "index", Source: src, Policy: defaultPolicy}

	run := e.run(reg)
	if run.Counts.Created != 2 {
		t.Fatalf("counts %+v", run.Counts)
	}
	run = e.run(reg)
	wantResult(t, run, api.ResultUnchanged)
	if run.Ops != (store.Counts{Reads: 1}) || idx.notMod != 1 || idx.requests != 2 {
		t.Fatalf("unchanged index: ops %+v, %d requests, %d answered 304", run.Ops, idx.requests, idx.notMod)
	}
	idx.set(indexOf("alpha", "beta", "gamma"), `"v2"`)
	run = e.run(reg)
	if run.Counts.Created != 1 || run.Counts.Unchanged != 2 {
		t.Fatalf("changed index: counts %+v", run.Counts)
	}
	if st := e.status("index"); st.ETag != `"v2"` {
		t.Fatalf("etag baseline %q, want \"v2\"", st.ETag)
	}
}
