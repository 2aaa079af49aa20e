package reconcile

import (
	"fmt"
	"sort"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

// outcomes are what a run's steps did, each step adding its own as it
// goes: a run that failed part-way holds those of the writes it made. The
// run's counts, the specs it kept, the specs that stay marked and the
// manifest it leaves are all worked out from them.
type outcomes struct {
	keep      []Stored   // step 3: the marked specs the plan keeps (instances use them)
	deletes   []deletion // step 3: each delete, in plan order
	unchanged int        // step 4: the entries the plan found unchanged (nothing to write)
	offers    []offering // step 4: each create and upsert, in plan order
	// held are the new versions held back, with the instances each would
	// strand; holds is what recording each did (HoldBack), in order.
	held     []store.HeldBackSpec
	holds    []store.HoldOutcome
	errorsOn []string // the specs an entry error was recorded on
	marks    []bool   // step 5: whether each spec the plan marks was marked
	// changes is how many catalog changes the run wrote, counted when all
	// its writes are done (changesWritten).
	changes int
}

// deletion is what deleting a marked spec did; refs are the instances
// that still use it when it was kept.
type deletion struct {
	spec    Stored
	outcome store.DeleteOutcome
	refs    int64
}

// offering is what writing an offered candidate did.
type offering struct {
	c   Candidate
	res store.UpsertResult
}

// runCounts are a run's counts, from what its steps did.
func runCounts(o outcomes) store.RunCounts {
	c := store.RunCounts{Unchanged: o.unchanged, Kept: len(keptSpecs(o)), Changes: o.changes}
	for _, d := range o.deletes {
		if d.outcome == store.Deleted {
			c.Deleted++
		}
	}
	for _, u := range o.offers {
		switch u.res.Outcome {
		case store.Created:
			c.Created++
		case store.Updated:
			c.Updated++
		case store.Unmarked:
			c.Unmarked++
		case store.Repaired:
			c.Repaired++
		case store.Unchanged:
			c.Unchanged++
		case store.Conflict:
			c.Conflicts++
		}
	}
	for _, h := range o.holds {
		if h == store.HeldUnmarked {
			c.Unmarked++
		}
	}
	for _, ok := range o.marks {
		if ok {
			c.Marked++
		}
	}
	return c
}

// changesWritten is how many catalog changes the writes made: every
// create, update, unmark, mark and delete, and each version held back for
// the first time. Each left a pending change for the committer to number.
func changesWritten(o outcomes) int {
	c := runCounts(o)
	n := c.Created + c.Updated + c.Unmarked + c.Marked + c.Deleted
	for _, h := range o.holds {
		if h == store.HeldNew {
			n++
		}
	}
	return n
}

// keptSpecs are the marked specs the run kept because instances use them:
// the plan's, then those a delete found referenced.
func keptSpecs(o outcomes) []store.KeptSpec {
	var out []store.KeptSpec
	for _, s := range o.keep {
		out = append(out, store.KeptSpec{SpecID: s.ID, Name: s.Name, Instances: int64(s.Instances)})
	}
	for _, d := range o.deletes {
		if d.outcome == store.Referenced {
			out = append(out, store.KeptSpec{SpecID: d.spec.ID, Name: d.spec.Name, Instances: d.refs})
		}
	}
	return out
}

func sameKept(a, b []store.KeptSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// conflicts are the offered spec ids another registry owns.
func conflicts(o outcomes) []store.SpecConflict {
	var out []store.SpecConflict
	for _, u := range o.offers {
		if u.res.Outcome == store.Conflict {
			out = append(out, store.SpecConflict{SpecID: u.c.ID, Entry: u.c.Entry, Owner: u.res.Owner})
		}
	}
	return out
}

// entryErrors are the run's entry errors: the plan's, then one for each
// conflict (the entry offers a spec it cannot have).
func entryErrors(plan Plan, o outcomes) []store.EntryError {
	out := planErrors(plan)
	for _, u := range o.offers {
		if u.res.Outcome == store.Conflict {
			out = append(out, store.EntryError{Entry: u.c.Entry, Ref: u.c.Ref, SpecID: u.c.ID,
				Message: fmt.Sprintf("spec id %s is already owned by registry %q; the owner keeps it", u.c.ID, u.res.Owner)})
		}
	}
	return out
}

// markedAfter is how many of the registry's specs stay marked after the
// run, from those it knew (stored) and what it did: it drives the short
// path of the next run with an unchanged listing.
func markedAfter(stored []Stored, o outcomes) int {
	n := 0
	wasMarked := map[string]bool{}
	for _, s := range stored {
		if s.State == api.SpecMarked {
			n++
			wasMarked[s.ID] = true
		}
	}
	for _, d := range o.deletes {
		if d.outcome == store.Deleted {
			n--
		}
	}
	for _, u := range o.offers {
		if (u.res.Outcome == store.Updated || u.res.Outcome == store.Unmarked) && wasMarked[u.c.ID] {
			n--
		}
	}
	for i, h := range o.holds {
		if h == store.HeldUnmarked && wasMarked[o.held[i].SpecID] {
			n--
		}
	}
	for _, ok := range o.marks {
		if ok {
			n++
		}
	}
	return max(n, 0)
}

// manifestAfter is the registry's manifest as the run leaves it: what it
// knew of every spec, followed through each of its writes in order.
func manifestAfter(k knowledge, o outcomes) manifest {
	m := newManifest(k.stored)
	for _, d := range o.deletes {
		if d.outcome == store.Deleted {
			m.remove(d.spec.ID)
		}
	}
	for _, u := range o.offers {
		m.offered(u.c, u.res.Outcome)
	}
	for i, h := range o.holds {
		m.held(o.held[i].SpecID, h)
	}
	for _, id := range o.errorsOn {
		m.dirty(id)
	}
	for i, ok := range o.marks {
		m.marked(k.plan.Mark[i].ID, ok)
	}
	return m
}

// MaxRecordedErrors bounds the entry errors a status keeps (sorted, so the
// same ones are kept every time).
const MaxRecordedErrors = 100

// planErrors are the plan's entry errors in the store's shape.
func planErrors(plan Plan) []store.EntryError {
	out := make([]store.EntryError, 0, len(plan.Errors))
	for _, e := range plan.Errors {
		out = append(out, store.EntryError(e))
	}
	return out
}

// recordErrors puts entry errors on a run: sorted, counted in full, and
// capped at MaxRecordedErrors so a status document stays small.
func recordErrors(run *store.Run, errs []store.EntryError) {
	sortEntryErrors(errs)
	run.Counts.EntryErrors = len(errs)
	run.ErrorsTotal = len(errs)
	if len(errs) > MaxRecordedErrors {
		errs = errs[:MaxRecordedErrors]
	}
	run.Errors = errs
}

func sortEntryErrors(es []store.EntryError) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].Entry != es[j].Entry {
			return es[i].Entry < es[j].Entry
		}
		return es[i].Message < es[j].Message
	})
}
