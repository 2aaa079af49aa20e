package osb_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/store"
)

func bindBody(serviceID, planID, extra string) string {
	b := fmt.Sprintf(`{"service_id":%q,"plan_id":%q`, serviceID, planID)
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

func bindingURL(instance, binding string) string {
	return "/v2/service_instances/" + instance + "/service_bindings/" + binding
}

// bindCall sends a binding request and checks the answer against the OSB
// OpenAPI file (path is the URL path, query included).
func (e *env) bindCall(method, path, body string) response {
	e.t.Helper()
	r := e.do(method, path, body)
	template := bindingPath
	if strings.Contains(path, "/last_operation") {
		template = bindingLastOpPath
	}
	wantOSBResponse(e.t, method, template, r)
	return r
}

func (e *env) bindingDocs(instance string) map[string]store.Binding {
	e.t.Helper()
	snaps, err := e.client.Collection(store.InstancesCollection).Doc(instance).Collection(store.BindingsCollection).Documents(e.ctx).GetAll()
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]store.Binding{}
	for _, s := range snaps {
		var b store.Binding
		if err := s.DataTo(&b); err != nil {
			e.t.Fatal(err)
		}
		if err := b.DecodeContext(); err != nil {
			e.t.Fatal(err)
		}
		out[s.Ref.ID] = b
	}
	return out
}

// sealedYAML is a bindable service with one plan that is not.
const sealedYAML = `name: vault
description: A vault
bindable: true
plans:
  - name: open
    description: bindable
  - name: sealed
    description: not bindable
    bindable: false
`

func TestBindingLifecycle(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("i1", db.ID, small)
	url := bindingURL("i1", "b1")
	// Bind parameters may hold secrets: the canary must be stored nowhere.
	const bindSecret = "bind-canary-5f3a9c"
	body := bindBody(db.ID, small, `"bind_resource":{"app_guid":"app-1"},"context":{"platform":"cloudfoundry"},"parameters":{"role":"readonly","role_password":"`+bindSecret+`"}`)

	// The answer is {}: no credentials, because this broker has none to
	// give (it provisions nothing); the binding is recorded.
	wantEmptyObject(t, e.bindCall(http.MethodPut, url+"?accepts_incomplete=true", body), http.StatusCreated)
	b := e.bindingDocs("i1")["b1"]
	if b.InstanceID != "i1" || b.SpecID != db.ID || b.PlanID != small || b.AppGUID != "app-1" || b.Context["platform"] != "cloudfoundry" {
		t.Fatalf("recorded binding %+v", b)
	}
	// OSB: the same again is 200; the same id for another app is 409.
	wantEmptyObject(t, e.bindCall(http.MethodPut, url, body), http.StatusOK)
	wantOSBError(t, e.bindCall(http.MethodPut, url, bindBody(db.ID, small, `"bind_resource":{"app_guid":"app-2"}`)), http.StatusConflict, "Conflict")
	// The deprecated top-level app_guid means the same (with the same
	// context and parameters, in another order).
	wantEmptyObject(t, e.bindCall(http.MethodPut, url, bindBody(db.ID, small, `"parameters":{"role_password":"`+bindSecret+`","role":"readonly"},"app_guid":"app-1","context":{"platform":"cloudfoundry"}`)), http.StatusOK)

	wantEmptyObject(t, e.bindCall(http.MethodGet, url, ""), http.StatusOK)
	wantOSBError(t, e.bindCall(http.MethodGet, bindingURL("i1", "b9"), ""), http.StatusNotFound, "NotFound")
	wantOSBError(t, e.bindCall(http.MethodGet, bindingURL("nope", "b1"), ""), http.StatusNotFound, "NotFound")
	r := e.bindCall(http.MethodGet, url+"/last_operation?service_id="+db.ID+"&plan_id="+small, "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"state":"succeeded"`) {
		t.Fatalf("binding last_operation: %d %s", r.status, r.body)
	}
	wantOSBError(t, e.bindCall(http.MethodGet, bindingURL("i1", "never")+"/last_operation", ""), http.StatusNotFound, "NotFound")
	wantOSBError(t, e.bindCall(http.MethodGet, url+"/last_operation?operation=op-1", ""), http.StatusBadRequest, "BadRequest")

	// Bindings count toward nothing on the spec.
	if n := e.instanceCount(db.ID); n != 1 {
		t.Fatalf("spec instances %d, want 1", n)
	}
	invariant.Require(t, e.client, invariant.Options{Canaries: []string{brokerPass, adminToken, bindSecret, "correct horse battery"}})

	// Unbind: 200 {}, then 410 {}; last_operation says gone.
	wantEmptyObject(t, e.bindCall(http.MethodDelete, url+"?accepts_incomplete=true&service_id="+db.ID+"&plan_id="+small, ""), http.StatusOK)
	wantEmptyObject(t, e.bindCall(http.MethodDelete, url+"?service_id="+db.ID+"&plan_id="+small, ""), http.StatusGone)
	eb := wantOSBError(t, e.bindCall(http.MethodGet, url+"/last_operation", ""), http.StatusGone, "Gone")
	if !strings.Contains(eb.Description, "unbound") {
		t.Errorf("410 description %q", eb.Description)
	}
	if inst := e.instanceDocs()["i1"]; inst.Bindings != 0 || len(e.bindingDocs("i1")) != 0 {
		t.Fatalf("after unbinding: %d counted, %v recorded", inst.Bindings, e.bindingDocs("i1"))
	}
	invariant.Require(t, e.client, invariant.Options{Canaries: []string{brokerPass, adminToken}})
}

// OSB has platforms unbind before they deprovision and leaves the other
// case to the broker: the instance goes with its bindings, and each
// binding's last_operation then says gone.
func TestDeprovisionWithBindings(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("i1", db.ID, small)
	for _, id := range []string{"b1", "b2"} {
		wantEmptyObject(t, e.bindCall(http.MethodPut, bindingURL("i1", id), bindBody(db.ID, small, "")), http.StatusCreated)
	}
	r := e.do(http.MethodDelete, "/v2/service_instances/i1?service_id="+db.ID+"&plan_id="+small, "")
	wantOSBResponse(t, http.MethodDelete, instancePath, r)
	wantEmptyObject(t, r, http.StatusOK)
	if got := e.bindingDocs("i1"); len(got) != 0 {
		t.Fatalf("bindings outlived their instance: %v", got)
	}
	for _, id := range []string{"b1", "b2"} {
		wantOSBError(t, e.bindCall(http.MethodGet, bindingURL("i1", id)+"/last_operation", ""), http.StatusGone, "Gone")
		wantEmptyObject(t, e.bindCall(http.MethodDelete, bindingURL("i1", id)+"?service_id="+db.ID+"&plan_id="+small, ""), http.StatusGone)
		wantOSBError(t, e.bindCall(http.MethodGet, bindingURL("i1", id), ""), http.StatusNotFound, "NotFound")
	}
	// A bind of the deprovisioned instance is refused and writes nothing.
	wantOSBError(t, e.bindCall(http.MethodPut, bindingURL("i1", "b3"), bindBody(db.ID, small, "")), http.StatusBadRequest, "InstanceNotFound")
	invariant.Require(t, e.client, invariant.Options{Canaries: []string{brokerPass, adminToken}})
}

// A binding pins nothing its instance does not: a spec marked for deletion
// is kept for its one instance however many bindings that has, still takes
// binds of that instance (they keep running applications working), and is
// deleted once the instance is deprovisioned.
func TestBindingsDoNotPinSpecs(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("i1", db.ID, small)
	wantEmptyObject(t, e.bindCall(http.MethodPut, bindingURL("i1", "b1"), bindBody(db.ID, small, "")), http.StatusCreated)
	e.mark(db.ID, "run-1")
	wantEmptyObject(t, e.bindCall(http.MethodPut, bindingURL("i1", "b2"), bindBody(db.ID, small, "")), http.StatusCreated)
	rec := e.specRecord(db.ID)
	if rec.Instances != 1 || rec.PlanInstances[small] != 1 {
		t.Fatalf("a marked spec with one instance and two bindings counts %d / %v", rec.Instances, rec.PlanInstances)
	}
	out, refs, err := e.st.DeleteMarked(e.ctx, testReg, db.ID, "run-2", time.Now().Add(time.Hour))
	if err != nil || out != store.Referenced || refs != 1 {
		t.Fatalf("delete while the bound instance exists: %s %d %v", out, refs, err)
	}
	wantEmptyObject(t, e.do(http.MethodDelete, "/v2/service_instances/i1?service_id="+db.ID+"&plan_id="+small, ""), http.StatusOK)
	out, _, err = e.st.DeleteMarked(e.ctx, testReg, db.ID, "run-2", time.Now().Add(time.Hour))
	if err != nil || out != store.Deleted {
		t.Fatalf("delete once the instance is gone: %s %v", out, err)
	}
	e.commit()
	invariant.Require(t, e.client, invariant.Options{Canaries: []string{brokerPass, adminToken}})
}

// Refused binds and unbinds: the OSB status and body, and nothing written.
func TestBadBindingRequestsWriteNothing(t *testing.T) {
	e := newEnv(t, time.Minute)
	db, vault := parseSpec(t, specYAML("db")), parseSpec(t, sealedYAML)
	e.seed(db, vault)
	small, large := db.Plans[0].ID, db.Plans[1].ID
	e.provision("i1", db.ID, small)
	e.provision("sealed", vault.ID, vault.Plans[1].ID)
	wantEmptyObject(t, e.bindCall(http.MethodPut, bindingURL("i1", "b1"), bindBody(db.ID, small, `"bind_resource":{"app_guid":"a"}`)), http.StatusCreated)
	before := e.dbState()
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string // "-": the {} of a 410
	}{
		{"bind an unknown instance", "PUT", bindingURL("nope", "b2"), bindBody(db.ID, small, ""), 400, "InstanceNotFound"},
		{"bind a plan that is not bindable", "PUT", bindingURL("sealed", "b2"), bindBody(vault.ID, vault.Plans[1].ID, ""), 400, "NotBindable"},
		{"bind with another plan", "PUT", bindingURL("i1", "b2"), bindBody(db.ID, large, ""), 400, "BadRequest"},
		{"bind with another service", "PUT", bindingURL("i1", "b2"), bindBody(vault.ID, small, ""), 400, "BadRequest"},
		{"bind without ids", "PUT", bindingURL("i1", "b2"), `{}`, 400, "BadRequest"},
		{"rotate", "PUT", bindingURL("i1", "b2"), `{"predecessor_binding_id":"b1"}`, 400, "BadRequest"},
		{"two app guids", "PUT", bindingURL("i1", "b2"), bindBody(db.ID, small, `"app_guid":"x","bind_resource":{"app_guid":"y"}`), 400, "BadRequest"},
		{"context a string", "PUT", bindingURL("i1", "b2"), bindBody(db.ID, small, `"context":"x"`), 400, "BadRequest"},
		{"parameters a list", "PUT", bindingURL("i1", "b2"), bindBody(db.ID, small, `"parameters":[]`), 400, "BadRequest"},
		{"malformed JSON", "PUT", bindingURL("i1", "b2"), `{"service_id"`, 400, "MalformedJSON"},
		{"bad binding id", "PUT", bindingURL("i1", "b%20x"), bindBody(db.ID, small, ""), 400, "BadRequest"},
		{"existing with another app", "PUT", bindingURL("i1", "b1"), bindBody(db.ID, small, `"bind_resource":{"app_guid":"z"}`), 409, "Conflict"},
		{"unbind without ids", "DELETE", bindingURL("i1", "b1"), "", 400, "BadRequest"},
		{"unbind with another service", "DELETE", bindingURL("i1", "b1") + "?service_id=" + vault.ID + "&plan_id=" + small, "", 400, "BadRequest"},
		{"unbind with another plan", "DELETE", bindingURL("i1", "b1") + "?service_id=" + db.ID + "&plan_id=" + large, "", 400, "BadRequest"},
		{"unbind unknown", "DELETE", bindingURL("i1", "b7") + "?service_id=" + db.ID + "&plan_id=" + small, "", 410, "-"},
		{"unbind of an unknown instance", "DELETE", bindingURL("nope", "b1") + "?service_id=" + db.ID + "&plan_id=" + small, "", 410, "-"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.bindCall(c.method, c.path, c.body)
			if c.code == "-" {
				wantEmptyObject(t, r, c.status)
				return
			}
			wantOSBError(t, r, c.status, c.code)
		})
	}
	if !reflect.DeepEqual(e.dbState(), before) {
		t.Fatal("refused binding requests changed the database")
	}
}

// A bind under an existing binding id is 200 when it is the same request
// again and 409 when it differs in service, app, route, context or
// parameters (OSB: "with different parameters"); parameters are compared
// by their salted digest, never stored; a binding from before digests
// were kept is never a conflict for them.
func TestBindSameIDOtherAttributes(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("i1", db.ID, small)
	url := bindingURL("i1", "b1")
	const secret = "bind-canary-81d0e2"
	const ctx = `"context":{"platform":"cloudfoundry","space_guid":"s1"}`
	params := `"parameters":{"role":"readonly","role_password":"` + secret + `"}`
	wantEmptyObject(t, e.bindCall(http.MethodPut, url, bindBody(db.ID, small, `"bind_resource":{"app_guid":"app-1"},`+ctx+`,`+params)), http.StatusCreated)
	wantEmptyObject(t, e.bindCall(http.MethodPut, url, bindBody(db.ID, small, `"parameters":{ "role_password":"`+secret+`", "role":"readonly" },`+ctx+`,"app_guid":"app-1"`)), http.StatusOK)

	before := e.dbState()
	for _, c := range []struct{ name, extra string }{
		{"other parameters", `"bind_resource":{"app_guid":"app-1"},` + ctx + `,"parameters":{"role":"readwrite","role_password":"` + secret + `"}`},
		{"no parameters", `"bind_resource":{"app_guid":"app-1"},` + ctx},
		{"another context", `"bind_resource":{"app_guid":"app-1"},"context":{"platform":"cloudfoundry","space_guid":"s2"},` + params},
		{"another route", `"bind_resource":{"app_guid":"app-1","route":"r.example"},` + ctx + `,` + params},
	} {
		eb := wantOSBError(t, e.bindCall(http.MethodPut, url, bindBody(db.ID, small, c.extra)), http.StatusConflict, "Conflict")
		if strings.Contains(eb.Description, secret) || strings.Contains(eb.Description, "readwrite") {
			t.Errorf("%s: the 409 repeats a parameter: %s", c.name, eb.Description)
		}
	}
	if !reflect.DeepEqual(e.dbState(), before) {
		t.Fatal("a 409 wrote")
	}
	if d := e.bindingDocs("i1")["b1"].ParametersDigest; !strings.HasPrefix(d, "$argon2id$") || strings.Contains(d, secret) {
		t.Fatalf("stored parameters digest %q", d)
	}

	// A binding from before digests were kept: parameters unknown.
	if _, err := e.client.Collection(store.InstancesCollection).Doc("i1").Collection(store.BindingsCollection).Doc("b1").
		Update(e.ctx, []firestore.Update{{Path: "parameters_digest", Value: firestore.Delete}}); err != nil {
		t.Fatal(err)
	}
	wantEmptyObject(t, e.bindCall(http.MethodPut, url, bindBody(db.ID, small, `"bind_resource":{"app_guid":"app-1"},`+ctx+`,"parameters":{"role":"readwrite"}`)), http.StatusOK)
	wantOSBError(t, e.bindCall(http.MethodPut, url, bindBody(db.ID, small, `"bind_resource":{"app_guid":"app-1"},"context":{"platform":"kubernetes"}`)), http.StatusConflict, "Conflict")
	invariant.Require(t, e.client, invariant.Options{Canaries: []string{brokerPass, adminToken, secret}})
}
