package reconcile

import (
	"context"
	"fmt"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

// DryRun fetches the registry and plans a run without writing anything:
// no spec, no status, no lease, no revision. Its counts are what a real
// run would do now (created, updated, unmarked, repaired, marked, deleted,
// kept); a failed fetch is reported as it would be, without being
// recorded.
func (r *Runner) DryRun(ctx context.Context, reg Registry) (store.Run, error) {
	run := r.newRun(reg, "dry-run")
	run.dry = true
	err := run.do(ctx, run.fetch, run.know, run.assumePlanned, run.findBlockers)
	rec := run.report(err)
	run.summarize(rec)
	if err != nil {
		return rec, fmt.Errorf("dry run %s: %w", reg.Name, err)
	}
	if rec.Result == api.ResultDryRun {
		rec.Planned = plannedChanges(run.k.plan) // planned.go: the plan by name, for the operator's diff
	}
	return rec, nil
}

// assumePlanned is, for a dry run, what the writes would do if each went
// as planned.
func (r *run) assumePlanned(context.Context) (bool, error) {
	r.done = plannedOutcomes(r.k.plan)
	return false, nil
}

// plannedOutcomes are the outcomes of carrying out p with every write
// going as planned: no conflict, no spec gone or changed meanwhile, every
// marked spec unreferenced still.
func plannedOutcomes(p Plan) outcomes {
	o := outcomes{keep: p.Keep, unchanged: p.Unchanged, marks: make([]bool, len(p.Mark))}
	for _, d := range p.Delete {
		o.deletes = append(o.deletes, deletion{spec: d, outcome: store.Deleted})
	}
	as := func(cs []Candidate, outcome store.UpsertOutcome) {
		for _, c := range cs {
			o.offers = append(o.offers, offering{c: c, res: store.UpsertResult{Outcome: outcome}})
		}
	}
	as(p.Create, store.Created)
	as(p.Update, store.Updated)
	as(p.Unmark, store.Unmarked)
	as(p.Repair, store.Repaired)
	for i := range o.marks {
		o.marks[i] = true
	}
	return o
}
