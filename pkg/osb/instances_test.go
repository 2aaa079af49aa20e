package osb_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

func patchBody(serviceID, planID, extra string) string {
	b := fmt.Sprintf(`{"service_id":%q`, serviceID)
	if planID != "" {
		b += fmt.Sprintf(`,"plan_id":%q`, planID)
	}
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

// patch sends a PATCH and checks the answer against the OSB OpenAPI file.
func (e *env) patch(id, body string) response {
	e.t.Helper()
	r := e.do(http.MethodPatch, "/v2/service_instances/"+id, body)
	wantOSBResponse(e.t, http.MethodPatch, instancePath, r)
	return r
}

// lastOp polls an instance's last_operation, checked against the OSB file.
func (e *env) lastOp(id, query string) response {
	e.t.Helper()
	r := e.do(http.MethodGet, "/v2/service_instances/"+id+"/last_operation"+query, "")
	wantOSBResponse(e.t, http.MethodGet, instanceLastOp, r)
	return r
}

func (e *env) specRecord(id string) *store.SpecRecord {
	e.t.Helper()
	rec, err := e.st.GetSpec(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// wantUpdateError checks a refused PATCH: its code, and OSB's hints that
// the instance is still usable and whether repeating can help.
func wantUpdateError(t *testing.T, r response, status int, code string, repeatable bool) {
	t.Helper()
	eb := wantOSBError(t, r, status, code)
	if eb.InstanceUsable == nil || !*eb.InstanceUsable || eb.UpdateRepeatable == nil || *eb.UpdateRepeatable != repeatable {
		t.Errorf("refused update %s: instance_usable %v update_repeatable %v, want true and %v", r.body, eb.InstanceUsable, eb.UpdateRepeatable, repeatable)
	}
}

func TestUpdateInstance(t *testing.T) {
	e, db := newDBEnv(t)
	small, large := db.Plans[0].ID, db.Plans[1].ID
	e.provision("u1", db.ID, small)

	// small updates_to large: the plan moves, and so does the spec's
	// per-plan pin.
	r := e.patch("u1", patchBody(db.ID, large, `"previous_values":{"plan_id":"`+small+`","service_id":"`+db.ID+`"},"parameters":{"size_gb":3}`))
	wantEmptyObject(t, r, http.StatusOK)
	if inst := e.instanceDocs()["u1"]; inst.PlanID != large || inst.PreviousPlanID != small {
		t.Fatalf("after the plan change the record is %+v", inst)
	}
	if rec := e.specRecord(db.ID); rec.Instances != 1 || rec.PlanInstances[small] != 0 || rec.PlanInstances[large] != 1 {
		t.Fatalf("pins after the plan change: %d %v", rec.Instances, rec.PlanInstances)
	}
	// The platform repeats it (a timeout): 200, nothing written.
	before := e.dbState()
	wantEmptyObject(t, e.patch("u1", patchBody(db.ID, large, `"previous_values":{"plan_id":"`+small+`"}`)), http.StatusOK)
	// A parameters-only update has no effect on the bookkeeping: 200.
	wantEmptyObject(t, e.patch("u1", patchBody(db.ID, "", `"parameters":{"size_gb":5}`)), http.StatusOK)
	if !reflect.DeepEqual(e.dbState(), before) {
		t.Fatal("an update without effect wrote")
	}

	// large has no updates_to while small has: the catalog says
	// plan_updateable false for it, and the change is not supported.
	wantUpdateError(t, e.patch("u1", patchBody(db.ID, small, "")), http.StatusUnprocessableEntity, "PlanChangeNotSupported", false)
	wantUpdateError(t, e.patch("u1", patchBody(db.ID, "no-such-plan", "")), http.StatusBadRequest, "BadRequest", false)

	// maintenance_info: the current version is accepted (and recorded),
	// another one is OSB's MaintenanceInfoConflict.
	wantEmptyObject(t, e.patch("u1", patchBody(db.ID, "", `"maintenance_info":{"version":"1.0.0"}`)), http.StatusOK)
	wantUpdateError(t, e.patch("u1", patchBody(db.ID, "", `"maintenance_info":{"version":"2.0.0"}`)), http.StatusUnprocessableEntity, "MaintenanceInfoConflict", false)

	// A new version of the spec is adopted: instances stay on 1.0.0 until
	// the platform upgrades them with the catalog's version.
	db2 := parseSpec(t, strings.Replace(specYAML("db"), "The db service", "The db service, version two", 1))
	if res, err := e.st.UpsertSpec(e.ctx, store.Offer{Registry: testReg, Entry: "db", Ref: "registry.test/db:2", Spec: db2, Digest: spec.Digest(db2), Run: "run-2"}); err != nil || res.Outcome != store.Updated {
		t.Fatalf("adopt version two: %+v %v", res, err)
	}
	e.commit()
	wantUpdateError(t, e.patch("u1", patchBody(db.ID, "", `"maintenance_info":{"version":"1.0.0"}`)), http.StatusUnprocessableEntity, "MaintenanceInfoConflict", false)
	r = e.do(http.MethodGet, "/v2/service_instances/u1", "")
	if !strings.Contains(string(r.body), `"maintenance_info":{"version":"1.0.0"}`) {
		t.Fatalf("before the upgrade GET says %s", r.body)
	}
	wantEmptyObject(t, e.patch("u1", patchBody(db.ID, "", `"maintenance_info":{"version":"2.0.0"},"previous_values":{"maintenance_info":{"version":"1.0.0"}}`)), http.StatusOK)
	r = e.do(http.MethodGet, "/v2/service_instances/u1", "")
	wantOSBResponse(t, http.MethodGet, instancePath, r)
	if !strings.Contains(string(r.body), `"maintenance_info":{"version":"2.0.0"}`) {
		t.Fatalf("after the upgrade GET says %s", r.body)
	}

	// A context update (allow_context_updates) replaces the context.
	wantEmptyObject(t, e.patch("u1", patchBody(db.ID, "", `"context":{"platform":"cloudfoundry","instance_name":"renamed"}`)), http.StatusOK)
	if got := e.instanceDocs()["u1"].Context; got["instance_name"] != "renamed" || got["platform"] != "cloudfoundry" {
		t.Fatalf("context after the update: %v", got)
	}

	// Marked for deletion: no plan change (the plan is not in the catalog
	// any more), but a context update still goes through.
	e.provision("u2", db.ID, small)
	e.mark(db.ID, "run-3")
	wantUpdateError(t, e.patch("u2", patchBody(db.ID, large, "")), http.StatusBadRequest, "BadRequest", false)
	wantEmptyObject(t, e.patch("u2", patchBody(db.ID, "", `"context":{"platform":"kubernetes","namespace":"moved"}`)), http.StatusOK)
	if rec := e.specRecord(db.ID); rec.PlanInstances[small] != 1 || rec.PlanInstances[large] != 1 {
		t.Fatalf("pins after the refused change on a marked spec: %v", rec.PlanInstances)
	}
	invariant.Require(t, e.client, invariant.Options{Canaries: []string{brokerPass, adminToken, "correct horse battery"}})
}

// The two plan-change refusals, both OSB's 422 for "the requested change
// is not supported". A plan that is not plan_updateable is in the catalog
// as such, but a client that drops the plan-level field reads the
// service-level true and asks. A plan that is updateable but does not
// list the plan asked for in updates_to looks updateable in the catalog
// (OSB cannot express updates_to). Neither writes anything, neither is
// worth repeating, and both bodies are what the OSB OpenAPI file allows
// (e.patch checks).
func TestPlanChangeRefusals(t *testing.T) {
	e := newEnv(t, time.Minute)
	db := parseSpec(t, specYAML("db")+"  - name: tiny\n    description: One tiny node\n")
	e.seed(db)
	small, large, tiny := db.Plans[0].ID, db.Plans[1].ID, db.Plans[2].ID
	c, _ := e.catalog()
	if svc := c.Services[0]; !svc.PlanUpdateable {
		t.Fatalf("the catalog says db is not plan_updateable: %+v", svc)
	}
	e.provision("pc", db.ID, small)
	before := e.dbState()

	// small updates_to [large]: tiny is not among them.
	r := e.patch("pc", patchBody(db.ID, tiny, `"previous_values":{"plan_id":"`+small+`"}`))
	wantUpdateError(t, r, http.StatusUnprocessableEntity, "PlanChangeNotSupported", false)
	eb := wantOSBError(t, r, http.StatusUnprocessableEntity, "PlanChangeNotSupported")
	for _, want := range []string{"updates only to large, not to tiny", "ask for one of those"} {
		if !strings.Contains(eb.Description, want) {
			t.Errorf("422 description %q does not say %q", eb.Description, want)
		}
	}
	if !reflect.DeepEqual(e.dbState(), before) {
		t.Fatal("a plan change refused by updates_to wrote")
	}

	// large has neither updates_to nor plan_updateable: the catalog says
	// plan_updateable false for it (the service says true).
	wantEmptyObject(t, e.patch("pc", patchBody(db.ID, large, "")), http.StatusOK)
	before = e.dbState()
	for _, to := range []string{small, tiny} {
		r = e.patch("pc", patchBody(db.ID, to, ""))
		wantUpdateError(t, r, http.StatusUnprocessableEntity, "PlanChangeNotSupported", false)
		if eb := wantOSBError(t, r, http.StatusUnprocessableEntity, ""); !strings.Contains(eb.Description, "not plan_updateable") {
			t.Errorf("422 description %q", eb.Description)
		}
	}
	if !reflect.DeepEqual(e.dbState(), before) {
		t.Fatal("a refused change of a plan that is not updateable wrote")
	}
	var largePlan *catalog.Plan
	c, _ = e.catalog()
	for i, p := range c.Services[0].Plans {
		if p.ID == large {
			largePlan = &c.Services[0].Plans[i]
		}
	}
	if largePlan == nil || largePlan.PlanUpdateable == nil || *largePlan.PlanUpdateable {
		t.Fatalf("the catalog does not say large is not plan_updateable: %+v", largePlan)
	}
}

// Refused updates: each is the OSB status with an OSB body, and none
// writes anything.
func TestBadUpdatesWriteNothing(t *testing.T) {
	e := newEnv(t, time.Minute)
	db := parseSpec(t, specYAML("db"))
	pg := parseSpec(t, specYAML("pg"))
	pg.Platforms = []spec.Platform{{OS: "linux", Architecture: "amd64"}}
	e.seed(db, pg)
	small := db.Plans[0].ID
	e.provision("u1", db.ID, small)
	e.provision("p1", pg.ID, pg.Plans[0].ID)
	before := e.dbState()
	cases := []struct {
		name, id, body string
		status         int
		code           string
	}{
		{"unknown instance", "nope", patchBody(db.ID, small, ""), 400, "InstanceNotFound"},
		{"no service_id", "u1", `{"plan_id":"` + small + `"}`, 400, "BadRequest"},
		{"another service", "u1", patchBody(pg.ID, "", ""), 400, "BadRequest"},
		{"previous service differs", "u1", patchBody(db.ID, "", `"previous_values":{"service_id":"`+pg.ID+`"}`), 400, "BadRequest"},
		{"previous plan stale", "u1", patchBody(db.ID, db.Plans[1].ID, `"previous_values":{"plan_id":"other"}`), 400, "BadRequest"},
		{"maintenance_info without version", "u1", patchBody(db.ID, "", `"maintenance_info":{}`), 400, "BadRequest"},
		{"context a list", "u1", patchBody(db.ID, "", `"context":[1]`), 400, "BadRequest"},
		{"parameters a string", "u1", patchBody(db.ID, "", `"parameters":"x"`), 400, "BadRequest"},
		{"malformed oci_platform", "p1", patchBody(pg.ID, "", `"context":{"oci_platform":"amd64"}`), 400, "BadRequest"},
		{"unsupported oci_platform", "p1", patchBody(pg.ID, "", `"context":{"oci_platform":"linux/s390x"}`), 400, "BadRequest"},
		{"malformed JSON", "u1", `{"service_id":`, 400, "MalformedJSON"},
		{"bad instance id", "bad%20id", patchBody(db.ID, "", ""), 400, "BadRequest"},
		{"over the limit", "u1", patchBody(db.ID, "", `"context":{"x":"`+strings.Repeat("x", testMaxBody)+`"}`), 413, "PayloadTooLarge"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(http.MethodPatch, "/v2/service_instances/"+c.id, c.body)
			eb := wantOSBError(t, r, c.status, c.code)
			if c.status != http.StatusRequestEntityTooLarge { // OSB declares no 413
				wantOSBResponse(t, http.MethodPatch, instancePath, r)
			}
			// instance_usable describes an instance: where there is
			// none, the field is left out.
			if c.code == "InstanceNotFound" && (eb.InstanceUsable != nil || eb.UpdateRepeatable == nil || *eb.UpdateRepeatable) {
				t.Errorf("PATCH of an unknown instance: %s, want no instance_usable and update_repeatable false", r.body)
			}
		})
	}
	if !reflect.DeepEqual(e.dbState(), before) {
		t.Fatal("refused updates changed the database")
	}
}

func TestInstanceLastOperation(t *testing.T) {
	e, db := newDBEnv(t)
	small, large := db.Plans[0].ID, db.Plans[1].ID
	wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/lo1?accepts_incomplete=true", provisionBody(db.ID, small)), http.StatusCreated)

	state := func(r response) (api.OperationState, string) {
		t.Helper()
		var lo api.OSBLastOperation
		if err := json.Unmarshal(r.body, &lo); err != nil {
			t.Fatal(err)
		}
		return lo.State, lo.Description
	}
	r := e.lastOp("lo1", "?service_id="+db.ID+"&plan_id="+small)
	if st, desc := state(r); r.status != http.StatusOK || st != api.Succeeded || !strings.Contains(desc, "provisioned") {
		t.Fatalf("after a provision: %d %s", r.status, r.body)
	}
	wantEmptyObject(t, e.patch("lo1?accepts_incomplete=true", patchBody(db.ID, large, "")), http.StatusOK)
	// OSB: polling after a plan change names the plan before it.
	for _, q := range []string{"", "?plan_id=" + small, "?plan_id=" + large, "?service_id=" + db.ID} {
		r = e.lastOp("lo1", q)
		if st, desc := state(r); r.status != http.StatusOK || st != api.Succeeded || !strings.Contains(desc, "updated") {
			t.Fatalf("after an update, %q: %d %s", q, r.status, r.body)
		}
	}
	wantOSBError(t, e.lastOp("lo1", "?service_id=other"), http.StatusBadRequest, "BadRequest")
	wantOSBError(t, e.lastOp("lo1", "?plan_id=other"), http.StatusBadRequest, "BadRequest")
	// This broker never hands out an operation id, so one is not ours.
	wantOSBError(t, e.lastOp("lo1", "?operation=task_10"), http.StatusBadRequest, "BadRequest")
	// Never provisioned: 404; deprovisioned: 410, what a platform polling a
	// delete takes as success.
	wantOSBError(t, e.lastOp("never", ""), http.StatusNotFound, "NotFound")
	wantEmptyObject(t, e.do(http.MethodDelete, "/v2/service_instances/lo1?accepts_incomplete=true&service_id="+db.ID+"&plan_id="+large, ""), http.StatusOK)
	eb := wantOSBError(t, e.lastOp("lo1", "?service_id="+db.ID+"&plan_id="+large), http.StatusGone, "Gone")
	if !strings.Contains(eb.Description, "deprovisioned") {
		t.Errorf("410 description %q", eb.Description)
	}
	// Provisioned again under the same id, it is there again.
	e.provision("lo1", db.ID, small)
	if r := e.lastOp("lo1", ""); r.status != http.StatusOK {
		t.Fatalf("re-provisioned: %d %s", r.status, r.body)
	}
}

// A Content-Length over the limit is refused before a byte of the body is
// read; a body without one is read up to the limit and no further, and
// is 413 whatever it holds (4 MiB of garbage is not a 400).
func TestDecodeBodyLimit(t *testing.T) {
	const limit = 1 << 10
	t.Run("content-length over the limit is not read", func(t *testing.T) {
		body := &countingReader{r: strings.NewReader(`{}`)}
		r := httptest.NewRequest(http.MethodPut, "/v2/service_instances/x", body)
		r.ContentLength = 4 << 20
		w := httptest.NewRecorder()
		var v map[string]any
		if web.DecodeBody(w, r, limit, &v) || w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if body.n != 0 {
			t.Fatalf("%d bytes of the body were read", body.n)
		}
	})
	t.Run("chunked garbage is read to the limit only", func(t *testing.T) {
		body := &countingReader{r: bytes.NewReader(bytes.Repeat([]byte("not json "), (4<<20)/9))}
		r := httptest.NewRequest(http.MethodPut, "/v2/service_instances/x", body)
		r.ContentLength = -1
		w := httptest.NewRecorder()
		var v map[string]any
		if web.DecodeBody(w, r, limit, &v) || w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		// io.ReadAll reads in chunks of at most 512 bytes more than it has.
		if body.n > limit+1+512 {
			t.Fatalf("%d bytes read for a limit of %d", body.n, limit)
		}
	})
	t.Run("the whole surface refuses unread", func(t *testing.T) {
		body := &countingReader{r: strings.NewReader(`{}`)}
		h := web.LimitBody(limit, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			t.Error("the handler ran for a body over the limit")
		}))
		r := httptest.NewRequest(http.MethodPost, "/bootstrap", body)
		r.ContentLength = limit + 1
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge || body.n != 0 {
			t.Fatalf("%d after reading %d bytes", w.Code, body.n)
		}
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
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
	body := `{"service_id":"` + db.ID + `","plan_id":"` + db.Plans[0].ID + `",` + guids + `,"context":{"platform":"kubernetes","note":"` + pad + `"}}`
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
		return `{"service_id":"` + pg.ID + `","plan_id":"` + pg.Plans[0].ID + `",` + guids + `,"context":{"platform":"kubernetes","oci_platform":"` + p + `"}}`
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
		// The commit that follows a run's marks and deletes: each round's
		// project ends settled, for its end check.
		e.commit()

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

// OSB v2.17 requires organization_guid and space_guid on a provision,
// each "a non-empty string": missing, empty or null is a 400 the OSB
// OpenAPI file allows, and nothing is written, a retry of a created
// instance included. With both, the context is recorded exactly as it was
// sent (the guids themselves are checked, never recorded).
func TestProvisionRequiresOrganizationAndSpace(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	const ctx = `"context":{"platform":"cloudfoundry","organization_guid":"org-1","space_guid":"space-1"}`
	body := func(fields string) string {
		return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,%s%s}`, db.ID, small, fields, ctx)
	}
	put := func(fields string) response {
		t.Helper()
		r := e.do(http.MethodPut, "/v2/service_instances/strict", body(fields))
		wantOSBResponse(t, http.MethodPut, instancePath, r)
		return r
	}
	refusals := []struct{ name, fields string }{
		{"neither", ""},
		{"no organization_guid", `"space_guid":"space-1",`},
		{"no space_guid", `"organization_guid":"org-1",`},
		{"empty organization_guid", `"organization_guid":"","space_guid":"space-1",`},
		{"empty space_guid", `"organization_guid":"org-1","space_guid":"",`},
		{"both null", `"organization_guid":null,"space_guid":null,`},
	}
	refuse := func() {
		t.Helper()
		before := e.dbState()
		for _, c := range refusals {
			eb := wantOSBError(t, put(c.fields), http.StatusBadRequest, "BadRequest")
			if !strings.Contains(eb.Description, "organization_guid and space_guid are required") {
				t.Errorf("%s: 400 description %q does not name the fields", c.name, eb.Description)
			}
		}
		if !reflect.DeepEqual(e.dbState(), before) {
			t.Fatal("a provision refused for its guids wrote")
		}
	}
	refuse()

	const both = `"organization_guid":"org-1","space_guid":"space-1",`
	wantEmptyObject(t, put(both), http.StatusCreated)
	want := map[string]any{"platform": "cloudfoundry", "organization_guid": "org-1", "space_guid": "space-1"}
	if got := e.instanceDocs()["strict"].Context; !reflect.DeepEqual(got, want) {
		t.Fatalf("context recorded %v, want %v", got, want)
	}
	wantEmptyObject(t, put(both), http.StatusOK)
	// The same instance again without them is still refused: the rule is
	// the request's, not the record's.
	refuse()
}

func instName(i int) string { return "race-" + string(rune('a'+i)) }

// OSB: a provision under an existing id is 200 when it is the same
// request again and 409 when its attributes differ: the service, the
// plan, the context and the parameters. Parameters are never stored (they
// may hold secrets), so they are compared by a salted slow digest; a
// record from before digests were kept cannot tell, and is never a
// conflict for them.
func TestProvisionSameIDOtherAttributes(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	put := func(id, body string) response {
		t.Helper()
		r := e.do(http.MethodPut, "/v2/service_instances/"+id, body)
		wantOSBResponse(t, http.MethodPut, instancePath, r)
		return r
	}
	body := func(context, parameters string) string {
		b := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,`+guids, db.ID, small)
		if context != "" {
			b += `,"context":` + context
		}
		if parameters != "" {
			b += `,"parameters":` + parameters
		}
		return b + "}"
	}
	const ctx = `{"platform":"kubernetes","namespace":"apps"}`
	const secret = "correct horse battery"
	wantEmptyObject(t, put("c1", body(ctx, `{"password":"`+secret+`","size_gb":3}`)), http.StatusCreated)

	// The same values, however encoded (key order, spacing, 3 as 3.0),
	// are the same request: 200 {}.
	wantEmptyObject(t, put("c1", body(`{ "namespace": "apps", "platform": "kubernetes" }`, `{ "size_gb": 3.0, "password": "`+secret+`" }`)), http.StatusOK)

	before := e.dbState()
	for _, c := range []struct{ name, body string }{
		{"other parameters", body(ctx, `{"password":"`+secret+`","size_gb":4}`)},
		{"another password", body(ctx, `{"password":"correct horse battery!","size_gb":3}`)},
		{"no parameters", body(ctx, "")},
		{"empty parameters", body(ctx, `{}`)},
		{"another namespace", body(`{"platform":"kubernetes","namespace":"other"}`, `{"password":"`+secret+`","size_gb":3}`)},
		{"no context", body("", `{"password":"`+secret+`","size_gb":3}`)},
	} {
		eb := wantOSBError(t, put("c1", c.body), http.StatusConflict, "Conflict")
		if strings.Contains(eb.Description, secret) || strings.Contains(eb.Description, "size_gb") {
			t.Errorf("%s: the 409 repeats a parameter: %s", c.name, eb.Description)
		}
	}
	if !reflect.DeepEqual(e.dbState(), before) {
		t.Fatal("a 409 wrote")
	}

	// What is stored: a salted Argon2id digest, never the values; the
	// same parameters under two ids digest differently.
	wantEmptyObject(t, put("c2", body(ctx, `{"password":"`+secret+`","size_gb":3}`)), http.StatusCreated)
	docs := e.instanceDocs()
	d1, d2 := docs["c1"].ParametersDigest, docs["c2"].ParametersDigest
	if !strings.HasPrefix(d1, "$argon2id$v=19$m=19456,t=2,p=1$") || d1 == d2 || strings.Contains(d1, secret) {
		t.Fatalf("parameters digests %q and %q", d1, d2)
	}
	if docs["c1"].Parameters != nil {
		t.Fatalf("parameters came back from the store: %s", docs["c1"].Parameters)
	}

	// None, null and {} are one: no parameters.
	wantEmptyObject(t, put("c3", body(ctx, "")), http.StatusCreated)
	if d := e.instanceDocs()["c3"].ParametersDigest; d != store.NoParameters {
		t.Fatalf("digest of no parameters: %q", d)
	}
	wantEmptyObject(t, put("c3", body(ctx, `{}`)), http.StatusOK)
	wantEmptyObject(t, put("c3", body(ctx, `null`)), http.StatusOK)
	wantOSBError(t, put("c3", body(ctx, `{"size_gb":1}`)), http.StatusConflict, "Conflict")

	// A record from before digests were kept: the parameters are unknown,
	// so no parameters are a conflict; the context still is.
	if _, err := e.client.Collection(store.InstancesCollection).Doc("c1").Update(e.ctx, []firestore.Update{{Path: "parameters_digest", Value: firestore.Delete}}); err != nil {
		t.Fatal(err)
	}
	wantEmptyObject(t, put("c1", body(ctx, `{"size_gb":64}`)), http.StatusOK)
	wantEmptyObject(t, put("c1", body(ctx, "")), http.StatusOK)
	wantOSBError(t, put("c1", body(`{"platform":"cloudfoundry"}`, "")), http.StatusConflict, "Conflict")

	// A context update replaces the recorded context: a provision again
	// is compared with the context as it is now.
	wantEmptyObject(t, e.patch("c2", patchBody(db.ID, "", `"context":{"platform":"kubernetes","namespace":"moved"}`)), http.StatusOK)
	wantOSBError(t, put("c2", body(ctx, `{"password":"`+secret+`","size_gb":3}`)), http.StatusConflict, "Conflict")
	wantEmptyObject(t, put("c2", body(`{"platform":"kubernetes","namespace":"moved"}`, `{"password":"`+secret+`","size_gb":3}`)), http.StatusOK)
	invariant.Require(t, e.client, invariant.Options{Canaries: []string{brokerPass, adminToken, secret}})

	// The invariant rule that keeps the digest honest can fail: a fast
	// unsalted hash (guessable offline) in its place is reported.
	ref := e.client.Collection(store.InstancesCollection).Doc("c3")
	if _, err := ref.Update(e.ctx, []firestore.Update{{Path: "parameters_digest", Value: "sha256:0b14d501a594442a01c6859541bcb3e8164d183d32937b851835442f69d5c94e"}}); err != nil {
		t.Fatal(err)
	}
	_, violations, err := invariant.Check(e.ctx, e.client, invariant.Options{})
	if err != nil || len(violations) != 1 || violations[0].Rule != "parameters-digest" || violations[0].Doc != "instances/c3" {
		t.Fatalf("a fast hash stored as the digest: %v %v", violations, err)
	}
	// A digest the broker cannot read is unknown, like none: no conflict.
	wantEmptyObject(t, put("c3", body(ctx, `{"size_gb":2}`)), http.StatusOK)
	if _, err := ref.Update(e.ctx, []firestore.Update{{Path: "parameters_digest", Value: store.NoParameters}}); err != nil {
		t.Fatal(err)
	}
}

// A deprovision names the instance's service and plan, and they are
// checked in the transaction that deletes it: a plan change that commits
// between a check and the delete cannot let a deprovision naming the old
// plan through. Raced, the two never both succeed: whichever commits
// first makes the other one's premise false. The pairs race at once, each
// on its own spec (the emulator resolves a pair's lock conflict by timing
// a transaction out, which the pairs then wait out together).
func TestDeprovisionRacesPlanChange(t *testing.T) {
	const pairs = 8
	e := newEnv(t, time.Minute)
	var all []*spec.Spec
	for i := range pairs {
		all = append(all, parseSpec(t, specYAML(fmt.Sprintf("dp-%d", i))))
	}
	e.seed(all...)
	type pair struct {
		patch, del response
		perr, derr error
	}
	out := make([]pair, pairs)
	var reqs [][2]*http.Request
	for i, s := range all {
		id := fmt.Sprintf("dp-%d", i)
		small, large := s.Plans[0].ID, s.Plans[1].ID
		e.provision(id, s.ID, small)
		reqs = append(reqs, [2]*http.Request{
			e.request(http.MethodPatch, "/v2/service_instances/"+id, patchBody(s.ID, large, "")),
			e.request(http.MethodDelete, "/v2/service_instances/"+id+"?service_id="+s.ID+"&plan_id="+small, ""),
		})
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range pairs {
		wg.Go(func() { <-start; out[i].patch, out[i].perr = e.try(reqs[i][0]) })
		wg.Go(func() { <-start; out[i].del, out[i].derr = e.try(reqs[i][1]) })
	}
	close(start)
	wg.Wait()
	docs := e.instanceDocs()
	outcomes := map[string]int{}
	for i, o := range out {
		if o.perr != nil || o.derr != nil {
			t.Fatal(o.perr, o.derr)
		}
		pr, dr := o.patch, o.del
		wantOSBResponse(t, http.MethodPatch, instancePath, pr)
		wantOSBResponse(t, http.MethodDelete, instancePath, dr)
		_, exists := docs[fmt.Sprintf("dp-%d", i)]
		switch {
		case pr.status == http.StatusOK && dr.status == http.StatusOK:
			outcomes["both"]++
			t.Errorf("pair %d: the plan change and the deprovision naming the old plan both succeeded", i)
		case dr.status == http.StatusOK:
			outcomes["deprovision first"]++
			// Deleted on small; the update found no instance.
			if exists || pr.status != http.StatusBadRequest || !strings.Contains(string(pr.body), "InstanceNotFound") {
				t.Errorf("pair %d: deprovision won, then PATCH %d %s, record left %v", i, pr.status, pr.body, exists)
			}
		case pr.status == http.StatusOK:
			outcomes["plan change first"]++
			// Moved to large; the deprovision naming small is refused.
			if !exists || dr.status != http.StatusBadRequest {
				t.Errorf("pair %d: plan change won, then DELETE %d %s, record left %v", i, dr.status, dr.body, exists)
			}
		default:
			outcomes["contention"]++
			// Contention (422 ConcurrencyError) may refuse one; nothing
			// else refuses both.
			if pr.status != http.StatusUnprocessableEntity && dr.status != http.StatusUnprocessableEntity {
				t.Errorf("pair %d: PATCH %d %s, DELETE %d %s", i, pr.status, pr.body, dr.status, dr.body)
			}
		}
	}
	t.Logf("outcomes of %d pairs: %v", pairs, outcomes)
	invariant.Require(t, e.client, invariant.Options{})
}
