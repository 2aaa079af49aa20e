// Package reconcile brings one registry's specs into the store in the five
// steps of docs/reconcile.md#the-reconcile-five-steps: fetch the registry;
// read what the store holds for it; delete what was marked earlier and
// nothing references; upsert what is offered; mark what is no longer
// offered.
//
// Deciding what to do is pure (Plan); doing it is the Runner's job, where
// every step that touches a spec is its own transaction that re-checks its
// preconditions, so the plan is only ever an upper bound of what happens.
package reconcile

import (
	"fmt"
	"slices"
	"sort"

	"github.com/specsync/specsync/pkg/api"

	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// Candidate is one entry of a fetched listing, ready to be planned: ids
// assigned and digest computed when it parsed, Err when it did not.
type Candidate struct {
	Entry  string // registry entry name
	Ref    string
	ID     string
	Spec   *spec.Spec
	Digest string
	Err    error
	// Name is the spec's name (Spec.Name, or the hint's).
	Name string
	// Hinted says the source gave the entry back from the run's hint,
	// unread (registry.Entry.Hint): Spec is nil, ID, Name and Digest are
	// the spec the hint names, and a plan may only find it unchanged.
	Hinted bool
}

// offers reports whether the candidate offers a spec (read, or hinted).
func (c Candidate) offers() bool { return c.Err == nil && (c.Spec != nil || c.Hinted) }

// Stored is what planning needs to know about a spec the store holds for
// the registry.
//
// A Partial one comes from the registry's manifest, not from the spec
// document: its id, entry, digest and state, and whether it was Clean
// (active, no entry error, nothing held back) when the last run ended;
// nothing else (no name, no instance counts). The plan uses it only to
// find a listing entry unchanged; anything more needs the spec itself,
// and the plan says which ones to read (Plan.Read).
type Stored struct {
	ID         string
	Entry      string
	Name       string
	Digest     string
	State      api.SpecState
	Partial    bool
	Clean      bool // Partial only
	Instances  int
	EntryError string
	// HeldBack says a newer version is recorded as held back.
	HeldBack bool
	// PlansInUse and PlatformsInUse count instances per plan id and per
	// OCI platform: a new version must keep serving all of them.
	PlansInUse     map[string]int
	PlatformsInUse map[string]int
}

// unchangedBy reports whether a partial record is known to be what c
// offers, with nothing to do: clean and active, with c's content from c's
// entry. Nothing else of a partial record is known, so anything else
// needs the spec read.
func (s Stored) unchangedBy(c Candidate) bool {
	return s.Partial && s.Clean && s.State == api.SpecActive && s.Digest == c.Digest && s.Entry == c.Entry
}

// offerTarget is what deciding an offer needs of the stored spec
// (store.DecideOffer: the rule the store writes by).
func (s Stored) offerTarget() *store.OfferTarget {
	return &store.OfferTarget{Entry: s.Entry, Digest: s.Digest, State: s.State, EntryError: s.EntryError != "", HeldBack: s.HeldBack}
}

// Policy is a registry's deletion policy.
type Policy struct {
	// MaxMarkShare is the largest share (0..1] of a registry's active specs
	// one run may mark; more is taken as a broken registry, not a decision.
	MaxMarkShare float64
	// AllowMassDeletion turns the guard off for this registry.
	AllowMassDeletion bool
}

// DefaultMaxMarkShare is used when a registry does not set one.
const DefaultMaxMarkShare = 0.5

// EntryError is a listing entry that failed, as reported in status.
type EntryError = api.EntryError

// HeldBack is a candidate version withheld, and the instances it would strand.
type HeldBack struct {
	Candidate Candidate
	Blockers  []string
}

// ErrorOn records an entry's error against the stored spec it protects.
type ErrorOn struct {
	SpecID  string
	Message string
}

// Plan is what one run intends to do.
type Plan struct {
	Create    []Candidate
	Update    []Candidate // content changed (may also be marked: then it is unmarked too)
	Unmark    []Candidate // marked, offered again with the same content
	Repair    []Candidate // unchanged content, but a recorded entry error or hold to clear
	Unchanged int
	Mark      []Stored
	Delete    []Stored
	Keep      []Stored // marked, not offered, still referenced by instances
	// HoldBack are new versions not adopted: they drop a plan or a
	// platform that instances still use. The stored version keeps serving.
	HoldBack []HeldBack
	ErrorOn  []ErrorOn
	Errors   []EntryError
	// Guarded says why marking (and deleting) was withheld, if it was.
	Guarded string
	// Read, when set, is the only field set: the partial records (by id,
	// sorted) the plan needs in full. Read them and plan again.
	Read []string
}

// Writes reports whether carrying out the plan may write a spec.
func (p *Plan) Writes() bool {
	return len(p.Create)+len(p.Update)+len(p.Unmark)+len(p.Repair)+len(p.Mark)+len(p.Delete)+len(p.HoldBack)+len(p.ErrorOn) > 0
}

// Visible reports whether carrying out the plan changes the catalog.
func (p *Plan) Visible() bool {
	return len(p.Create)+len(p.Update)+len(p.Unmark)+len(p.Mark) > 0
}

// MakePlan decides what a run does. listing is every entry of a complete,
// successful fetch; stored is every spec the store holds for the registry,
// each either read in full or known from the manifest (Partial). If the
// plan needs more than a partial record says, it is only a list of the
// specs to read (Plan.Read): a run reads the specs whose entry changed
// (new ones need no read), went away or broke, and the marked ones, not
// the registry's size. It is deterministic: the same inputs give the same
// plan, in sorted order.
func MakePlan(listing []Candidate, stored []Stored, policy Policy) Plan {
	return makePlan(listing, stored, policy, nil)
}

// Scope is what a targeted run's plan covers: the entries an event named,
// and what it must know of the rest of the registry.
type Scope struct {
	// Entries are the entries the run was told about (and the source
	// selects). Only their stored specs are planned, and nothing else is
	// ever marked.
	Entries []string
	// Active is how many active specs the registry holds (its manifest
	// says): the mass-deletion guard's whole, as in a full run.
	Active int
	// TakenIDs and TakenNames are the spec ids and names held by specs of
	// entries the run was not told about (id or name -> entry): an entry
	// offering one is an entry error, as the second offer of an id or a
	// name is in a full run, and the spec is left to its entry (the next
	// full run decides which entry keeps it).
	TakenIDs, TakenNames map[string]string
}

func (s *Scope) has(entry string) bool { return s == nil || slices.Contains(s.Entries, entry) }

// MakeTargetedPlan is MakePlan for a targeted run: listing is what the
// named entries offer now (a named entry it does not hold is gone
// upstream), stored the specs those entries hold. The same rules, over
// those entries only: nothing of another entry is marked, no marked spec
// is deleted or counted as kept (the grace of a mark is the full runs'),
// the empty-listing guard does not apply (an event may well be about the
// one entry that went), and the share guard counts the whole registry's
// active specs.
func MakeTargetedPlan(listing []Candidate, stored []Stored, policy Policy, scope Scope) Plan {
	return makePlan(listing, stored, policy, &scope)
}

func makePlan(listing []Candidate, stored []Stored, policy Policy, scope *Scope) Plan {
	if read := needFull(listing, stored); len(read) > 0 {
		return Plan{Read: read}
	}
	var p Plan

	entries := vetted(listing)
	if scope != nil {
		entries = taken(entries, scope)
	}

	byID := make(map[string]Stored, len(stored))
	byEntry := make(map[string][]Stored)
	for _, s := range stored {
		byID[s.ID] = s
		byEntry[s.Entry] = append(byEntry[s.Entry], s)
	}

	offered := map[string]string{}     // spec id -> entry that offers it
	failedEntries := map[string]bool{} // entries present but broken protect their stored specs
	for _, c := range entries {
		if !c.offers() {
			msg := "entry has no spec"
			if c.Err != nil {
				msg = c.Err.Error()
			}
			e := EntryError{Entry: c.Entry, Ref: c.Ref, Message: msg}
			failedEntries[c.Entry] = true
			for _, s := range byEntry[c.Entry] {
				if e.SpecID == "" {
					e.SpecID = s.ID
				}
				if s.EntryError != msg {
					p.ErrorOn = append(p.ErrorOn, ErrorOn{SpecID: s.ID, Message: msg})
				}
			}
			p.Errors = append(p.Errors, e)
			continue
		}
		offered[c.ID] = c.Entry
		s, known := byID[c.ID]
		var target *store.OfferTarget
		if known {
			target = s.offerTarget()
		}
		switch store.DecideOffer(target, c.Entry, c.Digest) {
		case store.Created:
			p.Create = append(p.Create, c)
		case store.Updated:
			// (A hinted entry has no spec to check: it is never an
			// update, and hintsHeld refuses the plan if it is one.)
			if c.Hinted {
				p.Update = append(p.Update, c)
				continue
			}
			if blockers := strands(s, c.Spec); len(blockers) > 0 {
				p.HoldBack = append(p.HoldBack, HeldBack{Candidate: c, Blockers: blockers})
				continue
			}
			p.Update = append(p.Update, c)
		case store.Unmarked:
			p.Unmark = append(p.Unmark, c)
		case store.Repaired:
			p.Repair = append(p.Repair, c)
		default:
			p.Unchanged++
		}
	}

	active := 0
	var mark, del, keep []Stored
	for _, s := range sortedStored(stored) {
		if s.State == api.SpecActive {
			active++
		}
		if _, ok := offered[s.ID]; ok || failedEntries[s.Entry] || !scope.has(s.Entry) {
			continue
		}
		switch {
		case s.State == api.SpecActive:
			mark = append(mark, s)
		case scope != nil:
			// A targeted run neither deletes nor keeps: the marked spec
			// waits for the full runs.
		case s.Instances > 0:
			keep = append(keep, s)
		default:
			del = append(del, s)
		}
	}
	if scope != nil {
		active = scope.Active
	}
	p.Keep = keep

	share := policy.MaxMarkShare
	if share <= 0 || share > 1 {
		share = DefaultMaxMarkShare
	}
	switch {
	case policy.AllowMassDeletion:
	case scope == nil && len(entries) == 0 && active > 0:
		p.Guarded = fmt.Sprintf("the listing is empty while the store holds %d active specs for this registry; nothing marked (set allow_mass_deletion to accept)", active)
	case len(mark) > 1 && float64(len(mark)) > share*float64(active):
		p.Guarded = fmt.Sprintf("the run would mark %d of %d active specs, more than the allowed share %.0f%%; nothing marked (raise max_mark_share or set allow_mass_deletion to accept)", len(mark), active, share*100)
	}
	if p.Guarded == "" {
		p.Mark, p.Delete = mark, del
	}
	sort.Slice(p.Errors, func(i, j int) bool {
		if p.Errors[i].Entry != p.Errors[j].Entry {
			return p.Errors[i].Entry < p.Errors[j].Entry
		}
		return p.Errors[i].Message < p.Errors[j].Message
	})
	return p
}

// needFull lists the partial records the plan cannot do without reading:
// every one but those whose entry offers the same content, unchanged and
// clean (what most of a large registry is on most runs).
func needFull(listing []Candidate, stored []Stored) []string {
	partial := map[string]Stored{}
	for _, s := range stored {
		if s.Partial {
			partial[s.ID] = s
		}
	}
	if len(partial) == 0 {
		return nil
	}
	unchanged := map[string]bool{}
	for _, c := range vetted(listing) {
		if !c.offers() {
			continue // a broken entry's specs need reading
		}
		if s, ok := partial[c.ID]; ok && s.unchangedBy(c) {
			unchanged[c.ID] = true
		}
	}
	var out []string
	for id := range partial {
		if !unchanged[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// vetted is the listing sorted by entry, with the entries that offer an
// id or a name an earlier entry offers turned into entry errors (OSB
// wants both unique).
func vetted(listing []Candidate) []Candidate {
	entries := append([]Candidate(nil), listing...)
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Entry < entries[j].Entry })
	ids := map[string]string{}   // spec id -> entry that offers it
	names := map[string]string{} // spec name -> entry
	for i, c := range entries {
		if !c.offers() {
			continue
		}
		if prev, dup := ids[c.ID]; dup {
			entries[i].Err = fmt.Errorf("spec id %s is already offered by entry %q of this registry", c.ID, prev)
		} else if prev, dup := names[c.Name]; dup {
			entries[i].Err = fmt.Errorf("spec name %q is already offered by entry %q of this registry", c.Name, prev)
		} else {
			ids[c.ID], names[c.Name] = c.Entry, c.Entry
		}
	}
	return entries
}

// taken turns the entries that offer an id or a name an entry outside the
// scope holds into entry errors.
func taken(entries []Candidate, scope *Scope) []Candidate {
	for i, c := range entries {
		if err := scope.takenBy(c); err != nil {
			entries[i].Err = err
		}
	}
	return entries
}

// takenBy is the entry error of a candidate that offers an id or a name
// an entry outside the scope holds (its id first), nil for one that
// offers neither (or nothing).
func (s *Scope) takenBy(c Candidate) error {
	if !c.offers() {
		return nil
	}
	if other, ok := s.TakenIDs[c.ID]; ok && other != c.Entry {
		return fmt.Errorf("spec id %s is already offered by entry %q of this registry (the next full run decides which entry keeps it)", c.ID, other)
	}
	if other, ok := s.TakenNames[c.Name]; ok && other != c.Entry {
		return fmt.Errorf("spec name %q is already offered by entry %q of this registry (the next full run decides which entry keeps it)", c.Name, other)
	}
	return nil
}

func sortedStored(stored []Stored) []Stored {
	out := append([]Stored(nil), stored...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// strands lists what a new version of a stored spec would take away from
// running instances: a plan they use, or a platform they run on (when the
// new version declares platforms at all). Empty means safe to adopt.
func strands(s Stored, next *spec.Spec) []string {
	var out []string
	for planID, n := range s.PlansInUse {
		if n <= 0 {
			continue
		}
		if _, ok := next.PlanByID(planID); !ok {
			out = append(out, fmt.Sprintf("plan %s is used by %d instances and the new version drops it", planID, n))
		}
	}
	if len(next.Platforms) > 0 {
		offered := map[string]bool{}
		for _, p := range next.Platforms {
			offered[p.String()] = true
		}
		for platform, n := range s.PlatformsInUse {
			if n > 0 && !offered[platform] {
				out = append(out, fmt.Sprintf("platform %s is used by %d instances and the new version does not support it", platform, n))
			}
		}
	}
	sort.Strings(out)
	return out
}
