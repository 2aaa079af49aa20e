package osb_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/osb/osbtest"
	"github.com/specsync/specsync/pkg/spec"
)

func TestCatalogETag(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.seed(parseSpec(t, specYAML("db")))
	_, first := e.catalog()
	etag := first.header.Get("ETag")
	if len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
		t.Fatalf("ETag %q is not a quoted strong tag", etag)
	}
	notModified := []string{
		etag,
		"W/" + etag, // If-None-Match compares weakly
		`"c0-0", ` + etag,
		`"c0-0",` + etag + `, "c9-9"`,
		"*",
	}
	for _, inm := range notModified {
		req := e.request(http.MethodGet, "/v2/catalog", "")
		req.Header.Set("If-None-Match", inm)
		r := e.send(req)
		if r.status != http.StatusNotModified {
			t.Fatalf("If-None-Match %s: %d, want 304", inm, r.status)
		}
		if len(r.body) != 0 {
			t.Errorf("If-None-Match %s: 304 with a body: %q", inm, r.body)
		}
		if r.header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: 304 ETag %q, want %q", inm, r.header.Get("ETag"), etag)
		}
	}
	for _, inm := range []string{`"c0-0"`, `"c0-0", "c9-9"`, strings.Trim(etag, `"`)} {
		req := e.request(http.MethodGet, "/v2/catalog", "")
		req.Header.Set("If-None-Match", inm)
		if r := e.send(req); r.status != http.StatusOK || string(r.body) != string(first.body) {
			t.Fatalf("If-None-Match %s: %d, want 200 with the catalog", inm, r.status)
		}
	}

	// A change tags the catalog anew: the old tag no longer matches, so a
	// platform holding the old body gets the new one.
	e.seed(parseSpec(t, specYAML("cache")))
	e.clock.Advance(e.window)
	req := e.request(http.MethodGet, "/v2/catalog", "")
	req.Header.Set("If-None-Match", etag)
	r := e.send(req)
	if r.status != http.StatusOK {
		t.Fatalf("after a change, old ETag: %d, want 200", r.status)
	}
	if r.header.Get("ETag") == etag {
		t.Fatalf("ETag %s unchanged after the catalog changed", etag)
	}
	if string(r.body) == string(first.body) {
		t.Fatal("body unchanged after a spec was added")
	}
}

func TestCatalogHead(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.seed(parseSpec(t, specYAML("db")))
	// Without Accept-Encoding (Go's transport adds gzip to a GET, not to
	// a HEAD): TestCatalogGzip compares the gzip form's.
	get := e.getCatalogAs(http.MethodGet, "-", "")
	r := e.getCatalogAs(http.MethodHead, "-", "")
	if r.status != http.StatusOK || len(r.body) != 0 {
		t.Fatalf("HEAD: %d with %d body bytes", r.status, len(r.body))
	}
	if r.header.Get("ETag") != get.header.Get("ETag") || r.header.Get("Content-Length") != get.header.Get("Content-Length") {
		t.Fatalf("HEAD headers %v differ from GET's %v", r.header, get.header)
	}
}

func TestMarkedSpecLeavesCatalogAfterWindow(t *testing.T) {
	e := newEnv(t, 5*time.Second)
	db, cache := parseSpec(t, specYAML("db")), parseSpec(t, specYAML("cache"))
	e.seed(db, cache)
	c, before := e.catalog()
	if got := serviceNames(c); !slices.Equal(got, []string{"cache", "db"}) {
		t.Fatalf("catalog %v, want [cache db]", got)
	}

	e.mark(cache.ID, "run-1")
	// Inside the window the warm cache answers without looking: the
	// marked spec is still served, which is what the window trades.
	e.clock.Advance(e.window - time.Millisecond)
	c, r := e.catalog()
	if !slices.Equal(serviceNames(c), []string{"cache", "db"}) || r.header.Get("ETag") != before.header.Get("ETag") {
		t.Fatalf("inside the window: %v %s", serviceNames(c), r.header.Get("ETag"))
	}

	e.clock.Advance(time.Millisecond)
	c, r = e.catalog()
	if got := serviceNames(c); !slices.Equal(got, []string{"db"}) {
		t.Fatalf("after the window: catalog %v, want [db]", got)
	}
	if r.header.Get("ETag") == before.header.Get("ETag") {
		t.Fatal("ETag unchanged after a spec was marked")
	}
	for _, s := range c.Services {
		if s.ID == cache.ID {
			t.Fatal("marked spec still served under its id")
		}
	}
}

// osbCatalogSchema is the Catalog component of the OSB OpenAPI file, the
// file pkg/catalog validates its renderings with; here it checks what the
// broker actually puts on the wire.
func osbCatalogSchema(t *testing.T) *openapi3.Schema {
	t.Helper()
	doc, err := osbtest.Doc()
	if err != nil {
		t.Fatal(err)
	}
	ref := doc.Components.Schemas["Catalog"]
	if ref == nil || ref.Value == nil {
		t.Fatal("OSB OpenAPI has no Catalog schema")
	}
	return ref.Value
}

func TestServedCatalogMatchesOSBOpenAPI(t *testing.T) {
	schema := osbCatalogSchema(t)
	e := newEnv(t, time.Minute)
	specs := []*spec.Spec{parseSpec(t, specYAML("db")), parseSpec(t, specYAML("cache")), parseSpec(t, specYAML("queue"))}
	e.seed(specs...)
	_, r := e.catalog()

	var doc any
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if err := schema.VisitJSON(doc, openapi3.MultiErrors()); err != nil {
		t.Fatalf("served catalog does not match the OSB Catalog schema: %v", err)
	}
	// The check can fail: the same body without a plan id does not pass.
	var broken any
	_ = json.Unmarshal(r.body, &broken)
	plan := broken.(map[string]any)["services"].([]any)[0].(map[string]any)["plans"].([]any)[0].(map[string]any)
	delete(plan, "id")
	if err := schema.VisitJSON(broken); err == nil {
		t.Fatal("a catalog with a plan without id passed the OSB schema")
	}

	// Every seeded service is served with the ids the spec got, and its
	// parameter schemas declare their JSON Schema dialect, as OSB requires.
	var c catalog.Catalog
	if err := json.Unmarshal(r.body, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Services) != len(specs) {
		t.Fatalf("%d services served, want %d", len(c.Services), len(specs))
	}
	byID := map[string]*spec.Spec{}
	for _, s := range specs {
		byID[s.ID] = s
	}
	for _, svc := range c.Services {
		s := byID[svc.ID]
		if s == nil || s.Name != svc.Name {
			t.Fatalf("served service %s %s was not seeded", svc.ID, svc.Name)
		}
		if len(svc.Plans) != 2 || svc.Plans[0].ID != s.Plans[0].ID || svc.Plans[1].ID != s.Plans[1].ID {
			t.Fatalf("service %s: plans %+v, want ids %s, %s", s.Name, svc.Plans, s.Plans[0].ID, s.Plans[1].ID)
		}
		small := svc.Plans[0].Schemas
		if small == nil || small.ServiceInstance == nil || small.ServiceBinding == nil {
			t.Fatalf("service %s plan small: schemas %+v", s.Name, small)
		}
		paths := map[string]*catalog.InputParameters{
			"service_instance.create": small.ServiceInstance.Create,
			"service_instance.update": small.ServiceInstance.Update,
			"service_binding.create":  small.ServiceBinding.Create,
		}
		for path, in := range paths {
			var params map[string]any
			if in != nil {
				params = in.Parameters
			}
			if params == nil {
				t.Fatalf("service %s plan small: no %s parameters schema in %v", s.Name, path, small)
			}
			if d, _ := params["$schema"].(string); !strings.HasPrefix(d, "http://json-schema.org/") {
				t.Errorf("service %s plan small: %s schema has $schema %q", s.Name, path, params["$schema"])
			}
		}
		if svc.Plans[1].Schemas != nil {
			t.Errorf("service %s plan large has no parameters but schemas %v", s.Name, svc.Plans[1].Schemas)
		}
	}
}

// TestCatalogReadsHeader: the handler reports each request's reads, which
// is what the benchmarks (and an operator with curl) measure.
func TestCatalogReadsHeader(t *testing.T) {
	e := newEnv(t, 5*time.Second)
	e.seed(parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")))
	_, cold := e.catalog()
	if got := readsOf(t, cold); got != 3 {
		t.Fatalf("cold request: %d reads, want 3", got)
	}
	_, warm := e.catalog()
	if got := readsOf(t, warm); got != 0 {
		t.Fatalf("warm request: %d reads, want 0", got)
	}
	e.clock.Advance(e.window)
	req := e.request(http.MethodGet, "/v2/catalog", "")
	req.Header.Set("If-None-Match", cold.header.Get("ETag"))
	r := e.send(req)
	if r.status != http.StatusNotModified || readsOf(t, r) != 1 {
		t.Fatalf("re-check answered %d with %s reads, want 304 after 1", r.status, r.header.Get("X-Specsync-Firestore-Reads"))
	}
}

func readsOf(t *testing.T, r response) int64 {
	t.Helper()
	n, err := strconv.ParseInt(r.header.Get("X-Specsync-Firestore-Reads"), 10, 64)
	if err != nil {
		t.Fatalf("X-Specsync-Firestore-Reads: %v", err)
	}
	return n
}

// TestCatalogNoCache: a request with Cache-Control: no-cache (or, without
// Cache-Control, Pragma: no-cache) is answered after one revision read
// whatever the window, then the usual path: the changes since, or the
// body held when the revision has not moved. Without it, the window
// holds.
func TestCatalogNoCache(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.seed(parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")))
	cold, _ := e.catalog()
	get := func(header ...string) (catalog.Catalog, response) {
		t.Helper()
		req := e.request(http.MethodGet, "/v2/catalog", "")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		r := e.send(req)
		if r.status != http.StatusOK && r.status != http.StatusNotModified {
			t.Fatalf("GET /v2/catalog %v: %d %s", header, r.status, r.body)
		}
		var c catalog.Catalog
		if r.status == http.StatusOK {
			if err := json.Unmarshal(r.body, &c); err != nil {
				t.Fatal(err)
			}
		}
		return c, r
	}
	e.seed(parseSpec(t, specYAML("c")))
	if c, r := get(); len(c.Services) != len(cold.Services) || readsOf(t, r) != 0 {
		t.Fatalf("without no-cache, inside the window: %d services, %d reads; want the old %d and 0", len(c.Services), readsOf(t, r), len(cold.Services))
	}
	c, r := get("Cache-Control", "no-cache")
	if len(c.Services) != 3 || readsOf(t, r) != 2 {
		t.Fatalf("no-cache after a change: %v, %d reads; want 3 services after 2 reads (revision, change)", serviceNames(c), readsOf(t, r))
	}
	tag := r.header.Get("ETag")
	// Revision unchanged: one read, and a matching tag is still 304.
	if _, r := get("Cache-Control", "no-cache", "If-None-Match", tag); r.status != http.StatusNotModified || readsOf(t, r) != 1 {
		t.Fatalf("no-cache, unchanged: %d after %d reads, want 304 after 1", r.status, readsOf(t, r))
	}
	// What a no-cache request read is what everyone is served now.
	if c, r := get(); len(c.Services) != 3 || readsOf(t, r) != 0 {
		t.Fatalf("after a fresh read: %d services, %d reads; want 3 and 0", len(c.Services), readsOf(t, r))
	}
	e.mark(parseSpec(t, specYAML("a")).ID, "run-1")
	if c, r := get("Pragma", "no-cache"); len(c.Services) != 2 || readsOf(t, r) != 2 {
		t.Fatalf("Pragma: no-cache after a mark: %v, %d reads; want 2 services after 2 reads", serviceNames(c), readsOf(t, r))
	}
	if _, r := get("Cache-Control", "max-age=0"); readsOf(t, r) != 1 {
		t.Fatalf("max-age=0: %d reads, want 1", readsOf(t, r))
	}
	if _, r := get("Cache-Control", "max-age=600", "Pragma", "no-cache"); readsOf(t, r) != 0 {
		t.Fatalf("Pragma with Cache-Control: %d reads, want 0 (RFC 9111: Pragma is ignored then)", readsOf(t, r))
	}
}
