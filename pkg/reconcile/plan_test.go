package reconcile

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/spec"
)

func cand(entry, id, digest string) Candidate {
	return Candidate{Entry: entry, Ref: "ref/" + entry, ID: id, Digest: digest, Name: entry, Spec: &spec.Spec{Name: entry, ID: id}}
}

func bad(entry, msg string) Candidate {
	return Candidate{Entry: entry, Ref: "ref/" + entry, Err: errors.New(msg)}
}

func active(id, entry, digest string) Stored {
	return Stored{ID: id, Entry: entry, Name: entry, Digest: digest, State: api.SpecActive}
}

func marked(id, entry string, instances int) Stored {
	return Stored{ID: id, Entry: entry, Name: entry, Digest: "d-" + id, State: api.SpecMarked, Instances: instances}
}

func withError(s Stored, msg string) Stored { s.EntryError = msg; return s }

// summary is a plan reduced to ids, so cases read as a table.
type summary struct {
	Create, Update, Unmark, Repair, Mark, Delete, Keep []string
	Unchanged                                          int
	ErrorOn                                            []string // id=message
	Errors                                             []string // entry: message
	Guarded                                            bool
}

func summarize(p Plan) summary {
	ids := func(cs []Candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	sids := func(ss []Stored) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	s := summary{Create: ids(p.Create), Update: ids(p.Update), Unmark: ids(p.Unmark), Repair: ids(p.Repair),
		Mark: sids(p.Mark), Delete: sids(p.Delete), Keep: sids(p.Keep), Unchanged: p.Unchanged, Guarded: p.Guarded != ""}
	for _, e := range p.ErrorOn {
		s.ErrorOn = append(s.ErrorOn, e.SpecID+"="+e.Message)
	}
	for _, e := range p.Errors {
		s.Errors = append(s.Errors, e.Entry+": "+e.Message)
	}
	return s
}

func TestMakePlan(t *testing.T) {
	def := Policy{MaxMarkShare: 0.5}
	cases := []struct {
		name    string
		listing []Candidate
		stored  []Stored
		policy  Policy
		want    summary
	}{
		{name: "nothing at all", want: summary{}},
		{name: "new entry is created",
			listing: []Candidate{cand("a", "A", "d1")},
			want:    summary{Create: []string{"A"}}},
		{name: "same digest writes nothing",
			listing: []Candidate{cand("a", "A", "d1")},
			stored:  []Stored{active("A", "a", "d1")},
			want:    summary{Unchanged: 1}},
		{name: "changed digest is updated",
			listing: []Candidate{cand("a", "A", "d2")},
			stored:  []Stored{active("A", "a", "d1")},
			want:    summary{Update: []string{"A"}}},
		{name: "marked spec offered again is unmarked",
			listing: []Candidate{cand("a", "A", "d-A")},
			stored:  []Stored{marked("A", "a", 0)},
			want:    summary{Unmark: []string{"A"}}},
		{name: "marked spec offered again with new content is updated (and so unmarked)",
			listing: []Candidate{cand("a", "A", "new")},
			stored:  []Stored{marked("A", "a", 0)},
			want:    summary{Update: []string{"A"}}},
		{name: "active spec no longer offered is marked",
			listing: []Candidate{cand("a", "A", "d1"), cand("b", "B", "d1")},
			stored:  []Stored{active("A", "a", "d1"), active("B", "b", "d1"), active("C", "c", "d1")},
			want:    summary{Unchanged: 2, Mark: []string{"C"}}},
		{name: "marked unreferenced spec is deleted",
			listing: []Candidate{cand("a", "A", "d1")},
			stored:  []Stored{active("A", "a", "d1"), marked("M", "m", 0)},
			want:    summary{Unchanged: 1, Delete: []string{"M"}}},
		{name: "marked referenced spec is kept",
			listing: []Candidate{cand("a", "A", "d1")},
			stored:  []Stored{active("A", "a", "d1"), marked("M", "m", 2)},
			want:    summary{Unchanged: 1, Keep: []string{"M"}}},
		{name: "broken entry keeps its last good version unmarked and records the error",
			listing: []Candidate{cand("a", "A", "d1"), bad("b", "bad label")},
			stored:  []Stored{active("A", "a", "d1"), active("B", "b", "d1")},
			want:    summary{Unchanged: 1, ErrorOn: []string{"B=bad label"}, Errors: []string{"b: bad label"}}},
		{name: "broken entry protects a marked spec from deletion",
			listing: []Candidate{cand("a", "A", "d1"), bad("m", "bad label")},
			stored:  []Stored{active("A", "a", "d1"), marked("M", "m", 0)},
			want:    summary{Unchanged: 1, ErrorOn: []string{"M=bad label"}, Errors: []string{"m: bad label"}}},
		{name: "an error already recorded is not written again",
			listing: []Candidate{cand("a", "A", "d1"), bad("b", "bad label")},
			stored:  []Stored{active("A", "a", "d1"), withError(active("B", "b", "d1"), "bad label")},
			want:    summary{Unchanged: 1, Errors: []string{"b: bad label"}}},
		{name: "a repaired entry clears its recorded error",
			listing: []Candidate{cand("b", "B", "d1")},
			stored:  []Stored{withError(active("B", "b", "d1"), "bad label")},
			want:    summary{Repair: []string{"B"}}},
		{name: "same id from a renamed entry is repaired, not recreated",
			listing: []Candidate{cand("b2", "B", "d1")},
			stored:  []Stored{active("B", "b", "d1")},
			want:    summary{Repair: []string{"B"}}},
		{name: "a broken entry with no stored spec is only reported",
			listing: []Candidate{cand("a", "A", "d1"), bad("new", "no plans")},
			want:    summary{Create: []string{"A"}, Errors: []string{"new: no plans"}}},
		{name: "duplicate id within one listing: first entry wins",
			listing: []Candidate{cand("b", "X", "d2"), cand("a", "X", "d1")},
			want:    summary{Create: []string{"X"}, Errors: []string{`b: spec id X is already offered by entry "a" of this registry`}}},
		{name: "duplicate name within one listing is an entry error",
			listing: []Candidate{cand("a", "A", "d1"), {Entry: "b", ID: "B", Digest: "d", Name: "a", Spec: &spec.Spec{Name: "a"}}},
			want:    summary{Create: []string{"A"}, Errors: []string{`b: spec name "a" is already offered by entry "a" of this registry`}}},
		{name: "empty listing while specs are stored: guarded, nothing marked or deleted",
			stored: []Stored{active("A", "a", "d1"), marked("M", "m", 0)},
			want:   summary{Guarded: true}},
		{name: "empty listing with only marked specs stored: deletion goes ahead",
			stored: []Stored{marked("M", "m", 0)},
			want:   summary{Delete: []string{"M"}}},
		{name: "marking more than the share is guarded, creates still happen",
			listing: []Candidate{cand("a", "A", "d1"), cand("n", "N", "d1")},
			stored:  []Stored{active("A", "a", "d1"), active("B", "b", "d1"), active("C", "c", "d1"), active("D", "d", "d1")},
			want:    summary{Create: []string{"N"}, Unchanged: 1, Guarded: true}},
		{name: "marking exactly the share is allowed",
			listing: []Candidate{cand("a", "A", "d1"), cand("b", "B", "d1")},
			stored:  []Stored{active("A", "a", "d1"), active("B", "b", "d1"), active("C", "c", "d1"), active("D", "d", "d1")},
			want:    summary{Unchanged: 2, Mark: []string{"C", "D"}}},
		{name: "a single mark is never mass deletion",
			listing: []Candidate{cand("n", "N", "d1")},
			stored:  []Stored{active("A", "a", "d1")},
			want:    summary{Create: []string{"N"}, Mark: []string{"A"}}},
		{name: "a lower share guards sooner",
			listing: []Candidate{cand("a", "A", "d1"), cand("b", "B", "d1")},
			stored:  []Stored{active("A", "a", "d1"), active("B", "b", "d1"), active("C", "c", "d1"), active("D", "d", "d1")},
			policy:  Policy{MaxMarkShare: 0.25},
			want:    summary{Unchanged: 2, Guarded: true}},
		{name: "allow_mass_deletion accepts an empty listing",
			stored: []Stored{active("A", "a", "d1"), marked("M", "m", 0)},
			policy: Policy{AllowMassDeletion: true},
			want:   summary{Mark: []string{"A"}, Delete: []string{"M"}}},
		{name: "a share out of range falls back to the default",
			listing: []Candidate{cand("a", "A", "d1")},
			stored:  []Stored{active("A", "a", "d1"), active("B", "b", "d1"), active("C", "c", "d1")},
			policy:  Policy{MaxMarkShare: 7},
			want:    summary{Unchanged: 1, Guarded: true}},
		{name: "only broken entries: their specs are protected, the rest obey the guard",
			listing: []Candidate{bad("a", "e1")},
			stored:  []Stored{active("A", "a", "d1"), active("B", "b", "d1")},
			want:    summary{ErrorOn: []string{"A=e1"}, Errors: []string{"a: e1"}, Mark: []string{"B"}}},
		{name: "an entry with no spec and no error is reported, not trusted",
			listing: []Candidate{{Entry: "x"}},
			stored:  []Stored{active("X", "x", "d1")},
			want:    summary{ErrorOn: []string{"X=entry has no spec"}, Errors: []string{"x: entry has no spec"}}},
		{name: "outputs are sorted whatever the input order",
			listing: []Candidate{cand("c", "C", "d"), cand("a", "A", "d"), cand("b", "B", "d")},
			stored:  []Stored{marked("Z", "z", 0), marked("Y", "y", 0)},
			want:    summary{Create: []string{"A", "B", "C"}, Delete: []string{"Y", "Z"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			policy := c.policy
			if policy == (Policy{}) {
				policy = def
			}
			got := summarize(MakePlan(c.listing, c.stored, policy))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("plan mismatch\n got: %+v\nwant: %+v", got, c.want)
			}
		})
	}
}

func withPlans(c Candidate, planIDs []string, platforms ...spec.Platform) Candidate {
	c.Spec = &spec.Spec{Name: c.Spec.Name, ID: c.ID, Platforms: platforms}
	for _, id := range planIDs {
		c.Spec.Plans = append(c.Spec.Plans, spec.Plan{Name: id, ID: id})
	}
	return c
}

func inUse(s Stored, plans map[string]int, platforms map[string]int) Stored {
	s.PlansInUse, s.PlatformsInUse = plans, platforms
	return s
}

func heldBack(s Stored) Stored {
	s.HeldBack = true
	return s
}

// Guarantee 10 (no half-upgrades): a version that would strand instances is
// held back.
func TestMakePlanHoldsBackStrandingVersions(t *testing.T) {
	amd := spec.Platform{OS: "linux", Architecture: "amd64"}
	arm := spec.Platform{OS: "linux", Architecture: "arm64"}
	cases := []struct {
		name     string
		next     Candidate
		stored   Stored
		held     bool
		blockers string
	}{
		{"drops a plan in use", withPlans(cand("a", "A", "d2"), []string{"small"}),
			inUse(active("A", "a", "d1"), map[string]int{"large": 2}, nil), true, "plan large is used by 2 instances"},
		{"drops a plan nobody uses", withPlans(cand("a", "A", "d2"), []string{"small"}),
			inUse(active("A", "a", "d1"), map[string]int{"small": 1, "large": 0}, nil), false, ""},
		{"drops a platform in use", withPlans(cand("a", "A", "d2"), []string{"small"}, amd),
			inUse(active("A", "a", "d1"), map[string]int{"small": 1}, map[string]int{"linux/arm64": 1}), true, "platform linux/arm64 is used by 1 instances"},
		{"keeps every platform in use", withPlans(cand("a", "A", "d2"), []string{"small"}, amd, arm),
			inUse(active("A", "a", "d1"), map[string]int{"small": 1}, map[string]int{"linux/arm64": 1}), false, ""},
		{"declares no platforms: nothing to strand", withPlans(cand("a", "A", "d2"), []string{"small"}),
			inUse(active("A", "a", "d1"), map[string]int{"small": 1}, map[string]int{"linux/arm64": 1}), false, ""},
		// How a hold ends: the version held back in an earlier run, its
		// blocking instance since moved to small by a PATCH (which leaves
		// large's count at zero), is adopted.
		{"held back, its blocker moved to a kept plan", withPlans(cand("a", "A", "d2"), []string{"small"}),
			heldBack(inUse(active("A", "a", "d1"), map[string]int{"small": 2, "large": 0}, nil)), false, ""},
		{"held back, its blocker still there", withPlans(cand("a", "A", "d2"), []string{"small"}),
			heldBack(inUse(active("A", "a", "d1"), map[string]int{"small": 1, "large": 1}, nil)), true, "plan large is used by 1 instances"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := MakePlan([]Candidate{c.next}, []Stored{c.stored}, Policy{MaxMarkShare: 0.5})
			if got := len(p.HoldBack) == 1; got != c.held {
				t.Fatalf("held back %v, want %v (plan %+v)", got, c.held, summarize(p))
			}
			if c.held {
				if len(p.Update) != 0 || !strings.Contains(strings.Join(p.HoldBack[0].Blockers, ";"), c.blockers) {
					t.Fatalf("hold back %+v, update %d", p.HoldBack, len(p.Update))
				}
				if p.Visible() {
					t.Fatal("a held-back version is not a visible change")
				}
			} else if len(p.Update) != 1 {
				t.Fatalf("safe version not adopted: %+v", summarize(p))
			}
		})
	}
}

func TestPlanVisible(t *testing.T) {
	cases := []struct {
		name string
		plan Plan
		want bool
	}{
		{"empty", Plan{}, false},
		{"unchanged and deletes only", Plan{Unchanged: 3, Delete: []Stored{{ID: "x"}}, Repair: []Candidate{{ID: "y"}}}, false},
		{"create", Plan{Create: []Candidate{{ID: "a"}}}, true},
		{"update", Plan{Update: []Candidate{{ID: "a"}}}, true},
		{"unmark", Plan{Unmark: []Candidate{{ID: "a"}}}, true},
		{"mark", Plan{Mark: []Stored{{ID: "a"}}}, true},
	}
	for _, c := range cases {
		if got := c.plan.Visible(); got != c.want {
			t.Errorf("%s: Visible = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestGuardReasonSaysWhy(t *testing.T) {
	p := MakePlan(nil, []Stored{active("A", "a", "d")}, Policy{})
	if !strings.Contains(p.Guarded, "listing is empty") || !strings.Contains(p.Guarded, "allow_mass_deletion") {
		t.Fatalf("guard reason %q does not say what happened and how to accept it", p.Guarded)
	}
	p = MakePlan([]Candidate{cand("a", "A", "d")}, []Stored{active("A", "a", "d"), active("B", "b", "d"), active("C", "c", "d")}, Policy{})
	if !strings.Contains(p.Guarded, "2 of 3") {
		t.Fatalf("guard reason %q does not give the numbers", p.Guarded)
	}
}

// known is a partial record: what the manifest says of a spec.
func known(id, entry, digest string, clean bool) Stored {
	return Stored{ID: id, Entry: entry, Digest: digest, State: api.SpecActive, Partial: true, Clean: clean}
}

func knownMarked(id, entry string) Stored {
	return Stored{ID: id, Entry: entry, Digest: "d-" + id, State: api.SpecMarked, Partial: true}
}

// Per-entry digests: with the manifest's partial records a plan reads only
// the specs whose entry changed (changed, gone, broken, not clean) and the
// marked ones; new entries need no read; an unchanged clean entry is
// planned as unchanged without one. Once the needed specs are read in
// full, the plan is what a plan over the whole registry would be.
func TestMakePlanWithManifest(t *testing.T) {
	def := Policy{MaxMarkShare: 0.5}
	cases := []struct {
		name     string
		listing  []Candidate
		stored   []Stored
		wantRead []string
		// full replaces the partial records read; want is the plan then,
		// which must equal the plan over full records only.
		full []Stored
		want summary
	}{
		{name: "nothing changed: nothing read",
			listing: []Candidate{cand("a", "A", "d1"), cand("b", "B", "d1")},
			stored:  []Stored{known("A", "a", "d1", true), known("B", "b", "d1", true)},
			want:    summary{Unchanged: 2}},
		{name: "a new entry needs no read",
			listing: []Candidate{cand("a", "A", "d1"), cand("n", "N", "d1")},
			stored:  []Stored{known("A", "a", "d1", true)},
			want:    summary{Create: []string{"N"}, Unchanged: 1}},
		{name: "a changed entry is read, then updated",
			listing:  []Candidate{cand("a", "A", "d2"), cand("b", "B", "d1")},
			stored:   []Stored{known("A", "a", "d1", true), known("B", "b", "d1", true)},
			wantRead: []string{"A"},
			full:     []Stored{active("A", "a", "d1")},
			want:     summary{Update: []string{"A"}, Unchanged: 1}},
		{name: "a gone entry is read, then marked",
			listing:  []Candidate{cand("a", "A", "d1"), cand("b", "B", "d1")},
			stored:   []Stored{known("A", "a", "d1", true), known("B", "b", "d1", true), known("C", "c", "d1", true)},
			wantRead: []string{"C"},
			full:     []Stored{active("C", "c", "d1")},
			want:     summary{Unchanged: 2, Mark: []string{"C"}}},
		{name: "a broken entry is read, keeps its spec and records the error",
			listing:  []Candidate{cand("a", "A", "d1"), bad("b", "bad label")},
			stored:   []Stored{known("A", "a", "d1", true), known("B", "b", "d1", true)},
			wantRead: []string{"B"},
			full:     []Stored{active("B", "b", "d1")},
			want:     summary{Unchanged: 1, ErrorOn: []string{"B=bad label"}, Errors: []string{"b: bad label"}}},
		{name: "an entry not clean (error, hold) is read even if unchanged",
			listing:  []Candidate{cand("b", "B", "d1")},
			stored:   []Stored{known("B", "b", "d1", false)},
			wantRead: []string{"B"},
			full:     []Stored{withError(active("B", "b", "d1"), "bad label")},
			want:     summary{Repair: []string{"B"}}},
		{name: "the marked ones are always read",
			listing:  []Candidate{cand("a", "A", "d1"), cand("m", "M", "d-M")},
			stored:   []Stored{known("A", "a", "d1", true), knownMarked("M", "m"), knownMarked("K", "k"), knownMarked("Z", "z")},
			wantRead: []string{"K", "M", "Z"},
			full:     []Stored{marked("M", "m", 0), marked("K", "k", 1), marked("Z", "z", 0)},
			want:     summary{Unchanged: 1, Unmark: []string{"M"}, Keep: []string{"K"}, Delete: []string{"Z"}}},
		{name: "a renamed entry is read",
			listing:  []Candidate{cand("b2", "B", "d1")},
			stored:   []Stored{known("B", "b", "d1", true)},
			wantRead: []string{"B"},
			full:     []Stored{active("B", "b", "d1")},
			want:     summary{Repair: []string{"B"}}},
		{name: "a duplicate id offered by an earlier entry is read (it is an error)",
			listing:  []Candidate{cand("a", "X", "d1"), cand("b", "Y", "d1"), cand("c", "Y", "d1")},
			stored:   []Stored{known("X", "a", "d1", true), known("Y", "c", "d1", true)},
			wantRead: []string{"Y"},
			full:     []Stored{active("Y", "c", "d1")},
			want: summary{Unchanged: 1, Repair: []string{"Y"}, ErrorOn: []string{`Y=spec id Y is already offered by entry "b" of this registry`},
				Errors: []string{`c: spec id Y is already offered by entry "b" of this registry`}}},
		{name: "the guard counts what the manifest knows",
			listing:  []Candidate{cand("a", "A", "d1")},
			stored:   []Stored{known("A", "a", "d1", true), known("B", "b", "d1", true), known("C", "c", "d1", true), known("D", "d", "d1", true)},
			wantRead: []string{"B", "C", "D"},
			full:     []Stored{active("B", "b", "d1"), active("C", "c", "d1"), active("D", "d", "d1")},
			want:     summary{Unchanged: 1, Guarded: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := MakePlan(c.listing, c.stored, def)
			if !reflect.DeepEqual(p.Read, c.wantRead) {
				t.Fatalf("read %v, want %v (plan %+v)", p.Read, c.wantRead, summarize(p))
			}
			stored := c.stored
			if len(p.Read) > 0 {
				if got := summarize(p); !reflect.DeepEqual(got, summary{}) {
					t.Fatalf("a plan that needs reads also planned %+v", got)
				}
				byID := map[string]Stored{}
				for _, s := range c.full {
					byID[s.ID] = s
				}
				stored = nil
				for _, s := range c.stored {
					if f, ok := byID[s.ID]; ok {
						s = f
					}
					stored = append(stored, s)
				}
				p = MakePlan(c.listing, stored, def)
				if len(p.Read) > 0 {
					t.Fatalf("after the reads it still needs %v", p.Read)
				}
			}
			if got := summarize(p); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("plan mismatch\n got: %+v\nwant: %+v", got, c.want)
			}
			// The same plan as over full records only (an unchanged
			// clean partial is a clean active spec of the same digest).
			var fullOnly []Stored
			for _, s := range stored {
				if s.Partial {
					s = active(s.ID, s.Entry, s.Digest)
				}
				fullOnly = append(fullOnly, s)
			}
			if got := summarize(MakePlan(c.listing, fullOnly, def)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("the plan over full records differs\n got: %+v\nwant: %+v", got, c.want)
			}
		})
	}
}

// A targeted plan marks only what its entries held: a spec of an entry
// the run was not told about is never marked (nor deleted, nor kept),
// even when it is handed to the planner, and a named entry that is gone
// is marked under the registry's share guard, not the named entries'.
func TestMakeTargetedPlanMarksOnlyItsEntries(t *testing.T) {
	stored := []Stored{active("a1", "a", "d1"), active("b1", "b", "d1"), active("c1", "c", "d1"), marked("m1", "m", 0)}
	// a is gone upstream, b unchanged; c and m were not named.
	p := MakeTargetedPlan([]Candidate{cand("b", "b1", "d1")}, stored, Policy{MaxMarkShare: 0.5}, Scope{Entries: []string{"a", "b"}, Active: 3})
	got := summarize(p)
	if !reflect.DeepEqual(got.Mark, []string{"a1"}) || len(got.Delete)+len(got.Keep) != 0 || got.Guarded || got.Unchanged != 1 {
		t.Errorf("plan %+v, want a1 marked alone (c and m not named), nothing deleted or kept", got)
	}
}
