package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Plan changes (OSB's PATCH of an instance's plan_id) are governed by two
// fields: APB's updates_to, the names of the plans a plan may move to, and
// OSB's plan_updateable, on the spec (the default) and on a plan (which
// takes precedence). A plan is updateable when its own plan_updateable
// says so, else when it lists updates_to, else when the spec's
// plan_updateable says so; an updateable plan moves to the plans its
// updates_to names, or to any other plan of the spec when it names none.
// So an APB spec that only lists updates_to behaves as it always did, and
// an OSB-minded author can say plan_updateable: true once for the spec.

// Updateable reports whether an instance on p may change plans at all.
func (s *Spec) Updateable(p Plan) bool {
	if p.PlanUpdateable != nil {
		return *p.PlanUpdateable
	}
	if len(p.UpdatesTo) > 0 {
		return true
	}
	return s.PlanUpdateable != nil && *s.PlanUpdateable
}

// ServiceUpdateable is the service-wide plan_updateable the catalog
// renders: the spec's own value when it has one, else whether any plan is
// updateable (OSB has one boolean per service; plans that differ from it
// say so themselves).
func (s *Spec) ServiceUpdateable() bool {
	if s.PlanUpdateable != nil {
		return *s.PlanUpdateable
	}
	return slices.ContainsFunc(s.Plans, s.Updateable)
}

// PlanChange says why an instance on plan from may not move to plan to
// (both ids of this spec), or "" when it may. Moving to the plan it is on
// is no change and always allowed.
func (s *Spec) PlanChange(from, to string) string {
	if from == to {
		return ""
	}
	src, ok := s.PlanByID(from)
	if !ok {
		return fmt.Sprintf("the instance's plan %s is not a plan of service %s", from, s.ID)
	}
	dst, ok := s.PlanByID(to)
	if !ok {
		return fmt.Sprintf("service %s has no plan %s", s.ID, to)
	}
	if !s.Updateable(src) {
		return fmt.Sprintf("plan %s (%s) of service %s is not plan_updateable: its instances cannot change plans", src.Name, src.ID, s.Name)
	}
	if len(src.UpdatesTo) > 0 && !slices.Contains(src.UpdatesTo, dst.Name) {
		return fmt.Sprintf("plan %s of service %s updates only to %s, not to %s", src.Name, s.Name, strings.Join(src.UpdatesTo, ", "), dst.Name)
	}
	return ""
}
