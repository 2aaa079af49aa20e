package spec_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/spec"
)

// The plan-change rule of PATCH: a plan's plan_updateable, else its
// updates_to, else the spec's plan_updateable; updates_to limits where to.
func TestPlanChange(t *testing.T) {
	plans := func(small, large, huge spec.Plan) []spec.Plan {
		small.Name, small.ID, large.Name, large.ID, huge.Name, huge.ID = "small", "p-small", "large", "p-large", "huge", "p-huge"
		return []spec.Plan{small, large, huge}
	}
	cases := []struct {
		name     string
		spec     *bool
		plans    []spec.Plan
		from, to string
		refused  string // "" allowed; else a substring of the reason
	}{
		{name: "nothing said: not updateable", plans: plans(spec.Plan{}, spec.Plan{}, spec.Plan{}), from: "p-small", to: "p-large", refused: "is not plan_updateable"},
		{name: "the same plan is no change", plans: plans(spec.Plan{}, spec.Plan{}, spec.Plan{}), from: "p-small", to: "p-small"},
		{name: "updates_to allows its targets", plans: plans(spec.Plan{UpdatesTo: []string{"large"}}, spec.Plan{}, spec.Plan{}), from: "p-small", to: "p-large"},
		{name: "updates_to refuses the others", plans: plans(spec.Plan{UpdatesTo: []string{"large"}}, spec.Plan{}, spec.Plan{}), from: "p-small", to: "p-huge", refused: "updates only to large, not to huge"},
		{name: "updates_to is per plan", plans: plans(spec.Plan{UpdatesTo: []string{"large"}}, spec.Plan{}, spec.Plan{}), from: "p-large", to: "p-small", refused: "is not plan_updateable"},
		{name: "spec true: anywhere", spec: ptr(true), plans: plans(spec.Plan{}, spec.Plan{}, spec.Plan{}), from: "p-huge", to: "p-small"},
		{name: "spec true, plan false", spec: ptr(true), plans: plans(spec.Plan{PlanUpdateable: ptr(false)}, spec.Plan{}, spec.Plan{}), from: "p-small", to: "p-large", refused: "is not plan_updateable"},
		{name: "spec false, plan true", spec: ptr(false), plans: plans(spec.Plan{PlanUpdateable: ptr(true)}, spec.Plan{}, spec.Plan{}), from: "p-small", to: "p-huge"},
		{name: "spec false, updates_to wins", spec: ptr(false), plans: plans(spec.Plan{UpdatesTo: []string{"huge"}}, spec.Plan{}, spec.Plan{}), from: "p-small", to: "p-huge"},
		{name: "spec true still bounded by updates_to", spec: ptr(true), plans: plans(spec.Plan{UpdatesTo: []string{"huge"}}, spec.Plan{}, spec.Plan{}), from: "p-small", to: "p-large", refused: "updates only to huge"},
		{name: "unknown target", spec: ptr(true), plans: plans(spec.Plan{}, spec.Plan{}, spec.Plan{}), from: "p-small", to: "p-gone", refused: "has no plan p-gone"},
		{name: "unknown source", spec: ptr(true), plans: plans(spec.Plan{}, spec.Plan{}, spec.Plan{}), from: "p-gone", to: "p-small", refused: "is not a plan of service"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &spec.Spec{Name: "db", ID: "db-id", PlanUpdateable: tc.spec, Plans: tc.plans}
			got := s.PlanChange(tc.from, tc.to)
			switch {
			case tc.refused == "" && got != "":
				t.Fatalf("refused: %s", got)
			case tc.refused != "" && !strings.Contains(got, tc.refused):
				t.Fatalf("reason %q, want it to say %q", got, tc.refused)
			}
		})
	}
}

// plan_updateable is read from YAML on the spec and on a plan, and a spec
// without it encodes as before (its digest does not change).
func TestParsePlanUpdateable(t *testing.T) {
	s, err := spec.Parse([]byte("name: db\ndescription: d\nplan_updateable: true\nplans:\n  - name: a\n    description: a\n    plan_updateable: false\n  - name: b\n    description: b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.PlanUpdateable == nil || !*s.PlanUpdateable || s.Plans[0].PlanUpdateable == nil || *s.Plans[0].PlanUpdateable || s.Plans[1].PlanUpdateable != nil {
		t.Fatalf("parsed %+v", s)
	}
	if _, err := spec.Parse([]byte("name: db\ndescription: d\nplan_updateable: maybe\nplans:\n  - name: a\n    description: a\n")); err == nil || !strings.Contains(err.Error(), "plan_updateable") {
		t.Fatalf("a non-boolean plan_updateable: %v", err)
	}
	plain, err := spec.Parse([]byte("name: db\ndescription: d\nplans:\n  - name: a\n    description: a\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(plain)
	if err != nil || strings.Contains(string(b), "plan_updateable") {
		t.Fatalf("a spec without plan_updateable encodes it (so its digest would change): %s %v", b, err)
	}
}
