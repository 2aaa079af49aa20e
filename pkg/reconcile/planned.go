package reconcile

import (
	"fmt"
	"strings"

	"github.com/specsync/specsync/pkg/api"
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
	cand := func(kind api.PlannedKind, c Candidate, detail string) {
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
		cand(api.PlannedCreate, c, "")
	}
	for _, c := range p.Update {
		cand(api.PlannedUpdate, c, c.Digest)
	}
	for _, c := range p.Unmark {
		cand(api.PlannedUnmark, c, "")
	}
	for _, c := range p.Repair {
		cand(api.PlannedRepair, c, "")
	}
	for _, s := range p.Mark {
		add(store.PlannedChange{Change: api.PlannedMark, SpecID: s.ID, Name: s.Name, Entry: s.Entry})
	}
	for _, s := range p.Delete {
		add(store.PlannedChange{Change: api.PlannedDelete, SpecID: s.ID, Name: s.Name, Entry: s.Entry})
	}
	for _, s := range p.Keep {
		add(store.PlannedChange{Change: api.PlannedKeep, SpecID: s.ID, Name: s.Name, Entry: s.Entry, Detail: fmt.Sprintf("%d instances", s.Instances)})
	}
	for _, h := range p.HoldBack {
		cand(api.PlannedHoldBack, h.Candidate, strings.Join(h.Blockers, "; "))
	}
	return out
}
