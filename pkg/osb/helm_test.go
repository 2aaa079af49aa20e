package osb_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
	"github.com/specsync/specsync/pkg/store"
)

// pgChart is a chart with two plans, small and large, or only small.
func pgChart(version string, plans ...string) helmtest.Chart {
	if len(plans) == 0 {
		plans = []string{"small", "large"}
	}
	var b strings.Builder
	for _, p := range plans {
		fmt.Fprintf(&b, "- {name: %s, description: the %s plan}\n", p, p)
	}
	return helmtest.Chart{Name: "pg", Version: version, Description: "PostgreSQL",
		Annotations: map[string]string{registry.PlansAnnotation: b.String()},
		Schema:      `{"type": "object", "properties": {"password": {"type": "string"}}}`}
}

// A Helm chart's version is its plans' maintenance_info, end to end: a
// chart repository reconciled by the runner, the catalog and the change
// feed, provision and PATCH. An upgrade is adopted and the catalog shows
// the new chart version while instances stay on theirs until a PATCH
// names it (another version: 422); an upgrade that drops a plan an
// instance uses is held back, and the old chart version keeps serving,
// until the instance goes.
func TestChartVersionIsMaintenanceInfo(t *testing.T) {
	e := newEnv(t, 0)
	repo := helmtest.NewRepo(t)
	repo.Add(t, pgChart("1.0.0"))
	runner := &reconcile.Runner{Store: e.st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	reg := reconcile.Registry{Name: testReg, Source: repo.Source(t, registry.HelmConfig{}), Policy: reconcile.Policy{MaxMarkShare: 0.5}}
	run := func() store.Run {
		t.Helper()
		r, err := runner.Reconcile(e.ctx, reg)
		if err != nil {
			t.Fatal(err)
		}
		e.commit()
		return r
	}
	versions := func() map[string]string {
		t.Helper()
		_, r := e.catalog()
		return maintenanceVersions(t, r.body)
	}
	if r := run(); r.Counts.Created != 1 {
		t.Fatalf("first run: %+v", r.Counts)
	}
	if got := versions(); got["pg/small"] != "1.0.0" || got["pg/large"] != "1.0.0" || len(got) != 2 {
		t.Fatalf("maintenance_info of chart 1.0.0: %v", got)
	}
	c, _ := e.catalog()
	svc := c.Services[0]
	small, large := svc.Plans[0].ID, svc.Plans[1].ID
	with := func(plan, version string) string {
		return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,`+guids+`,"maintenance_info":{"version":%q}}`, svc.ID, plan, version)
	}
	wantOSBError(t, e.do(http.MethodPut, "/v2/service_instances/wrong", with(small, "1.0.0.0")), http.StatusUnprocessableEntity, "MaintenanceInfoConflict")
	wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/on-small", with(small, "1.0.0")), http.StatusCreated)
	e.provision("on-large", svc.ID, large)
	if got := e.instanceDocs()["on-large"].MaintenanceVersion; got != "1.0.0" {
		t.Fatalf("a provision naming no version records %q", got)
	}

	// 1.1.0 keeps both plans: adopted, the catalog and the feed say so.
	before := e.commit()
	repo.Add(t, pgChart("1.1.0"))
	if r := run(); r.Counts.Updated != 1 || r.Counts.HeldBack != 0 {
		t.Fatalf("1.1.0: %+v", r.Counts)
	}
	if got := versions(); got["pg/small"] != "1.1.0" || got["pg/large"] != "1.1.0" {
		t.Fatalf("maintenance_info after adopting 1.1.0: %v", got)
	}
	var page api.ChangePage
	r := e.do(http.MethodGet, fmt.Sprintf("/v2/catalog/changes?since=%d", before), "")
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Changes) != 1 || page.Changes[0].Kind != api.ChangeUpdated ||
		page.Changes[0].Service.Plans[0].MaintenanceInfo.Version != "1.1.0" {
		t.Fatalf("the feed's change for 1.1.0: %s", r.body)
	}
	// Instances stay on 1.0.0 until a PATCH names the new version.
	if r := e.do(http.MethodGet, "/v2/service_instances/on-small", ""); !strings.Contains(string(r.body), `"maintenance_info":{"version":"1.0.0"}`) {
		t.Fatalf("GET on-small after the upgrade: %s", r.body)
	}
	for _, v := range []string{"1.0.0", "1.2.0", "1.1.0+other"} {
		wantUpdateError(t, e.patch("on-small", patchBody(svc.ID, "", `"maintenance_info":{"version":"`+v+`"}`)), http.StatusUnprocessableEntity, "MaintenanceInfoConflict", false)
	}
	wantEmptyObject(t, e.patch("on-small", patchBody(svc.ID, "", `"maintenance_info":{"version":"1.1.0"},"previous_values":{"maintenance_info":{"version":"1.0.0"}}`)), http.StatusOK)
	if got := e.instanceDocs()["on-small"].MaintenanceVersion; got != "1.1.0" {
		t.Fatalf("on-small after its upgrade: %q", got)
	}

	// 2.0.0 drops large, which on-large uses: held back, 1.1.0 keeps
	// serving, and 2.0.0 is no version a PATCH may name.
	repo.Add(t, pgChart("2.0.0", "small"))
	if r := run(); r.Counts.HeldBack != 1 || r.Counts.Updated != 0 || len(r.HeldBack) != 1 || !strings.Contains(strings.Join(r.HeldBack[0].Blockers, ";"), large) {
		t.Fatalf("2.0.0: %+v %+v", r.Counts, r.HeldBack)
	}
	if got := versions(); got["pg/small"] != "1.1.0" || got["pg/large"] != "1.1.0" {
		t.Fatalf("maintenance_info while 2.0.0 is held back: %v", got)
	}
	wantUpdateError(t, e.patch("on-small", patchBody(svc.ID, "", `"maintenance_info":{"version":"2.0.0"}`)), http.StatusUnprocessableEntity, "MaintenanceInfoConflict", false)

	// on-large goes: the next run adopts 2.0.0.
	wantEmptyObject(t, e.do(http.MethodDelete, "/v2/service_instances/on-large?service_id="+svc.ID+"&plan_id="+large, ""), http.StatusOK)
	if r := run(); r.Counts.Updated != 1 || r.Counts.HeldBack != 0 {
		t.Fatalf("after on-large went: %s %+v %+v", r.Result, r.Counts, r.Guard)
	}
	if got := versions(); got["pg/small"] != "2.0.0" || len(got) != 1 {
		t.Fatalf("maintenance_info after adopting 2.0.0: %v", got)
	}
	wantEmptyObject(t, e.patch("on-small", patchBody(svc.ID, "", `"maintenance_info":{"version":"2.0.0"}`)), http.StatusOK)
	if c, _ := e.catalog(); len(c.Services) != 1 || c.Services[0].ID != svc.ID {
		t.Fatalf("the service after 2.0.0: %+v (id was %s)", c.Services, svc.ID)
	}
}
