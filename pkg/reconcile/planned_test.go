package reconcile

import (
	"fmt"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

func TestPlannedChanges(t *testing.T) {
	p := Plan{
		Create:   []Candidate{cand("new", "N", "d1")},
		Update:   []Candidate{cand("changed", "C", "d2")},
		Unmark:   []Candidate{cand("back", "B", "d3")},
		Mark:     []Stored{{ID: "M", Name: "gone", Entry: "gone"}},
		Delete:   []Stored{{ID: "D", Name: "old", Entry: "old"}},
		Keep:     []Stored{{ID: "K", Name: "pinned", Entry: "pinned", Instances: 2}},
		HoldBack: []HeldBack{{Candidate: cand("held", "H", "d4"), Blockers: []string{"plan small: 1 instance"}}},
	}
	got := plannedChanges(p)
	want := []store.PlannedChange{
		{Change: api.PlannedCreate, SpecID: "N", Name: "new", Entry: "new"},
		{Change: api.PlannedUpdate, SpecID: "C", Name: "changed", Entry: "changed", Detail: "d2"},
		{Change: api.PlannedUnmark, SpecID: "B", Name: "back", Entry: "back"},
		{Change: api.PlannedMark, SpecID: "M", Name: "gone", Entry: "gone"},
		{Change: api.PlannedDelete, SpecID: "D", Name: "old", Entry: "old"},
		{Change: api.PlannedKeep, SpecID: "K", Name: "pinned", Entry: "pinned", Detail: "2 instances"},
		{Change: api.PlannedHoldBack, SpecID: "H", Name: "held", Entry: "held", Detail: "plan small: 1 instance"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("planned changes\n got %+v\nwant %+v", got, want)
	}
	var many Plan
	for i := 0; i < store.MaxPlannedChanges+5; i++ {
		many.Create = append(many.Create, cand(fmt.Sprint("s", i), fmt.Sprint("id", i), "d"))
	}
	if n := len(plannedChanges(many)); n != store.MaxPlannedChanges {
		t.Fatalf("%d planned changes, want the cap %d", n, store.MaxPlannedChanges)
	}
	if plannedChanges(Plan{Unchanged: 3}) != nil {
		t.Fatal("an unchanged plan lists changes")
	}
}
