package osb_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/spec"
)

// newCache is a cache on e's store with its own window and e's clock, so
// a test reads the reads of its calls alone.
func (e *env) newCache(window time.Duration) *osb.Cache {
	return &osb.Cache{Store: e.st, Window: window, Now: e.clock.Now}
}

func (e *env) get(c *osb.Cache) (*osb.Rendered, int64) {
	e.t.Helper()
	r, reads, err := c.Get(e.ctx)
	if err != nil {
		e.t.Fatalf("Cache.Get: %v", err)
	}
	return r, reads
}

func serviceCount(t *testing.T, body []byte) int {
	t.Helper()
	var c struct {
		Services []json.RawMessage `json:"services"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	return len(c.Services)
}

// TestCacheReads pins the cost model README promises for the catalog: a
// warm instance answers from memory inside the window, re-checks with one
// read after it, and pays for the specs only when the revision moved.
func TestCacheReads(t *testing.T) {
	e := newEnv(t, time.Minute)
	specs := []*spec.Spec{parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")), parseSpec(t, specYAML("c"))}
	e.seed(specs...)
	const window = 5 * time.Second
	c := e.newCache(window)

	cold, reads := e.get(c)
	if want := int64(1 + len(specs)); reads != want {
		t.Fatalf("cold: %d reads, want %d (revision + %d specs)", reads, want, len(specs))
	}
	if n := serviceCount(t, cold.Body); n != len(specs) {
		t.Fatalf("cold: %d services, want %d", n, len(specs))
	}

	// Steps add up to the last instant of the window.
	for _, d := range []time.Duration{0, time.Second, window - time.Second - time.Nanosecond} {
		e.clock.Advance(d)
		r, reads := e.get(c)
		if reads != 0 || r != cold {
			t.Fatalf("inside the window: %d reads, same catalog %v; want 0 and the same", reads, r == cold)
		}
	}

	// The window has passed, the revision has not moved: one read of
	// meta/catalog, same catalog.
	e.clock.Advance(time.Nanosecond)
	r, reads := e.get(c)
	if reads != 1 || r.ETag != cold.ETag || string(r.Body) != string(cold.Body) {
		t.Fatalf("after the window, same revision: %d reads, ETag %s; want 1 read and %s", reads, r.ETag, cold.ETag)
	}
	// That check opened a new window.
	e.clock.Advance(window / 2)
	if _, reads := e.get(c); reads != 0 {
		t.Fatalf("after a re-check: %d reads, want 0", reads)
	}

	// A change inside the window is not seen until it ends: that is the
	// staleness the window buys its reads with.
	d := parseSpec(t, specYAML("d"))
	e.seed(d)
	if r, reads := e.get(c); reads != 0 || r.ETag != cold.ETag {
		t.Fatalf("change inside the window: %d reads, ETag %s; want 0 and the old tag", reads, r.ETag)
	}

	e.clock.Advance(window)
	r, reads = e.get(c)
	if want := int64(1 + len(specs) + 1); reads != want {
		t.Fatalf("after a bump: %d reads, want %d (revision + %d active specs)", reads, want, len(specs)+1)
	}
	if r.ETag == cold.ETag || serviceCount(t, r.Body) != len(specs)+1 {
		t.Fatalf("after a bump: ETag %s, %d services; want a new tag and %d", r.ETag, serviceCount(t, r.Body), len(specs)+1)
	}
	rev, err := e.st.Revision(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Revision != rev {
		t.Fatalf("rendered at revision %d, store is at %d", r.Revision, rev)
	}

	// Marked specs are not read: the re-render costs 1 + active specs.
	e.mark(specs[0].ID, "run-1")
	e.clock.Advance(window)
	r, reads = e.get(c)
	if want := int64(1 + len(specs)); reads != want {
		t.Fatalf("after marking one: %d reads, want %d", reads, want)
	}
	if n := serviceCount(t, r.Body); n != len(specs) {
		t.Fatalf("after marking one: %d services, want %d", n, len(specs))
	}
}

// TestCacheReadsEmpty: with no spec at all the query still bills one
// read (Firestore charges a query that returns nothing as one read).
func TestCacheReadsEmpty(t *testing.T) {
	e := newEnv(t, time.Minute)
	c := e.newCache(time.Second)
	r, reads := e.get(c)
	if reads != 2 {
		t.Fatalf("empty store: %d reads, want 2 (revision + an empty query)", reads)
	}
	if string(r.Body) != `{"services":[]}` {
		t.Fatalf("empty catalog body %s, want an empty services list", r.Body)
	}
}

// TestCacheWindowZero: without a window every call re-checks the
// revision, and an unchanged revision still costs one read only.
func TestCacheWindowZero(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.seed(parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")))
	c := e.newCache(0)
	first, reads := e.get(c)
	if reads != 3 {
		t.Fatalf("cold: %d reads, want 3", reads)
	}
	for i := range 3 {
		r, reads := e.get(c)
		if reads != 1 || r != first {
			t.Fatalf("call %d: %d reads, same catalog %v; want 1 and the same", i, reads, r == first)
		}
	}
}

// TestCacheConcurrentColdGets: callers arriving together at a cold cache
// share one render instead of each querying every spec.
func TestCacheConcurrentColdGets(t *testing.T) {
	e := newEnv(t, time.Minute)
	specs := []*spec.Spec{parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")), parseSpec(t, specYAML("c"))}
	e.seed(specs...)
	c := e.newCache(time.Minute)
	const callers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	tags := map[string]bool{}
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			r, reads, err := c.Get(e.ctx)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			total += reads
			tags[r.ETag] = true
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if want := int64(1 + len(specs)); total != want || len(tags) != 1 {
		t.Fatalf("%d callers: %d reads in all, %d tags; want %d and 1", callers, total, len(tags), want)
	}
}

// TestCatalogReadsHeader: the handler reports each request's reads, which
// is what the benchmarks (and an operator with curl) measure.
func TestCatalogReadsHeader(t *testing.T) {
	e := newEnv(t, 5*time.Second)
	e.seed(parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")))
	readsOf := func(r response) int64 {
		t.Helper()
		n, err := strconv.ParseInt(r.header.Get("X-Specsync-Firestore-Reads"), 10, 64)
		if err != nil {
			t.Fatalf("X-Specsync-Firestore-Reads: %v", err)
		}
		return n
	}
	_, cold := e.catalog()
	if got := readsOf(cold); got != 3 {
		t.Fatalf("cold request: %d reads, want 3", got)
	}
	_, warm := e.catalog()
	if got := readsOf(warm); got != 0 {
		t.Fatalf("warm request: %d reads, want 0", got)
	}
	e.clock.Advance(e.window)
	req := e.request(http.MethodGet, "/v2/catalog", "")
	req.Header.Set("If-None-Match", cold.header.Get("ETag"))
	r := e.send(req)
	if r.status != http.StatusNotModified || readsOf(r) != 1 {
		t.Fatalf("re-check answered %d with %s reads, want 304 after 1", r.status, r.header.Get("X-Specsync-Firestore-Reads"))
	}
}
