package osb_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/specsync/specsync/pkg/osb/osbtest"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

func TestBrokerAuth(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.seed(parseSpec(t, specYAML("db")))
	paths := []struct{ method, path, body string }{
		{http.MethodGet, "/v2/catalog", ""},
		{http.MethodPut, "/v2/service_instances/i1", `{}`},
		{http.MethodGet, "/v2/service_instances/i1", ""},
		{http.MethodDelete, "/v2/service_instances/i1?service_id=a&plan_id=b", ""},
	}
	creds := map[string]func(*http.Request){
		"none":           func(r *http.Request) { r.Header.Del("Authorization") },
		"wrong password": func(r *http.Request) { r.SetBasicAuth(brokerUser, brokerPass+"x") },
		"wrong user":     func(r *http.Request) { r.SetBasicAuth("someone", brokerPass) },
		"empty password": func(r *http.Request) { r.SetBasicAuth(brokerUser, "") },
		"admin bearer":   func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+adminToken) },
		// Auth comes before the version check: an unauthenticated caller
		// learns nothing about what the broker accepts.
		"none, no version": func(r *http.Request) {
			r.Header.Del("Authorization")
			r.Header.Del("X-Broker-API-Version")
		},
	}
	for _, p := range paths {
		for name, breakAuth := range creds {
			t.Run(p.method+" "+p.path+"/"+name, func(t *testing.T) {
				req := e.request(p.method, p.path, p.body)
				breakAuth(req)
				r := e.send(req)
				wantOSBError(t, r, http.StatusUnauthorized, "Unauthorized")
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") || !strings.Contains(got, "realm=") {
					t.Errorf("WWW-Authenticate %q, want a Basic challenge with a realm", got)
				}
				if strings.Contains(string(r.body), brokerPass) {
					t.Error("the response contains the broker password")
				}
			})
		}
	}
}

func TestBrokerAPIVersion(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.seed(parseSpec(t, specYAML("db")))
	for _, v := range []string{"", "1.0", "3.0", "2", "2.x", "v2.17", "2.17.1", "2.17.x"} {
		t.Run("reject "+v, func(t *testing.T) {
			req := e.request(http.MethodGet, "/v2/catalog", "")
			if v == "" {
				req.Header.Del("X-Broker-API-Version")
			} else {
				req.Header.Set("X-Broker-API-Version", v)
			}
			r := e.send(req)
			eb := wantOSBError(t, r, http.StatusPreconditionFailed, "")
			if eb.Error == "" {
				t.Errorf("412 without an error code: %s", r.body)
			}
			if !strings.Contains(eb.Description, "2.") {
				t.Errorf("412 description %q does not say which version is wanted", eb.Description)
			}
		})
	}
	for _, v := range []string{"2.12", "2.13", "2.17"} {
		t.Run("accept "+v, func(t *testing.T) {
			req := e.request(http.MethodGet, "/v2/catalog", "")
			req.Header.Set("X-Broker-API-Version", v)
			if r := e.send(req); r.status != http.StatusOK {
				t.Fatalf("version %s: %d %s", v, r.status, r.body)
			}
		})
	}
	// The version guards the instance endpoints as well.
	req := e.request(http.MethodPut, "/v2/service_instances/i1", `{}`)
	req.Header.Set("X-Broker-API-Version", "1.0")
	wantOSBError(t, e.send(req), http.StatusPreconditionFailed, "")
}

func TestBrokerEchoesRequestIdentity(t *testing.T) {
	e := newEnv(t, time.Minute)
	db := parseSpec(t, specYAML("db"))
	e.seed(db)
	cases := map[string]struct {
		req  func() *http.Request
		want int
	}{
		"catalog": {func() *http.Request { return e.request(http.MethodGet, "/v2/catalog", "") }, http.StatusOK},
		"provision": {func() *http.Request {
			return e.request(http.MethodPut, "/v2/service_instances/echo1", provisionBody(db.ID, db.Plans[0].ID))
		}, http.StatusCreated},
		"fetch unknown":  {func() *http.Request { return e.request(http.MethodGet, "/v2/service_instances/nope", "") }, http.StatusNotFound},
		"wrong method":   {func() *http.Request { return e.request(http.MethodPost, "/v2/catalog", "") }, http.StatusMethodNotAllowed},
		"malformed body": {func() *http.Request { return e.request(http.MethodPut, "/v2/service_instances/x", "{") }, http.StatusBadRequest},
		"old version": {func() *http.Request {
			r := e.request(http.MethodGet, "/v2/catalog", "")
			r.Header.Set("X-Broker-API-Version", "1.0")
			return r
		}, http.StatusPreconditionFailed},
		// OSB: the broker SHOULD include the header in the response to the
		// request; a refused request is still a response to it.
		"unauthenticated": {func() *http.Request {
			r := e.request(http.MethodGet, "/v2/catalog", "")
			r.Header.Del("Authorization")
			return r
		}, http.StatusUnauthorized},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			id := "req-" + strings.ReplaceAll(name, " ", "-") + "-4711"
			req := c.req()
			req.Header.Set("X-Broker-API-Request-Identity", id)
			r := e.send(req)
			if r.status != c.want {
				t.Fatalf("status %d, want %d: %s", r.status, c.want, r.body)
			}
			if got := r.header.Get("X-Broker-API-Request-Identity"); got != id {
				t.Errorf("X-Broker-API-Request-Identity %q, want %q", got, id)
			}
		})
	}
	// Without one in the request there is nothing to echo.
	if r := e.do(http.MethodGet, "/v2/catalog", ""); r.header.Get("X-Broker-API-Request-Identity") != "" {
		t.Errorf("an identity was invented: %q", r.header.Get("X-Broker-API-Request-Identity"))
	}
}

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
	_, get := e.catalog()
	r := e.do(http.MethodHead, "/v2/catalog", "")
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
	if got := c.names(); !slices.Equal(got, []string{"cache", "db"}) {
		t.Fatalf("catalog %v, want [cache db]", got)
	}

	e.mark(cache.ID, "run-1")
	// Inside the window the warm cache answers without looking: the
	// marked spec is still served, which is what the window trades.
	e.clock.Advance(e.window - time.Millisecond)
	c, r := e.catalog()
	if !slices.Equal(c.names(), []string{"cache", "db"}) || r.header.Get("ETag") != before.header.Get("ETag") {
		t.Fatalf("inside the window: %v %s", c.names(), r.header.Get("ETag"))
	}

	e.clock.Advance(time.Millisecond)
	c, r = e.catalog()
	if got := c.names(); !slices.Equal(got, []string{"db"}) {
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
	var c served
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
		paths := map[string]any{
			"service_instance.create": dig(small, "service_instance", "create"),
			"service_instance.update": dig(small, "service_instance", "update"),
			"service_binding.create":  dig(small, "service_binding", "create"),
		}
		for path, v := range paths {
			params, _ := v.(map[string]any)["parameters"].(map[string]any)
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

func dig(m map[string]map[string]any, outer, inner string) any {
	v, _ := m[outer][inner].(map[string]any)
	if v == nil {
		return map[string]any{}
	}
	return v
}

func TestInstanceLifecycle(t *testing.T) {
	e := newEnv(t, time.Minute)
	db := parseSpec(t, specYAML("db"))
	e.seed(db)
	small, large := db.Plans[0].ID, db.Plans[1].ID
	path := "/v2/service_instances/inst-1"

	wantEmptyObject(t, e.do(http.MethodPut, path, provisionBody(db.ID, small)), http.StatusCreated)
	if n := e.instanceCount(db.ID); n != 1 {
		t.Fatalf("spec instance count %d after provision, want 1", n)
	}
	// The same request again is OSB's "already exists, identical": 200,
	// and the count does not move.
	wantEmptyObject(t, e.do(http.MethodPut, path, provisionBody(db.ID, small)), http.StatusOK)
	if n := e.instanceCount(db.ID); n != 1 {
		t.Fatalf("spec instance count %d after the repeat, want 1", n)
	}
	wantOSBError(t, e.do(http.MethodPut, path, provisionBody(db.ID, large)), http.StatusConflict, "")

	r := e.do(http.MethodGet, path, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	wantOSBResponse(t, http.MethodGet, instancePath, r)
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	// The instance is on the version it was provisioned at: generation 1.
	want := map[string]any{"service_id": db.ID, "plan_id": small, "maintenance_info": map[string]any{"version": "1.0.0"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GET body %v, want %v", got, want)
	}
	inst := e.instanceDocs()["inst-1"]
	if inst.Context["platform"] != "kubernetes" || inst.Context["namespace"] != "apps" {
		t.Errorf("recorded context %v, want the request's", inst.Context)
	}
	if inst.Platform != "" {
		t.Errorf("OSB's context.platform %q was taken for an OCI platform", inst.Platform)
	}

	// Deprovision with ids other than the instance's is refused and keeps it.
	wantOSBError(t, e.do(http.MethodDelete, path+"?service_id="+db.ID+"&plan_id="+large, ""), http.StatusBadRequest, "")
	wantOSBError(t, e.do(http.MethodDelete, path+"?service_id=other&plan_id="+small, ""), http.StatusBadRequest, "")
	wantOSBError(t, e.do(http.MethodDelete, path+"?service_id="+db.ID, ""), http.StatusBadRequest, "")
	wantOSBError(t, e.do(http.MethodDelete, path, ""), http.StatusBadRequest, "")
	if _, ok := e.instanceDocs()["inst-1"]; !ok {
		t.Fatal("a refused deprovision removed the instance")
	}

	wantEmptyObject(t, e.do(http.MethodDelete, path+"?service_id="+db.ID+"&plan_id="+small, ""), http.StatusOK)
	if n := e.instanceCount(db.ID); n != 0 {
		t.Fatalf("spec instance count %d after deprovision, want 0", n)
	}
	wantOSBError(t, e.do(http.MethodGet, path, ""), http.StatusNotFound, "NotFound")
	wantEmptyObject(t, e.do(http.MethodDelete, path+"?service_id="+db.ID+"&plan_id="+small, ""), http.StatusGone)

	// After deprovisioning, the id is free again, for any plan.
	wantEmptyObject(t, e.do(http.MethodPut, path, provisionBody(db.ID, large)), http.StatusCreated)
}

func TestProvisionBodyNearLimit(t *testing.T) {
	e := newEnv(t, time.Minute)
	db := parseSpec(t, specYAML("db"))
	e.seed(db)
	// Just under MaxBodyBytes is accepted: the limit is not off by a
	// margin that would refuse real requests.
	pad := strings.Repeat("x", testMaxBody-300)
	body := `{"service_id":"` + db.ID + `","plan_id":"` + db.Plans[0].ID + `","context":{"platform":"kubernetes","note":"` + pad + `"}}`
	if len(body) >= testMaxBody {
		t.Fatalf("test body is %d bytes, want under %d", len(body), testMaxBody)
	}
	wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/big", body), http.StatusCreated)
}

func TestOCIPlatform(t *testing.T) {
	e := newEnv(t, time.Minute)
	pg := parseSpec(t, specYAML("pg"))
	pg.Platforms = []spec.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
	e.seed(pg)
	body := func(p string) string {
		return `{"service_id":"` + pg.ID + `","plan_id":"` + pg.Plans[0].ID + `","context":{"platform":"kubernetes","oci_platform":"` + p + `"}}`
	}
	wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/arm", body("linux/arm64")), http.StatusCreated)
	rec, err := e.st.GetSpec(e.ctx, pg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.PlatformInstances["linux/arm64"] != 1 || rec.PlanInstances[pg.Plans[0].ID] != 1 {
		t.Fatalf("usage counters %v %v, want the arm64 instance counted", rec.PlatformInstances, rec.PlanInstances)
	}
}

// TestBadRequestsWriteNothing sends every kind of request the broker must
// refuse and then compares every document of the project, update times
// included, with what was there before.
func TestBadRequestsWriteNothing(t *testing.T) {
	e := newEnv(t, time.Minute)
	db, gone := parseSpec(t, specYAML("db")), parseSpec(t, specYAML("gone"))
	pg := parseSpec(t, specYAML("pg"))
	pg.Platforms = []spec.Platform{{OS: "linux", Architecture: "amd64"}}
	e.seed(db, gone, pg)
	e.mark(gone.ID, "run-1")
	small, large := db.Plans[0].ID, db.Plans[1].ID
	wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/existing", provisionBody(db.ID, small)), http.StatusCreated)
	_, _ = e.catalog() // warm the cache too: serving it must not write either

	before := e.dbState()
	instancesBefore := e.instanceDocs()
	countsBefore := map[string]int64{db.ID: e.instanceCount(db.ID), gone.ID: e.instanceCount(gone.ID), pg.ID: e.instanceCount(pg.ID)}

	put := func(id, body string) func() *http.Request {
		return func() *http.Request { return e.request(http.MethodPut, "/v2/service_instances/"+id, body) }
	}
	tooBig := `{"service_id":"` + db.ID + `","plan_id":"` + small + `","context":{"note":"` + strings.Repeat("x", testMaxBody) + `"}}`
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		code   string // "" for any; "-" for the {} body of a 410
	}{
		{"unknown service", put("n1", provisionBody("no-such-service", small)), 400, "BadRequest"},
		{"unknown plan", put("n2", provisionBody(db.ID, "no-such-plan")), 400, "BadRequest"},
		{"plan of another service", put("n3", provisionBody(db.ID, gone.Plans[0].ID)), 400, "BadRequest"},
		{"marked spec", put("n4", provisionBody(gone.ID, gone.Plans[0].ID)), 400, "BadRequest"},
		{"missing service_id", put("n5", `{"plan_id":"`+small+`"}`), 400, "BadRequest"},
		{"missing plan_id", put("n6", `{"service_id":"`+db.ID+`"}`), 400, "BadRequest"},
		{"empty object", put("n7", `{}`), 400, "BadRequest"},
		{"malformed JSON", put("n8", `{"service_id":`), 400, "MalformedJSON"},
		{"not JSON", put("n9", `service_id=x`), 400, "MalformedJSON"},
		{"no body", put("n10", ""), 400, "MalformedJSON"},
		{"two JSON values", put("n11", provisionBody(db.ID, small)+`{}`), 400, "MalformedJSON"},
		{"ids not strings", put("n12", `{"service_id":1,"plan_id":2}`), 400, "MalformedJSON"},
		{"context a list", put("n13", `{"service_id":"`+db.ID+`","plan_id":"`+small+`","context":["kubernetes"]}`), 400, "BadRequest"},
		{"context a string", put("n14", `{"service_id":"`+db.ID+`","plan_id":"`+small+`","context":"kubernetes"}`), 400, "BadRequest"},
		{"context a number", put("n15", `{"service_id":"`+db.ID+`","plan_id":"`+small+`","context":7}`), 400, "BadRequest"},
		{"parameters a list", put("n16", `{"service_id":"`+db.ID+`","plan_id":"`+small+`","parameters":[1]}`), 400, "BadRequest"},
		{"malformed oci_platform", put("n17", `{"service_id":"`+pg.ID+`","plan_id":"`+pg.Plans[0].ID+`","context":{"oci_platform":"amd64"}}`), 400, "BadRequest"},
		{"unsupported oci_platform", put("n18", `{"service_id":"`+pg.ID+`","plan_id":"`+pg.Plans[0].ID+`","context":{"oci_platform":"windows/amd64"}}`), 400, "BadRequest"},
		{"body over the limit", put("n19", tooBig), 413, "PayloadTooLarge"},
		{"existing with another plan", put("existing", provisionBody(db.ID, large)), 409, "Conflict"},
		{"existing with another service", put("existing", provisionBody(pg.ID, pg.Plans[0].ID)), 409, "Conflict"},
		{"instance id with a space", put("bad%20id", provisionBody(db.ID, small)), 400, "BadRequest"},
		{"instance id with a slash", put("bad%2Fid", provisionBody(db.ID, small)), 400, "BadRequest"},
		{"instance id too long", put(strings.Repeat("a", 256), provisionBody(db.ID, small)), 400, "BadRequest"},
		{"fetch unknown", func() *http.Request { return e.request(http.MethodGet, "/v2/service_instances/n20", "") }, 404, "NotFound"},
		{"fetch bad id", func() *http.Request { return e.request(http.MethodGet, "/v2/service_instances/bad%20id", "") }, 400, "BadRequest"},
		{"deprovision unknown", func() *http.Request {
			return e.request(http.MethodDelete, "/v2/service_instances/n21?service_id="+db.ID+"&plan_id="+small, "")
		}, 410, "-"},
		{"deprovision mismatched plan", func() *http.Request {
			return e.request(http.MethodDelete, "/v2/service_instances/existing?service_id="+db.ID+"&plan_id="+large, "")
		}, 400, "BadRequest"},
		{"deprovision without ids", func() *http.Request {
			return e.request(http.MethodDelete, "/v2/service_instances/existing", "")
		}, 400, "BadRequest"},
		{"deprovision bad id", func() *http.Request {
			return e.request(http.MethodDelete, "/v2/service_instances/bad%20id?service_id="+db.ID+"&plan_id="+small, "")
		}, 400, "BadRequest"},
		{"wrong method", func() *http.Request {
			return e.request(http.MethodPost, "/v2/service_instances/n22", provisionBody(db.ID, small))
		}, 405, "MethodNotAllowed"},
		{"unauthenticated", func() *http.Request {
			r := e.request(http.MethodPut, "/v2/service_instances/n23", provisionBody(db.ID, small))
			r.SetBasicAuth(brokerUser, "wrong")
			return r
		}, 401, "Unauthorized"},
		{"old API version", func() *http.Request {
			r := e.request(http.MethodPut, "/v2/service_instances/n24", provisionBody(db.ID, small))
			r.Header.Set("X-Broker-API-Version", "1.0")
			return r
		}, 412, ""},
		{"unknown path", func() *http.Request {
			return e.request(http.MethodPut, "/v2/service_instances/n25/extra", provisionBody(db.ID, small))
		}, 404, "NotFound"},
		{"registries without token", func() *http.Request { return e.request(http.MethodGet, "/registries", "") }, 401, "Unauthorized"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.send(c.req())
			if c.code == "-" {
				wantEmptyObject(t, r, c.status)
				return
			}
			wantOSBError(t, r, c.status, c.code)
		})
	}

	if after := e.dbState(); !reflect.DeepEqual(after, before) {
		for path, at := range after {
			if b, ok := before[path]; !ok || !b.Equal(at) {
				t.Errorf("%s written by a refused request", path)
			}
		}
		for path := range before {
			if _, ok := after[path]; !ok {
				t.Errorf("%s deleted by a refused request", path)
			}
		}
		t.Fatal("refused requests changed the database")
	}
	if got := e.instanceDocs(); !reflect.DeepEqual(got, instancesBefore) {
		t.Fatalf("instances %v, want %v", got, instancesBefore)
	}
	for id, want := range countsBefore {
		if got := e.instanceCount(id); got != want {
			t.Errorf("spec %s instance count %d, want %d", id, got, want)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, time.Minute)
	cases := []struct {
		method, path, allow string
		admin               bool
	}{
		{http.MethodPost, "/v2/catalog", "GET", false},
		{http.MethodPut, "/v2/catalog", "GET", false},
		{http.MethodDelete, "/v2/catalog", "GET", false},
		{http.MethodPost, "/v2/service_instances/i1", "GET, PUT, PATCH, DELETE", false},
		{http.MethodPatch, "/v2/service_instances/i1/last_operation", "GET", false},
		{http.MethodPatch, "/v2/service_instances/i1/service_bindings/b1", "GET, PUT, DELETE", false},
		{http.MethodPost, "/v2/service_instances/i1/service_bindings/b1/last_operation", "GET", false},
		{http.MethodPost, "/registries", "GET", true},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			req := e.request(c.method, c.path, "")
			if c.admin {
				req.Header.Set("Authorization", "Bearer "+adminToken)
			}
			r := e.send(req)
			wantOSBError(t, r, http.StatusMethodNotAllowed, "MethodNotAllowed")
			if got := r.header.Get("Allow"); got != c.allow {
				t.Errorf("Allow %q, want %q", got, c.allow)
			}
		})
	}
}

func TestUnknownPath(t *testing.T) {
	e := newEnv(t, time.Minute)
	for _, p := range []string{"/", "/v2", "/v2/", "/v2/catalogs", "/v2/catalog/x", "/v2/service_instances", "/v2/service_instances/", "/v2/service_instances/a/b", "/v2/service_instances/a/service_bindings", "/v2/service_instances/a/service_bindings/b/c", "/v2/service_instances/a/last_operation/x", "/v3/catalog"} {
		t.Run(p, func(t *testing.T) {
			eb := wantOSBError(t, e.do(http.MethodGet, p, ""), http.StatusNotFound, "NotFound")
			if !strings.Contains(eb.Description, p) {
				t.Errorf("description %q does not name the path", eb.Description)
			}
		})
	}
}

// TestOneAdminRule: every admin endpoint of the catalog function takes
// the admin credential the same two ways, a bearer token or the password
// of basic auth with any user name, and refuses the broker's credentials,
// a wrong token and none alike, with both challenges.
func TestOneAdminRule(t *testing.T) {
	e := newEnv(t, time.Minute)
	for _, path := range []string{"/registries", "/admin/specs", "/admin/instances", "/admin/operations", "/status"} {
		for name, c := range map[string]struct {
			auth func(*http.Request)
			ok   bool
		}{
			"bearer":              {func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+adminToken) }, true},
			"basic password":      {func(r *http.Request) { r.SetBasicAuth("anyone", adminToken) }, true},
			"broker basic":        {func(*http.Request) {}, false},
			"wrong bearer":        {func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+adminToken+"x") }, false},
			"wrong basic":         {func(r *http.Request) { r.SetBasicAuth("anyone", adminToken+"x") }, false},
			"token as basic user": {func(r *http.Request) { r.SetBasicAuth(adminToken, "") }, false},
			"none":                {func(r *http.Request) { r.Header.Del("Authorization") }, false},
		} {
			t.Run(path+"/"+name, func(t *testing.T) {
				req := e.request(http.MethodGet, path, "")
				c.auth(req)
				r := e.send(req)
				if c.ok {
					if r.status != http.StatusOK {
						t.Fatalf("%d %s, want 200", r.status, r.body)
					}
					return
				}
				wantOSBError(t, r, http.StatusUnauthorized, "Unauthorized")
				wantAdminChallenges(t, r)
			})
		}
	}
}

// wantAdminChallenges: a refused admin request names both ways in.
func wantAdminChallenges(t *testing.T, r response) {
	t.Helper()
	got := strings.Join(r.header.Values("WWW-Authenticate"), ", ")
	if !strings.Contains(got, `Basic realm="specsync-admin"`) || !strings.Contains(got, `Bearer realm="specsync-admin"`) {
		t.Errorf("WWW-Authenticate %q, want a Basic and a Bearer challenge", got)
	}
}

func TestRegistriesEndpoint(t *testing.T) {
	e := newEnv(t, time.Minute)

	// Broker credentials are not admin credentials, nor is a wrong token.
	for name, auth := range map[string]func(*http.Request){
		"none":         func(r *http.Request) { r.Header.Del("Authorization") },
		"broker basic": func(*http.Request) {},
		"wrong token":  func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+adminToken+"x") },
		"empty token":  func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") },
		"no scheme":    func(r *http.Request) { r.Header.Set("Authorization", adminToken) },
	} {
		t.Run(name, func(t *testing.T) {
			req := e.request(http.MethodGet, "/registries", "")
			auth(req)
			r := e.send(req)
			wantOSBError(t, r, http.StatusUnauthorized, "Unauthorized")
			wantAdminChallenges(t, r)
		})
	}

	get := func() map[string][]store.RegistryStatus {
		t.Helper()
		req := e.request(http.MethodGet, "/registries", "")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		r := e.send(req)
		if r.status != http.StatusOK {
			t.Fatalf("GET /registries: %d %s", r.status, r.body)
		}
		// Decoded into a map first to see a null where a list belongs.
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &raw); err != nil {
			t.Fatal(err)
		}
		if string(raw["registries"]) == "null" || raw["registries"] == nil {
			t.Fatalf("registries is not a list: %s", r.body)
		}
		var out map[string][]store.RegistryStatus
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := get()["registries"]; len(got) != 0 {
		t.Fatalf("no runs yet, statuses %+v", got)
	}

	finished := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	runs := map[string]store.Run{
		"zeta": {ID: "run-z", Result: "fetch_failed", Error: "registry zeta: 503 Service Unavailable", FinishedAt: finished},
		"alpha": {ID: "run-a", Result: "succeeded", FinishedAt: finished,
			Counts: store.RunCounts{Created: 2, Marked: 1, Kept: 1},
			Kept:   []store.KeptSpec{{SpecID: "s-kept", Name: "kept", Instances: 3}}},
	}
	for name, run := range runs {
		if err := e.st.RecordRun(e.ctx, name, run, run.Result == "succeeded", "sha256:abc", "", run.Counts.Marked); err != nil {
			t.Fatal(err)
		}
	}
	got := get()["registries"]
	if len(got) != 2 || got[0].Name != "alpha" || got[1].Name != "zeta" {
		t.Fatalf("statuses %+v, want alpha and zeta in name order", got)
	}
	a, z := got[0], got[1]
	if a.LastRun.Result != "succeeded" || a.LastRun.Counts.Created != 2 || a.Marked != 1 || a.ListingDigest != "sha256:abc" {
		t.Errorf("alpha status %+v", a)
	}
	if len(a.LastRun.Kept) != 1 || a.LastRun.Kept[0] != (store.KeptSpec{SpecID: "s-kept", Name: "kept", Instances: 3}) {
		t.Errorf("alpha kept %+v, want the kept spec with its instance count", a.LastRun.Kept)
	}
	if z.LastRun.Result != "fetch_failed" || z.LastRun.Error == "" || z.ListingDigest != "" {
		t.Errorf("zeta status %+v: a failed run must not set a baseline", z)
	}
}

// TestConcurrentProvisionAndDelete races provisions of one spec against
// marking and deleting it. Whatever the interleaving, an instance record
// never outlives its spec, and a 201 is never a lie.
func TestConcurrentProvisionAndDelete(t *testing.T) {
	// Kept small: the emulator serialises conflicting transactions with
	// locks and times them out under heavy contention.
	const n = 5
	// The last round marks before the race, so only the delete competes
	// with the provisions: that is the interleaving in which it must win.
	for round, premarked := range []bool{false, false, false, true} {
		e := newEnv(t, time.Minute)
		victim := parseSpec(t, specYAML("victim"))
		e.seed(victim)
		if premarked {
			e.mark(victim.ID, "run-1")
		}

		start := make(chan struct{})
		var wg sync.WaitGroup
		statuses := make([]int, n)
		bodies := make([]string, n)
		errs := make([]error, n)
		for i := range n {
			req := e.request(http.MethodPut, "/v2/service_instances/"+instName(i), provisionBody(victim.ID, victim.Plans[i%2].ID))
			wg.Go(func() {
				<-start
				r, err := e.try(req)
				statuses[i], bodies[i], errs[i] = r.status, string(r.body), err
			})
		}
		var outcome store.DeleteOutcome
		var markErr, delErr error
		wg.Go(func() {
			<-start
			if !premarked {
				_, markErr = e.st.MarkSpec(e.ctx, testReg, victim.ID, "run-1")
			}
			if markErr == nil {
				outcome, _, delErr = e.st.DeleteMarked(e.ctx, testReg, victim.ID, "run-2", time.Now())
			}
		})
		close(start)
		wg.Wait()
		if markErr != nil || delErr != nil {
			t.Fatalf("round %d: mark %v, delete %v", round, markErr, delErr)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}

		docs := e.instanceDocs()
		rec, specErr := e.st.GetSpec(e.ctx, victim.ID)
		created := 0
		for i, st := range statuses {
			switch st {
			case http.StatusCreated:
				created++
				inst, ok := docs[instName(i)]
				if !ok || inst.SpecID != victim.ID {
					t.Fatalf("round %d: PUT %s answered 201 but the record is %+v (present %v)", round, instName(i), inst, ok)
				}
			case http.StatusBadRequest:
				// Marked or deleted before this provision committed.
				if _, ok := docs[instName(i)]; ok {
					t.Fatalf("round %d: PUT %s refused (%s) but recorded", round, instName(i), bodies[i])
				}
			default:
				t.Fatalf("round %d: PUT %s: %d %s", round, instName(i), st, bodies[i])
			}
		}
		for id, inst := range docs {
			if _, err := e.st.GetSpec(e.ctx, inst.SpecID); err != nil {
				t.Fatalf("round %d: instance %s outlives its spec %s: %v", round, id, inst.SpecID, err)
			}
		}
		switch outcome {
		case store.Deleted:
			if specErr == nil || len(docs) != 0 {
				t.Fatalf("round %d: delete reported, spec read %v, %d instances", round, specErr, len(docs))
			}
		case store.Referenced:
			if specErr != nil || created == 0 {
				t.Fatalf("round %d: kept as referenced, spec read %v, %d created", round, specErr, created)
			}
			if rec.Instances != int64(len(docs)) {
				t.Fatalf("round %d: spec counts %d instances, %d records exist", round, rec.Instances, len(docs))
			}
		default:
			t.Fatalf("round %d: delete outcome %q", round, outcome)
		}
		if premarked && (created != 0 || outcome != store.Deleted) {
			t.Fatalf("round %d: spec marked before the race: %d created, delete %s", round, created, outcome)
		}
		t.Logf("round %d: %d of %d provisions created, delete %s", round, created, n, outcome)
	}
}

func instName(i int) string { return "race-" + string(rune('a'+i)) }
