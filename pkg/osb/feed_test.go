package osb_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// maintenanceVersions reads every plan's maintenance_info version.
func maintenanceVersions(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var c catalog.Catalog
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range c.Services {
		for _, p := range s.Plans {
			v := ""
			if p.MaintenanceInfo != nil {
				v = p.MaintenanceInfo.Version
			}
			out[s.Name+"/"+p.Name] = v
		}
	}
	return out
}

// Plans carry maintenance_info from the adopted generation; a provision
// naming another version is OSB's 422 MaintenanceInfoConflict and writes
// nothing; adopting a new version advances it.
func TestMaintenanceInfo(t *testing.T) {
	e := newEnv(t, 0)
	db := parseSpec(t, specYAML("db"))
	e.seed(db)
	_, r := e.catalog()
	if got := maintenanceVersions(t, r.body); got["db/small"] != "1.0.0" || got["db/large"] != "1.0.0" {
		t.Fatalf("maintenance_info after the first version: %v", got)
	}
	with := func(version string) string {
		return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,`+guids+`,"maintenance_info":{"version":%q}}`, db.ID, db.Plans[0].ID, version)
	}
	before := e.dbState()
	wantOSBError(t, e.do(http.MethodPut, "/v2/service_instances/old", with("0.9.0")), http.StatusUnprocessableEntity, "MaintenanceInfoConflict")
	wantOSBError(t, e.do(http.MethodPut, "/v2/service_instances/old", fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"maintenance_info":{}}`, db.ID, db.Plans[0].ID)), http.StatusBadRequest, "BadRequest")
	if after := e.dbState(); len(after) != len(before) {
		t.Fatalf("a refused provision wrote: %d documents, was %d", len(after), len(before))
	}
	wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/current", with("1.0.0")), http.StatusCreated)
	if got := e.instanceDocs()["current"].MaintenanceVersion; got != "1.0.0" {
		t.Fatalf("instance records maintenance version %q", got)
	}

	next := parseSpec(t, specYAML("db"))
	next.Description = "a new version"
	spec.AssignIDs(next, testReg)
	if res, err := e.st.UpsertSpec(e.ctx, store.Offer{Registry: testReg, Entry: "db", Ref: "r", Spec: next, Digest: spec.Digest(next), Run: "run-2"}); err != nil || res.Outcome != store.Updated {
		t.Fatalf("adopt: %v %v", res, err)
	}
	e.commit()
	_, r = e.catalog()
	if got := maintenanceVersions(t, r.body); got["db/small"] != "2.0.0" {
		t.Fatalf("maintenance_info after adopting a new version: %v", got)
	}
	wantOSBError(t, e.do(http.MethodPut, "/v2/service_instances/late", with("1.0.0")), http.StatusUnprocessableEntity, "MaintenanceInfoConflict")
}

// A warm instance's cached revision may lag a watcher that listed on
// another instance: that watcher's since is not "ahead of the catalog".
func TestFeedSinceAheadOfAStaleCache(t *testing.T) {
	e := newEnv(t, time.Hour) // the cache never refreshes by itself
	e.seed(parseSpec(t, specYAML("alpha")))
	if _, r := e.catalog(); r.header.Get(api.RevisionHeader) != "1" {
		t.Fatalf("X-Catalog-Revision %q, want 1", r.header.Get(api.RevisionHeader))
	}
	e.seed(parseSpec(t, specYAML("beta"))) // revision 2; this cache still says 1
	r := e.do(http.MethodGet, "/v2/catalog/changes?since=2", "")
	if r.status != http.StatusOK {
		t.Fatalf("since=2 against a cache at 1: %d %s", r.status, r.body)
	}
	r = e.do(http.MethodGet, "/v2/catalog/changes?since=3", "")
	var gone api.Gone
	if err := json.Unmarshal(r.body, &gone); err != nil || r.status != http.StatusGone || gone.Revision != 2 || !strings.Contains(r.header.Get(api.RevisionHeader), "2") {
		t.Fatalf("since=3 at revision 2: %d %s", r.status, r.body)
	}
	// Changes after 0 carry the rendered service, with maintenance_info.
	r = e.do(http.MethodGet, "/v2/catalog/changes?since=0&limit=1", "")
	var page api.ChangePage
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Changes) != 1 || page.Next != 1 || page.Changes[0].Kind != api.ChangeCreated {
		t.Fatalf("limit=1: %s", r.body)
	}
	if !strings.Contains(string(r.body), `"maintenance_info":{"version":"1.0.0"`) {
		t.Fatalf("the change does not carry the service as the catalog serves it: %s", r.body)
	}
}
