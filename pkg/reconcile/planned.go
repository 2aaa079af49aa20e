package reconcile

import (
	"fmt"
	"strings"

	"github.com/specsync/specsync/pkg/store"
)

// plannedChanges lists, by name, what carrying out the plan would change
// (at most store.MaxPlannedChanges), for a dry run's report.
func plannedChanges(p Plan) []store.PlannedChange {
	var out []store.PlannedChange
	add := func(c store.PlannedChange) {
		if len(out) < store.MaxPlannedChanges {
			out = append(out, c)
		}
	}
	cand := func(kind string, c Candidate, detail string) {
		pc := store.PlannedChange{Change: kind, SpecID: c.ID, Entry: c.Entry, Detail: detail}
		if c.Spec != nil {
			pc.Name = c.Spec.Name
			if pc.SpecID == "" {
				pc.SpecID = c.Spec.ID
			}
		}
		add(pc)
	}
	for _, c := range p.Create {
		cand("create", c, "")
	}
	for _, c := range p.Update {
		cand("update", c, c.Digest)
	}
	for _, c := range p.Unmark {
		cand("unmark", c, "")
	}
	for _, c := range p.Repair {
		cand("repair", c, "")
	}
	for _, s := range p.Mark {
		add(store.PlannedChange{Change: "mark", SpecID: s.ID, Name: s.Name, Entry: s.Entry})
	}
	for _, s := range p.Delete {
		add(store.PlannedChange{Change: "delete", SpecID: s.ID, Name: s.Name, Entry: s.Entry})
	}
	for _, s := range p.Keep {
		add(store.PlannedChange{Change: "keep", SpecID: s.ID, Name: s.Name, Entry: s.Entry, Detail: fmt.Sprintf("%d instances", s.Instances)})
	}
	for _, h := range p.HoldBack {
		cand("hold_back", h.Candidate, strings.Join(h.Blockers, "; "))
	}
	return out
}
