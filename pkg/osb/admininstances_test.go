package osb_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/specsync/specsync/pkg/api"
)

// GET /admin/instances shows what docs/api.md lists for each instance:
// its bindings (how many), maintenance_version, updated_at,
// previous_plan_id after a plan change, and the organization and space
// it was provisioned in.
func TestAdminInstancesShowsBindingsVersionsAndUpdates(t *testing.T) {
	e, db := newDBEnv(t)
	small, large := db.Plans[0].ID, db.Plans[1].ID
	e.provision("moved", db.ID, small)
	e.provision("still", db.ID, small)
	for i := range 3 {
		wantEmptyObject(t, e.do(http.MethodPut, bindingURL("moved", fmt.Sprintf("b-%d", i)), bindBody(db.ID, small, "")), http.StatusCreated)
	}
	wantEmptyObject(t, e.patch("moved", patchBody(db.ID, large, `"previous_values":{"plan_id":"`+small+`"}`)), http.StatusOK)
	req := e.request(http.MethodGet, "/admin/instances", "")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	r := e.send(req)
	if r.status != http.StatusOK {
		t.Fatalf("GET /admin/instances: %d %s", r.status, r.body)
	}
	var out api.InstanceList
	var raw struct{ Instances []map[string]json.RawMessage }
	if json.Unmarshal(r.body, &out) != nil || json.Unmarshal(r.body, &raw) != nil || len(out.Instances) != 2 {
		t.Fatalf("GET /admin/instances: %s", r.body)
	}
	docs := e.instanceDocs()
	for i, iv := range out.Instances {
		rec := docs[iv.ID]
		if _, ok := raw.Instances[i]["bindings"]; !ok {
			t.Errorf("%s: no bindings field (none is 0, not absent): %s", iv.ID, r.body)
		}
		if iv.MaintenanceVersion == "" || iv.MaintenanceVersion != rec.MaintenanceVersion {
			t.Errorf("%s: maintenance_version %q, the record's %q", iv.ID, iv.MaintenanceVersion, rec.MaintenanceVersion)
		}
		if iv.OrganizationGUID != "org-1" || iv.SpaceGUID != "space-1" {
			t.Errorf("%s: organization %q space %q, want the provision's", iv.ID, iv.OrganizationGUID, iv.SpaceGUID)
		}
		switch iv.ID {
		case "moved":
			if iv.Bindings != 3 || iv.PlanID != large || iv.PreviousPlanID != small || !iv.UpdatedAt.Equal(rec.UpdatedAt) || iv.UpdatedAt.IsZero() {
				t.Errorf("moved: bindings %d, plan %s after %s, updated_at %v (record's %v); want 3, %s after %s", iv.Bindings, iv.PlanID, iv.PreviousPlanID, iv.UpdatedAt, rec.UpdatedAt, large, small)
			}
		case "still":
			if _, ok := raw.Instances[i]["updated_at"]; ok || iv.Bindings != 0 || iv.PreviousPlanID != "" {
				t.Errorf("still: %s; want 0 bindings, no updated_at, no previous_plan_id", raw.Instances[i])
			}
		}
	}
}
