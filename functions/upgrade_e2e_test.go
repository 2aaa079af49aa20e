package functions_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
)

func dbIndex(plans ...string) string {
	var b strings.Builder
	b.WriteString("- name: db\n  description: the db service\n  plans:\n")
	for _, p := range plans {
		fmt.Fprintf(&b, "    - name: %s\n      description: the %s plan\n", p, p)
	}
	return b.String()
}

// planMaintenance is every plan of service name with its maintenance_info
// version, "plan@version".
func planMaintenance(t *testing.T, body []byte, name string) []string {
	t.Helper()
	var c catalog.Catalog
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range c.Services {
		if s.Name == name {
			for _, p := range s.Plans {
				version := ""
				if p.MaintenanceInfo != nil {
					version = p.MaintenanceInfo.Version
				}
				out = append(out, p.Name+"@"+version)
			}
		}
	}
	return out
}

// No half-upgrades, through the local stack: a new version dropping a
// plan an instance uses is held back (the catalog keeps the old plans and
// maintenance_info, the status and the feed name the version and the
// instance); once the instance is gone the next bootstrap adopts it and
// maintenance_info advances.
func TestE2EHalfUpgradeHeldBack(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t)
	a.setBody(dbIndex("small", "large"))
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))
	s.bootstrap()
	cat := s.do(http.MethodGet, "/v2/catalog", "broker", nil)
	if got := planMaintenance(t, cat.body, "db"); !slices.Equal(got, []string{"small@1.0.0", "large@1.0.0"}) {
		t.Fatalf("first version: %v", got)
	}
	c, _ := s.catalog()
	var dbID, largeID string
	for _, svc := range c.Services {
		if svc.Name == "db" {
			dbID = svc.ID
			for _, p := range svc.Plans {
				if p.Name == "large" {
					largeID = p.ID
				}
			}
		}
	}
	put := s.do(http.MethodPut, "/v2/service_instances/big-1", "broker",
		strings.NewReader(fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1","maintenance_info":{"version":"1.0.0"}}`, dbID, largeID)))
	if put.status != http.StatusCreated {
		t.Fatalf("provision: %d %s", put.status, put.body)
	}
	rev := cat.header.Get(api.RevisionHeader)

	a.setBody(dbIndex("small")) // drops "large"
	s.bootstrap()
	cat = s.do(http.MethodGet, "/v2/catalog", "broker", nil)
	if got := planMaintenance(t, cat.body, "db"); !slices.Equal(got, []string{"small@1.0.0", "large@1.0.0"}) {
		t.Fatalf("a stranding version was adopted: %v", got)
	}
	regs := s.do(http.MethodGet, "/registries", "admin", nil)
	if !strings.Contains(string(regs.body), `"held_back":[{`) || !strings.Contains(string(regs.body), `"instances":["big-1"]`) {
		t.Fatalf("/registries does not say what is held back and by which instance: %s", regs.body)
	}
	feed := s.do(http.MethodGet, "/v2/catalog/changes?since="+rev, "broker", nil)
	var page api.ChangePage
	feed.json(t, &page)
	if len(page.Changes) != 1 || page.Changes[0].Kind != api.ChangeHeldBack || !strings.Contains(string(feed.body), `"big-1"`) {
		t.Fatalf("the feed does not carry the hold: %s", feed.body)
	}

	del := s.do(http.MethodDelete, "/v2/service_instances/big-1?service_id="+dbID+"&plan_id="+largeID, "broker", nil)
	if del.status != http.StatusOK {
		t.Fatalf("deprovision: %d %s", del.status, del.body)
	}
	op := s.bootstrap()
	if r := op.result(t, "team-a"); r.Counts.Updated != 1 {
		t.Fatalf("released version not adopted: %+v", r)
	}
	cat = s.do(http.MethodGet, "/v2/catalog", "broker", nil)
	if got := planMaintenance(t, cat.body, "db"); !slices.Equal(got, []string{"small@2.0.0"}) {
		t.Fatalf("after adoption: %v", got)
	}
}
