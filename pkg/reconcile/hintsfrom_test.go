package reconcile

import (
	"errors"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// What a run records as a hint, and what it hands back: only an entry
// read at an upstream digest that gave nothing, or whose spec the run
// leaves stored with the content it offered, active and clean, the one
// such spec of its entry. Everything else is read again.
func TestListingPartsKeepUpstreamOnlyForWhatIsCertain(t *testing.T) {
	t.Parallel()
	clean := func(id, entry, digest string) store.ManifestEntry {
		return store.ManifestEntry{SpecID: id, Entry: entry, Digest: digest, State: api.SpecActive, Clean: true}
	}
	offering := func(name string) registry.Entry {
		return registry.Entry{Name: name, Ref: "h/" + name + "@sha256:1", Upstream: "oci1@sha256:" + name, Spec: &spec.Spec{Name: "svc-" + name}}
	}
	cases := []struct {
		name    string
		entry   registry.Entry
		quiet   bool
		after   []store.ManifestEntry
		hint    bool // the part keeps its upstream digest
		hintsOf bool // and a run hands it back
	}{
		{name: "clean", entry: offering("a"), after: []store.ManifestEntry{clean("A", "a", "d")}, hint: true, hintsOf: true},
		{name: "unclean (held back, an entry error)", entry: offering("a"),
			after: []store.ManifestEntry{{SpecID: "A", Entry: "a", Digest: "d", State: api.SpecActive}}},
		{name: "marked", entry: offering("a"), after: []store.ManifestEntry{{SpecID: "A", Entry: "a", Digest: "d", State: api.SpecMarked, Clean: true}}},
		{name: "stored with other content", entry: offering("a"), after: []store.ManifestEntry{clean("A", "a", "other")}},
		{name: "not the registry's (a conflict)", entry: offering("a")},
		{name: "the spec of another entry", entry: offering("a"), after: []store.ManifestEntry{clean("A", "b", "d")}},
		{name: "two clean specs of the entry", entry: offering("a"), after: []store.ManifestEntry{clean("A", "a", "d"), clean("B", "a", "e")}},
		{name: "broken", entry: registry.Entry{Name: "a", Upstream: "oci1@sha256:a", Err: errors.New("bad label")}, after: []store.ManifestEntry{clean("A", "a", "d")}},
		{name: "without an upstream digest", entry: registry.Entry{Name: "a", Spec: &spec.Spec{Name: "svc-a"}}, after: []store.ManifestEntry{clean("A", "a", "d")}},
		{name: "quiet", entry: registry.Entry{Name: "a", Upstream: "oci1@sha256:a"}, quiet: true, hint: true, hintsOf: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := &registry.Listing{}
			var cands []Candidate
			if c.quiet {
				l.Quiet = []registry.Entry{c.entry}
			} else {
				l.Entries = []registry.Entry{c.entry}
				cands = []Candidate{{Entry: "a", ID: "A", Digest: "d", Name: "svc-a", Spec: c.entry.Spec, Err: c.entry.Err}}
				if c.entry.Spec == nil {
					cands[0].ID, cands[0].Name = "", ""
				}
			}
			after := manifest{}
			for _, e := range c.after {
				after[e.SpecID] = e
			}
			parts := listingParts(l, cands, after)
			p := parts["a"]
			if p.Digest != registry.EntryDigest(c.entry) || (p.Upstream != "") != c.hint {
				t.Fatalf("part %+v, want an upstream digest: %v", p, c.hint)
			}
			if c.hint && !c.quiet && p.Spec != "svc-a" {
				t.Errorf("part %+v names no spec", p)
			}
			hints := hintsFrom(store.Manifest{Entries: c.after, Listing: parts})
			h, ok := hints["a"]
			if ok != c.hintsOf {
				t.Fatalf("hints %+v, want one: %v", hints, c.hintsOf)
			}
			switch {
			case !ok:
			case c.quiet && (!h.Quiet() || h.Upstream != "oci1@sha256:a"):
				t.Errorf("quiet hint %+v", h)
			case !c.quiet && h != (registry.Hint{Upstream: "oci1@sha256:a", SpecID: "A", SpecName: "svc-a", SpecDigest: "d"}):
				t.Errorf("hint %+v", h)
			}
		})
	}
}

// A hinted entry is planned as what the manifest says it is: unchanged,
// unread; and a plan that would write one (the manifest it came from did
// not describe the store) is refused before anything is written.
func TestHintedCandidatesAreOnlyUnchanged(t *testing.T) {
	t.Parallel()
	hinted := Candidate{Entry: "a", ID: "A", Digest: "d", Name: "svc-a", Hinted: true}
	stored := []Stored{{ID: "A", Entry: "a", Digest: "d", State: api.SpecActive, Partial: true, Clean: true}}
	p := MakePlan([]Candidate{hinted}, stored, Policy{})
	if p.Unchanged != 1 || len(p.Read) != 0 || p.Writes() || hintsHeld(p) != nil {
		t.Fatalf("plan %+v", p)
	}
	// Another entry offering the hinted spec's name comes after it: it is
	// the entry error, as when both are read.
	other := Candidate{Entry: "b", ID: "B", Digest: "e", Name: "svc-a", Spec: &spec.Spec{Name: "svc-a"}}
	if p := MakePlan([]Candidate{hinted, other}, stored, Policy{}); len(p.Errors) != 1 || p.Errors[0].Entry != "b" || len(p.Create) != 0 {
		t.Fatalf("a name a hinted entry holds: plan %+v", p)
	}
	// The stored spec is not what the hint says (a manifest that lies):
	// the plan would update it from nothing.
	full := []Stored{{ID: "A", Entry: "a", Digest: "old", State: api.SpecActive}}
	if err := hintsHeld(MakePlan([]Candidate{hinted}, full, Policy{})); err == nil {
		t.Fatal("a plan writing a hinted entry was let through")
	}
}
