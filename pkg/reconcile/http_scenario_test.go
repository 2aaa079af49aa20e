package reconcile_test

import (
	"context"
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

// Validators are sent only while the last run is a baseline: an HTTP
// index that answers 304 says it is unchanged since that run, and a run
// after one that held a version back (or died, or met a conflict) must
// plan over the listing itself. So with the index unchanged, the held
// back version is held back again while its instance stays, and adopted
// once it is gone; nothing is ever planned over an empty listing.
func TestScenarioHTTPHeldBackVersionAdoptedWhenTheIndexIsUnchanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	idx := &indexServer{}
	idx.set(indexOf("db"), `"v1"`)
	srv := httptest.NewServer(idx)
	t.Cleanup(srv.Close)
	src, err := registry.NewHTTP(registry.HTTPConfig{URL: srv.URL + "/index.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	reg := reconcile.Registry{Name: "index", Source: src, Policy: defaultPolicy}
	twoPlans := "- " + strings.ReplaceAll(strings.TrimSuffix(specYAML("db", "small", "default"), "\n"), "\n", "\n  ") + "\n"
	idx.set(twoPlans, `"v1"`)
	e.run(reg)
	rec, ok := e.specs("index")["db"]
	if !ok {
		t.Fatal("db was not created")
	}
	sp, _ := rec.Spec()
	if _, err := e.store.CreateInstance(ctx, store.Instance{ID: "i1", SpecID: rec.ID, PlanID: sp.Plans[0].ID}); err != nil {
		t.Fatal(err)
	}
	// The new version drops the plan the instance is on.
	idx.set(indexOf("db"), `"v2"`)
	if run := e.run(reg); run.Counts.HeldBack != 1 {
		t.Fatalf("the stranding version: %+v", run.Counts)
	}
	// The index is unchanged (the source would answer 304): still held
	// back, nothing marked.
	run := e.run(reg)
	if run.Result != api.ResultSucceeded || run.Counts.HeldBack != 1 || run.Counts.Marked != 0 {
		t.Fatalf("the unchanged index while the instance stays: %s %+v (guard %q)", run.Result, run.Counts, run.Guard)
	}
	if _, err := e.store.DeleteInstance(ctx, "i1"); err != nil {
		t.Fatal(err)
	}
	run = e.run(reg)
	if run.Counts.Updated != 1 || run.Counts.HeldBack != 0 {
		t.Fatalf("the unchanged index after the instance went: %s %+v (guard %q), want the version adopted", run.Result, run.Counts, run.Guard)
	}
	// Now a baseline again: the next run is answered 304 and stops.
	before := idx.notMod
	if run := e.run(reg); run.Result != api.ResultUnchanged || idx.notMod != before+1 {
		t.Fatalf("the run after the adoption: %s, %d answered 304", run.Result, idx.notMod-before)
	}
}
