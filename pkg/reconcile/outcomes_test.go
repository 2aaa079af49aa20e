package reconcile

import (
	"testing"

	"github.com/specsync/specsync/pkg/store"
)

// offers are offered candidates a-, b-, ... with the given outcomes.
func offers(outcomes ...store.UpsertOutcome) []offering {
	out := make([]offering, len(outcomes))
	for i, o := range outcomes {
		id := string(rune('a'+i)) + "-id"
		out[i] = offering{c: cand(id[:1], id, "d"), res: store.UpsertResult{Outcome: o}}
		if o == store.Conflict {
			out[i].res.Owner = "other"
		}
	}
	return out
}

func deletions(specs []Stored, outcomes ...store.DeleteOutcome) []deletion {
	out := make([]deletion, len(outcomes))
	for i, o := range outcomes {
		out[i] = deletion{spec: specs[i], outcome: o}
		if o == store.Referenced {
			out[i].refs = 2
		}
	}
	return out
}

func held(ids ...string) []store.HeldBackSpec {
	var out []store.HeldBackSpec
	for _, id := range ids {
		out = append(out, store.HeldBackSpec{SpecID: id, Digest: "d-next"})
	}
	return out
}

func TestRunCounts(t *testing.T) {
	m := []Stored{marked("m1", "m1", 0), marked("m2", "m2", 0), marked("m3", "m3", 0)}
	cases := []struct {
		name string
		o    outcomes
		want store.RunCounts
	}{
		{"nothing done", outcomes{}, store.RunCounts{}},
		{"the plan's unchanged and kept, before any write", outcomes{unchanged: 4, keep: []Stored{marked("k", "k", 1)}},
			store.RunCounts{Unchanged: 4, Kept: 1}},
		{"deletes: a referenced one is kept, a skipped one is neither", outcomes{deletes: deletions(m, store.Deleted, store.Referenced, store.Skipped)},
			store.RunCounts{Deleted: 1, Kept: 1}},
		{"every upsert outcome", outcomes{unchanged: 2, offers: offers(store.Created, store.Created, store.Updated, store.Unmarked, store.Repaired, store.Unchanged, store.Conflict)},
			store.RunCounts{Created: 2, Updated: 1, Unmarked: 1, Repaired: 1, Unchanged: 3, Conflicts: 1}},
		{"a hold that unmarks counts as an unmark", outcomes{held: held("a", "b", "c"), holds: []store.HoldOutcome{store.HeldUnmarked, store.HeldNew, store.HeldSame}},
			store.RunCounts{Unmarked: 1}},
		{"marks not made are not counted", outcomes{marks: []bool{true, false, true}},
			store.RunCounts{Marked: 2}},
		{"changes as counted when the writes were done", outcomes{offers: offers(store.Created), changes: 1},
			store.RunCounts{Created: 1, Changes: 1}},
	}
	for _, c := range cases {
		if got := runCounts(c.o); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestChangesWritten(t *testing.T) {
	m := []Stored{marked("m1", "m1", 0), marked("m2", "m2", 0)}
	cases := []struct {
		name string
		o    outcomes
		want int
	}{
		{"nothing done", outcomes{}, 0},
		{"repairs, unchanged and conflicts change nothing the catalog sees",
			outcomes{unchanged: 3, offers: offers(store.Repaired, store.Unchanged, store.Conflict)}, 0},
		{"creates, updates and unmarks", outcomes{offers: offers(store.Created, store.Updated, store.Unmarked)}, 3},
		{"a delete, not a kept one", outcomes{deletes: deletions(m, store.Deleted, store.Referenced)}, 1},
		{"a version held back for the first time, and a hold that unmarks",
			outcomes{held: held("a", "b", "c"), holds: []store.HoldOutcome{store.HeldNew, store.HeldUnmarked, store.HeldSame}}, 2},
		{"marks made", outcomes{marks: []bool{true, false}}, 1},
	}
	for _, c := range cases {
		if got := changesWritten(c.o); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestMarkedAfter(t *testing.T) {
	m1, m2 := marked("m1", "m1", 0), marked("m2", "m2", 0)
	a := active("a-id", "a", "d")
	cases := []struct {
		name   string
		stored []Stored
		o      outcomes
		want   int
	}{
		{"nothing known", nil, outcomes{}, 0},
		{"the marked ones known stay marked", []Stored{m1, m2, a}, outcomes{}, 2},
		{"a deleted one goes, a kept one stays", []Stored{m1, m2}, outcomes{deletes: deletions([]Stored{m1, m2}, store.Deleted, store.Referenced)}, 1},
		{"an update or an unmark of a marked spec unmarks it", []Stored{marked("a-id", "a", 0), marked("b-id", "b", 0), m1},
			outcomes{offers: offers(store.Updated, store.Unmarked)}, 1},
		{"an update of an active spec unmarks nothing", []Stored{a, m1}, outcomes{offers: offers(store.Updated)}, 1},
		{"a hold that unmarks a marked spec", []Stored{m1, m2},
			outcomes{held: held("m1", "m2"), holds: []store.HoldOutcome{store.HeldUnmarked, store.HeldSkipped}}, 1},
		{"marks made add up", []Stored{a, m1}, outcomes{marks: []bool{true, false}}, 2},
		{"never below zero", nil, outcomes{deletes: deletions([]Stored{m1}, store.Deleted)}, 0},
	}
	for _, c := range cases {
		if got := markedAfter(c.stored, c.o); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// A dry run counts what a real run would do if every write went as
// planned.
func TestPlannedOutcomesCountThePlan(t *testing.T) {
	p := Plan{
		Create: []Candidate{cand("a", "A", "d"), cand("b", "B", "d")}, Update: []Candidate{cand("c", "C", "d")},
		Unmark: []Candidate{cand("d", "D", "d")}, Repair: []Candidate{cand("e", "E", "d")}, Unchanged: 5,
		Mark: []Stored{active("F", "f", "d")}, Delete: []Stored{marked("G", "g", 0)}, Keep: []Stored{marked("H", "h", 1)},
	}
	want := store.RunCounts{Created: 2, Updated: 1, Unmarked: 1, Repaired: 1, Unchanged: 5, Marked: 1, Deleted: 1, Kept: 1}
	if got := runCounts(plannedOutcomes(p)); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}
