package osb_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/spec"
)

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
		{"context a list", put("n13", `{"service_id":"`+db.ID+`","plan_id":"`+small+`",`+guids+`,"context":["kubernetes"]}`), 400, "BadRequest"},
		{"context a string", put("n14", `{"service_id":"`+db.ID+`","plan_id":"`+small+`",`+guids+`,"context":"kubernetes"}`), 400, "BadRequest"},
		{"context a number", put("n15", `{"service_id":"`+db.ID+`","plan_id":"`+small+`",`+guids+`,"context":7}`), 400, "BadRequest"},
		{"parameters a list", put("n16", `{"service_id":"`+db.ID+`","plan_id":"`+small+`",`+guids+`,"parameters":[1]}`), 400, "BadRequest"},
		{"malformed oci_platform", put("n17", `{"service_id":"`+pg.ID+`","plan_id":"`+pg.Plans[0].ID+`",`+guids+`,"context":{"oci_platform":"amd64"}}`), 400, "BadRequest"},
		{"unsupported oci_platform", put("n18", `{"service_id":"`+pg.ID+`","plan_id":"`+pg.Plans[0].ID+`",`+guids+`,"context":{"oci_platform":"windows/amd64"}}`), 400, "BadRequest"},
		{"body over the limit", put("n19", tooBig), 413, "PayloadTooLarge"},
		{"no organization_guid nor space_guid", put("n26", `{"service_id":"`+db.ID+`","plan_id":"`+small+`","context":{"platform":"cloudfoundry"}}`), 400, "BadRequest"},
		{"empty space_guid", put("n27", `{"service_id":"`+db.ID+`","plan_id":"`+small+`","organization_guid":"o","space_guid":""}`), 400, "BadRequest"},
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
