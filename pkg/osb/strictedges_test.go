package osb_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// The broker reads a body's keys as the platform wrote them: a key that
// names a field in another case, or one given twice, is a 400 naming it,
// and nothing is written (a repeated query parameter is refused alike).
func TestOSBBodiesAreDecodedStrictly(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("i-1", db.ID, small)
	before := e.dbState()
	for _, c := range []struct {
		method, path, template, body string
		want                         []string
	}{
		{http.MethodPut, "/v2/service_instances/i-2", instancePath,
			fmt.Sprintf(`{"SERVICE_ID":%q,"plan_id":%q,%s}`, db.ID, small, guids), []string{`"SERVICE_ID"`, `"service_id"`}},
		{http.MethodPut, "/v2/service_instances/i-2", instancePath,
			fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"plan_id":"other",%s}`, db.ID, small, guids), []string{`"plan_id"`, "twice"}},
		{http.MethodPut, "/v2/service_instances/i-2", instancePath,
			fmt.Sprintf(`{"service_id":%q,"plan_id":%q,%s,"context":{"namespace":"a","namespace":"b"}}`, db.ID, small, guids), []string{`"namespace"`, "twice", "context"}},
		{http.MethodPatch, "/v2/service_instances/i-1", instancePath,
			fmt.Sprintf(`{"service_id":%q,"Maintenance_Info":{"version":"x"}}`, db.ID), []string{`"Maintenance_Info"`, `"maintenance_info"`}},
		{http.MethodPut, bindingURL("i-1", "b-1"), bindingPath,
			bindBody(db.ID, small, `"bind_resource":{"App_GUID":"a"}`), []string{`"App_GUID"`, "bind_resource", `"app_guid"`}},
		{http.MethodPut, bindingURL("i-1", "b-1"), bindingPath,
			bindBody(db.ID, small, `"app_guid":"a","app_guid":"b"`), []string{`"app_guid"`, "twice"}},
	} {
		r := e.do(c.method, c.path, c.body)
		wantOSBResponse(t, c.method, c.template, r)
		eb := wantOSBError(t, r, http.StatusBadRequest, "BadRequest")
		for _, s := range c.want {
			if !strings.Contains(eb.Description, s) {
				t.Errorf("%s %s %s: %q does not say %s", c.method, c.path, c.body, eb.Description, s)
			}
		}
	}
	if after := e.dbState(); !reflect.DeepEqual(after, before) {
		t.Fatalf("refused requests wrote: %d documents before, %d after", len(before), len(after))
	}
}

// Every free-text field has a limit and refuses control characters: a
// 400 naming the field, nothing written; at the limit it is taken.
func TestFreeTextFieldsHaveLimits(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("i-1", db.ID, small)
	big := strings.Repeat("v", 3000) // within the tests' body limit (testMaxBody)
	provision := func(org, space, extra string) string {
		return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":%s,"space_guid":%s%s}`, db.ID, small, jsonString(org), jsonString(space), extra)
	}
	before := e.dbState()
	for _, c := range []struct {
		method, path, template, body, field string
	}{
		{http.MethodPut, "/v2/service_instances/i-2", instancePath, provision("org", "space", `,"maintenance_info":{"version":"`+big+`\u0000"}`), "maintenance_info.version"},
		{http.MethodPut, "/v2/service_instances/i-2", instancePath, provision("org", "space", `,"maintenance_info":{"version":"1.0.0\u0000"}`), "maintenance_info.version"},
		{http.MethodPatch, "/v2/service_instances/i-1", instancePath, fmt.Sprintf(`{"service_id":%q,"maintenance_info":{"version":%s}}`, db.ID, jsonString(strings.Repeat("1", 256))), "maintenance_info.version"},
		{http.MethodPut, "/v2/service_instances/i-2", instancePath, provision(strings.Repeat("o", 256), "space", ""), "organization_guid"},
		{http.MethodPut, "/v2/service_instances/i-2", instancePath, provision("org", "sp\nace", ""), "space_guid"},
		{http.MethodPut, bindingURL("i-1", "b-1"), bindingPath, bindBody(db.ID, small, `"app_guid":`+jsonString(strings.Repeat("a", 256))), "app_guid"},
		{http.MethodPut, bindingURL("i-1", "b-1"), bindingPath, bindBody(db.ID, small, `"bind_resource":{"app_guid":"a\u007f"}`), "bind_resource.app_guid"},
		{http.MethodPut, bindingURL("i-1", "b-1"), bindingPath, bindBody(db.ID, small, `"bind_resource":{"route":`+jsonString(strings.Repeat("r", 2049))+`}`), "bind_resource.route"},
		{http.MethodPut, bindingURL("i-1", "b-1"), bindingPath, bindBody(db.ID, small, `"bind_resource":{"route":"a\u0085b"}`), "bind_resource.route"},
	} {
		r := e.do(c.method, c.path, c.body)
		wantOSBResponse(t, c.method, c.template, r)
		eb := wantOSBError(t, r, http.StatusBadRequest, "BadRequest")
		if !strings.HasPrefix(eb.Description, c.field+" ") || len(eb.Description) > 300 {
			t.Errorf("%s %s (%s): %.300q does not name the field first, briefly", c.method, c.path, c.field, eb.Description)
		}
	}
	if after := e.dbState(); !reflect.DeepEqual(after, before) {
		t.Fatalf("refused requests wrote: %d documents before, %d after", len(before), len(after))
	}
	// At the limits, with any printable text, each is taken.
	wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/i-3", provision(strings.Repeat("o", 255), "späce ✓", "")), http.StatusCreated)
	wantEmptyObject(t, e.do(http.MethodPut, bindingURL("i-1", "b-2"), bindBody(db.ID, small,
		`"bind_resource":{"app_guid":`+jsonString(strings.Repeat("a", 255))+`,"route":`+jsonString(strings.Repeat("r", 2048))+`}`)), http.StatusCreated)
}

// A provision again under an id is compared by its organization and
// space too: a platform that sends no context (Korifi's OSB client) says
// where an instance belongs only with them, and OSB has another place
// be another instance (409), the same place a retry (200).
func TestProvisionAgainInAnotherOrganizationOrSpaceConflicts(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	body := func(org, space, extra string) string {
		return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":%q,"space_guid":%q%s}`, db.ID, small, org, space, extra)
	}
	ctx := `,"context":{"platform":"cloudfoundry"}`
	for _, c := range []struct {
		what, body string
		status     int
	}{
		{"first, no context", body("org-1", "space-1", ""), http.StatusCreated},
		{"again", body("org-1", "space-1", ""), http.StatusOK},
		{"another organization", body("org-2", "space-1", ""), http.StatusConflict},
		{"another space", body("org-1", "space-2", ""), http.StatusConflict},
	} {
		r := e.do(http.MethodPut, "/v2/service_instances/korifi", c.body)
		wantOSBResponse(t, http.MethodPut, instancePath, r)
		if r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.what, r.status, r.body, c.status)
		}
	}
	// With a context, the same rule.
	wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/cf", body("org-1", "space-1", ctx)), http.StatusCreated)
	wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/cf", body("org-1", "space-1", ctx)), http.StatusOK)
	wantOSBError(t, e.do(http.MethodPut, "/v2/service_instances/cf", body("org-1", "space-9", ctx)), http.StatusConflict, "")
	if got := e.instanceDocs()["korifi"]; got.OrganizationGUID != "org-1" || got.SpaceGUID != "space-1" {
		t.Fatalf("the record says organization %q space %q, want the first provision's", got.OrganizationGUID, got.SpaceGUID)
	}
}
