package functions_test

// End-to-end tests: each starts the local stack (`specsync-local run`) as its own
// process with its own project, so bootstrap publishes to the Pub/Sub
// emulator, the emulator pushes to the reconcile function through
// functions-framework-go, and the catalog reads the Firestore emulator —
// the production wiring, over real HTTP.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/specsync/specsync/pkg/api"
)

// A bootstrap with a failing registry keeps that registry's specs in the
// catalog, and the operation says which registry failed.
func TestE2EFailingRegistryKeepsItsSpecs(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t, "alpha", "beta")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))

	op := s.bootstrap()
	if op.State != api.Succeeded {
		t.Fatalf("first bootstrap: %+v", op)
	}
	if c, _ := s.catalog(); names(c) != "alpha,beta,gamma" {
		t.Fatalf("catalog %s", names(c))
	}
	a.set(true)
	op = s.bootstrap()
	if op.State != api.Failed || !strings.Contains(op.Description, "team-a") || strings.Contains(op.Description, "team-b") {
		t.Fatalf("bootstrap with team-a down: %+v", op)
	}
	if r := op.result(t, "team-a"); r.Result != api.ResultFetchFailed || !strings.Contains(r.Error, "502") {
		t.Fatalf("team-a result %+v", r)
	}
	if c, _ := s.catalog(); names(c) != "alpha,beta,gamma" {
		t.Fatalf("after an outage the catalog is %s", names(c))
	}
}

// A spec removed upstream leaves the catalog at once, is deleted by a
// later bootstrap, but not while an instance of it exists.
func TestE2ERemovedSpecLifecycle(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t, "alpha", "beta", "delta")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))
	s.bootstrap()
	c, _ := s.catalog()
	var betaID, betaPlan string
	for _, svc := range c.Services {
		if svc.Name == "beta" {
			betaID, betaPlan = svc.ID, svc.Plans[0].ID
		}
	}
	put := s.do(http.MethodPut, "/v2/service_instances/inst-1", "broker",
		strings.NewReader(fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1","context":{"platform":"kubernetes"}}`, betaID, betaPlan)))
	if put.status != http.StatusCreated {
		t.Fatalf("provision: %d %s", put.status, put.body)
	}

	a.set(false, "alpha", "delta")
	s.bootstrap()
	if c, _ := s.catalog(); names(c) != "alpha,delta,gamma" {
		t.Fatalf("a removed spec must leave the catalog at once: %s", names(c))
	}
	op := s.bootstrap()
	if r := op.result(t, "team-a"); r.Counts.Kept != 1 || r.Counts.Deleted != 0 {
		t.Fatalf("pinned spec: %+v", r)
	}
	regs := s.do(http.MethodGet, "/registries", "admin", nil)
	if regs.status != http.StatusOK || !strings.Contains(string(regs.body), `"instances":1`) {
		t.Fatalf("/registries does not show the kept spec and its instance: %d %s", regs.status, regs.body)
	}
	del := s.do(http.MethodDelete, "/v2/service_instances/inst-1?service_id="+betaID+"&plan_id="+betaPlan, "broker", nil)
	if del.status != http.StatusOK {
		t.Fatalf("deprovision: %d %s", del.status, del.body)
	}
	op = s.bootstrap()
	if r := op.result(t, "team-a"); r.Counts.Deleted != 1 {
		t.Fatalf("unpinned spec not deleted: %+v", r)
	}
}

// Concurrent bootstraps coalesce onto one operation; a bootstrap of an
// unchanged world writes nothing and keeps the catalog's ETag.
func TestE2ECoalesceAndETag(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t, "alpha")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))

	// Held, team-a keeps the operation in progress until every request has
	// been answered, so "concurrent" does not depend on the scheduler.
	release := a.hold()
	var wg sync.WaitGroup
	ids := make([]string, 3)
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := s.do(http.MethodPost, "/bootstrap", "admin", nil)
			var start struct{ Operation string }
			if r.status == http.StatusAccepted {
				_ = json.Unmarshal(r.body, &start)
			}
			ids[i] = start.Operation
		}(i)
	}
	wg.Wait()
	release()
	if ids[0] == "" || ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("concurrent bootstraps did not coalesce: %v", ids)
	}
	s.poll(ids[0])

	_, etag := s.catalog()
	if etag == "" {
		t.Fatal("catalog without ETag")
	}
	if r := s.do(http.MethodGet, "/v2/catalog", "broker", nil, "If-None-Match", etag); r.status != http.StatusNotModified {
		t.Fatalf("If-None-Match with the current ETag: %d", r.status)
	}
	op := s.bootstrap()
	if r := op.result(t, "team-a"); r.Result != api.ResultUnchanged {
		t.Fatalf("unchanged world: %+v", r)
	}
	if _, again := s.catalog(); again != etag {
		t.Fatalf("ETag moved without a change: %s -> %s", etag, again)
	}
	a.set(false, "alpha", "omega")
	// A dry run forecasts the change and changes nothing.
	dry := s.bootstrapAt("/bootstrap?dry_run=true")
	if r := dry.result(t, "team-a"); dry.State != api.Succeeded || r.Result != api.ResultDryRun || r.Counts.Created != 1 {
		t.Fatalf("dry run: %+v %+v", dry, r)
	}
	if c, again := s.catalog(); again != etag || strings.Contains(names(c), "omega") {
		t.Fatalf("a dry run changed the catalog: %s %s", again, names(c))
	}
	s.bootstrap()
	c, changed := s.catalog()
	if changed == etag || !strings.Contains(names(c), "omega") {
		t.Fatalf("ETag %s after a change (was %s), catalog %s", changed, etag, names(c))
	}
}

// Bad input: every status code docs/api.md#endpoints promises, with OSB
// error bodies.
func TestE2EBadInput(t *testing.T) {
	t.Parallel()
	_, urlA := newIndex(t, "alpha")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))
	s.bootstrap()
	c, _ := s.catalog()
	svc := c.Services[0]
	good := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1"}`, svc.ID, svc.Plans[0].ID)

	cases := []struct {
		name, method, path, auth, body string
		headers                        []string
		status                         int
	}{
		{"catalog without auth", "GET", "/v2/catalog", "", "", nil, 401},
		{"catalog wrong version", "GET", "/v2/catalog", "broker", "", []string{"X-Broker-API-Version", "1.0"}, 412},
		{"catalog wrong method", "POST", "/v2/catalog", "broker", "", nil, 405},
		{"unknown path", "GET", "/v2/nothing", "broker", "", nil, 404},
		{"bootstrap without token", "POST", "/bootstrap", "", "", nil, 401},
		{"bootstrap wrong token", "POST", "/bootstrap", "", "", []string{"Authorization", "Bearer nope"}, 401},
		{"bootstrap bad dry_run", "POST", "/bootstrap?dry_run=maybe", "admin", "", nil, 400},
		{"bootstrap unknown parameter", "POST", "/bootstrap?force=1", "admin", "", nil, 400},
		{"bootstrap wrong method", "GET", "/bootstrap", "admin", "", nil, 405},
		{"last_operation without id", "GET", "/bootstrap/last_operation", "admin", "", nil, 400},
		{"last_operation unknown", "GET", "/bootstrap/last_operation?operation=nope", "admin", "", nil, 404},
		{"registries without token", "GET", "/registries", "", "", nil, 401},
		{"provision malformed JSON", "PUT", "/v2/service_instances/i1", "broker", "{nope", nil, 400},
		{"provision too big", "PUT", "/v2/service_instances/i1", "broker", `{"x":"` + strings.Repeat("a", 70<<10) + `"}`, nil, 413},
		{"provision unknown service", "PUT", "/v2/service_instances/i1", "broker", `{"service_id":"nope","plan_id":"nope"}`, nil, 400},
		{"provision unknown plan", "PUT", "/v2/service_instances/i1", "broker", fmt.Sprintf(`{"service_id":%q,"plan_id":"nope"}`, svc.ID), nil, 400},
		{"provision missing ids", "PUT", "/v2/service_instances/i1", "broker", `{}`, nil, 400},
		{"get unknown instance", "GET", "/v2/service_instances/i1", "broker", "", nil, 404},
		{"delete unknown instance", "DELETE", "/v2/service_instances/i1?service_id=a&plan_id=b", "broker", "", nil, 410},
		{"delete without ids", "DELETE", "/v2/service_instances/i1", "broker", "", nil, 400},
		{"instance wrong method", "POST", "/v2/service_instances/i1", "broker", "", nil, 405},
		{"update unknown instance", "PATCH", "/v2/service_instances/i1", "broker", `{"service_id":"nope"}`, nil, 400},
		{"bind unknown instance", "PUT", "/v2/service_instances/i1/service_bindings/b1", "broker", `{"service_id":"a","plan_id":"b"}`, nil, 400},
		{"unbind unknown", "DELETE", "/v2/service_instances/i1/service_bindings/b1?service_id=a&plan_id=b", "broker", "", nil, 410},
		{"last_operation unknown instance", "GET", "/v2/service_instances/i1/last_operation", "broker", "", nil, 404},
		{"bootstrap too big", "POST", "/bootstrap", "admin", strings.Repeat("x", 70<<10), nil, 413},
	}
	for _, c := range cases {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		r := s.do(c.method, c.path, c.auth, body, c.headers...)
		if r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
			continue
		}
		if r.status >= 400 && r.status != 410 {
			var e struct{ Description string }
			if err := json.Unmarshal(r.body, &e); err != nil || e.Description == "" {
				t.Errorf("%s: body %q is not an OSB error", c.name, r.body)
			}
		}
		if c.status == 401 && r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", c.name)
		}
	}
	// Nothing was written by any of that: a real provision is still new.
	if r := s.do("PUT", "/v2/service_instances/i1", "broker", strings.NewReader(good)); r.status != 201 {
		t.Fatalf("provision after the bad requests: %d %s", r.status, r.body)
	}
	if r := s.do("PUT", "/v2/service_instances/i1", "broker", strings.NewReader(good)); r.status != 200 {
		t.Fatalf("identical provision: %d", r.status)
	}
	conflicting := fmt.Sprintf(`{"service_id":%q,"plan_id":"other-plan","organization_guid":"org-1","space_guid":"space-1"}`, svc.ID)
	if r := s.do("PUT", "/v2/service_instances/i1", "broker", strings.NewReader(conflicting)); r.status != 409 {
		t.Fatalf("conflicting provision: %d %s", r.status, r.body)
	}
	if r := s.do("GET", "/v2/service_instances/i1", "broker", nil, "X-Broker-API-Request-Identity", "req-42"); r.status != 200 || r.header.Get("X-Broker-API-Request-Identity") != "req-42" {
		t.Fatalf("get instance: %d, identity %q", r.status, r.header.Get("X-Broker-API-Request-Identity"))
	}
}
