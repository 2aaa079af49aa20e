package reconcile

import (
	"context"
	"fmt"
	"slices"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
)

// writeBatch is how many specs one conditional write commit carries
// (store.UpdateSpecs splits by size too).
const writeBatch = 50

// knowledge is what a run knows of the registry's stored specs before it
// writes: every spec, each read in full or known from the manifest, and
// the plan over them.
type knowledge struct {
	stored []Stored
	// full are the specs read, by id, with the update time each was read
	// at: the runner's writes are conditional on it.
	full map[string]store.SpecRecord
	plan Plan
	// fromManifest says the manifest was trusted and used; read is how
	// many specs were read.
	fromManifest bool
	read         int
	// gone counts the manifest's entries whose spec was not there (or is
	// another registry's now): the manifest is worth rewriting.
	gone int
	// listing is what the manifest says of each entry of the listing it
	// describes (what it added to the listing digest, its upstream digest
	// where it may be a hint); stale says the manifest is worth rewriting
	// anyway (an older layout).
	listing map[string]store.ListingPart
	stale   bool
	// candidates are the listing's entries as planned.
	candidates []Candidate
}

// known reads what the run needs of the stored specs. When the status'
// manifest can be trusted (the run that wrote it is the last that began
// writing, and no lease was left behind) it starts from the manifest and
// reads only the specs the plan asks for: those whose entry changed,
// went away or broke, the unclean ones and the marked ones, so a run with
// k changed entries reads k specs, not the registry's size. Otherwise it
// reads every spec the registry owns (as a dry run, which reads no
// status, always does). The manifest is the one the source's hints came
// from, if it asked for them (trustedManifest reads it once).
func (r *run) known(ctx context.Context, candidates []Candidate) (knowledge, error) {
	st, reg := r.st, r.reg
	k := knowledge{full: map[string]store.SpecRecord{}, candidates: candidates}
	m, err := r.trustedManifest(ctx, r.status)
	if err != nil {
		return k, err
	}
	if m != nil {
		k.fromManifest = true
		k.listing, k.stale = m.Listing, r.status.Manifest.Layout != api.ManifestByEntry
		k.stored = partialRecords(m.Entries)
	}
	if !k.fromManifest {
		records, err := st.OwnedSpecs(ctx, reg.Name)
		if err != nil {
			return k, err
		}
		for _, rec := range records {
			k.full[rec.ID] = rec
		}
		k.stored, k.read = storedFrom(records), len(records)
	}
	k.plan = MakePlan(candidates, k.stored, reg.Policy)
	if len(k.plan.Read) == 0 {
		return k, hintsHeld(k.plan)
	}
	records, err := st.RegistrySpecs(ctx, reg.Name, k.plan.Read)
	if err != nil {
		return k, err
	}
	k.read += len(k.plan.Read)
	k.readIn(records, k.plan.Read)
	return k, k.settle(reg.Policy, nil)
}

// settle plans again once the specs the first plan asked for are read
// (scope: a targeted run's, nil for a full run): the plan must need no
// more, and write no entry from a hint.
func (k *knowledge) settle(policy Policy, scope *Scope) error {
	k.plan = makePlan(k.candidates, k.stored, policy, scope)
	if len(k.plan.Read) > 0 {
		return fmt.Errorf("the plan still needs specs %v after reading them", k.plan.Read)
	}
	return hintsHeld(k.plan)
}

// hintsHeld checks that the plan writes no entry given back from a hint:
// a hint is the spec a trusted manifest says is stored, active and clean,
// so its entry can only be unchanged (or an entry error, when an entry
// before it offers its id or name). The source did not read it, so there
// is nothing else to write.
func hintsHeld(p Plan) error {
	for _, c := range slices.Concat(p.Create, p.Update, p.Unmark, p.Repair) {
		if c.Hinted {
			return fmt.Errorf("the plan would write entry %s from a hint, unread (the manifest the hint came from does not describe the store)", c.Entry)
		}
	}
	for _, h := range p.HoldBack {
		if h.Candidate.Hinted {
			return fmt.Errorf("the plan would hold entry %s back from a hint, unread", h.Candidate.Entry)
		}
	}
	return nil
}

// manifestRead is a manifest a run read for one status.
type manifestRead struct {
	status *store.RegistryStatus
	m      *store.Manifest
	err    error
}

// trustedManifest is the manifest the status names, if the run trusts it
// (RegistryStatus.ManifestTrusted), read at most once for that status:
// the source's hints (the run's answer to FetchOptions.Hints) and the
// step that knows the stored specs share it, so handing out hints costs
// no read more. nil without one (a dry run reads no status).
func (r *run) trustedManifest(ctx context.Context, status *store.RegistryStatus) (*store.Manifest, error) {
	if status == nil || !status.ManifestTrusted() {
		return nil, nil
	}
	if r.manifest == nil || r.manifest.status != status {
		m, err := r.st.ReadManifest(ctx, r.reg.Name, status.Manifest)
		r.manifest = &manifestRead{status: status, m: m, err: err}
	}
	return r.manifest.m, r.manifest.err
}

// hints is the run's answer to the source's question
// (registry.FetchOptions.Hints) in a full run: the hints of the manifest
// it trusts.
func (r *run) hints(status *store.RegistryStatus) func(context.Context) (map[string]registry.Hint, error) {
	return func(ctx context.Context) (map[string]registry.Hint, error) {
		m, err := r.trustedManifest(ctx, status)
		if err != nil || m == nil {
			return nil, err
		}
		return hintsFrom(*m), nil
	}
}

// hintsFrom are the hints a trusted manifest (or the shards of one) gives:
// for each entry of its listing kept with its upstream digest, what it
// gave then: nothing, or the one spec of its entry that is active and
// clean (its id and digest from the manifest's entry, its name from the
// listing's). An entry with another spec active and clean (a guard kept
// one its entry no longer offered) gets none: which one it gave is not
// certain. Every other entry is read.
func hintsFrom(m store.Manifest) map[string]registry.Hint {
	clean := map[string][]store.ManifestEntry{}
	for _, e := range m.Entries {
		if e.Clean && e.State == api.SpecActive {
			clean[e.Entry] = append(clean[e.Entry], e)
		}
	}
	out := map[string]registry.Hint{}
	for entry, p := range m.Listing {
		switch {
		case p.Upstream == "":
		case p.Spec == "":
			out[entry] = registry.Hint{Upstream: p.Upstream}
		case len(clean[entry]) == 1:
			s := clean[entry][0]
			out[entry] = registry.Hint{Upstream: p.Upstream, SpecID: s.SpecID, SpecName: p.Spec, SpecDigest: s.Digest}
		}
	}
	return out
}

// partialRecords are what the manifest says of each spec, as planning
// takes it.
func partialRecords(entries []store.ManifestEntry) []Stored {
	out := make([]Stored, 0, len(entries))
	for _, e := range entries {
		out = append(out, Stored{ID: e.SpecID, Entry: e.Entry, Digest: e.Digest, State: e.State, Partial: true, Clean: e.Clean})
	}
	return out
}

// readIn puts the records read for the partial ones asked for in their
// place; an asked one not read is gone since (a marked spec deleted by a
// run that read only the marked ones), or another registry's now.
func (k *knowledge) readIn(records []store.SpecRecord, asked []string) {
	byID := map[string]store.SpecRecord{}
	for _, rec := range records {
		byID[rec.ID] = rec
		k.full[rec.ID] = rec
	}
	wanted := map[string]bool{}
	for _, id := range asked {
		wanted[id] = true
	}
	var stored []Stored
	for _, s := range k.stored {
		if s.Partial && wanted[s.ID] {
			rec, ok := byID[s.ID]
			if !ok {
				k.gone++
				continue
			}
			s = storedFrom([]store.SpecRecord{rec})[0]
		}
		stored = append(stored, s)
	}
	k.stored = stored
}

// listingParts is what the manifest keeps of each entry of a listing, by
// entry name (the entries of one name together, the quiet ones too): what
// it added to the listing digest, which lets a run of a few entries work
// the digest out again, and, for an entry a later run may hand back as a
// hint, the upstream digest it was read at and its spec's name. That is
// an entry read at an upstream digest that gave nothing, or whose spec
// the run leaves stored with the content offered, active and clean, the
// one such spec of its entry (after: the manifest as the run leaves it).
// Any doubt leaves the upstream digest out, and the entry is read again.
func listingParts(l *registry.Listing, candidates []Candidate, after manifest) map[string]store.ListingPart {
	byName := map[string][]registry.Entry{}
	for _, e := range slices.Concat(l.Entries, l.Quiet) {
		byName[e.Name] = append(byName[e.Name], e)
	}
	quiet := map[string]bool{}
	for _, e := range l.Quiet {
		quiet[e.Name] = true
	}
	offered := map[string]Candidate{}
	for _, c := range candidates {
		offered[c.Entry] = c
	}
	clean := map[string]int{}
	for _, e := range after {
		if e.Clean && e.State == api.SpecActive {
			clean[e.Entry]++
		}
	}
	out := make(map[string]store.ListingPart, len(byName))
	for name, es := range byName {
		p := store.ListingPart{Digest: registry.EntriesDigest(es)}
		if len(es) == 1 && es[0].Upstream != "" {
			c, isOffered := offered[name]
			s, stored := after[c.ID]
			switch {
			case quiet[name]:
				p.Upstream = es[0].Upstream
			case isOffered && c.offers() && clean[name] == 1 && stored &&
				s.Clean && s.State == api.SpecActive && s.Entry == name && s.Digest == c.Digest:
				p.Upstream, p.Spec = es[0].Upstream, c.Name
			}
		}
		out[name] = p
	}
	return out
}

// manifest is the registry's manifest as the run leaves it: it starts as
// what the run knew of every spec and follows each of its writes. An
// entry is clean only where the run knows it is (a spec it left active,
// with the offered content, no entry error and nothing held back); any
// doubt makes it unclean, which costs the next run one read of it.
type manifest map[string]store.ManifestEntry

func newManifest(stored []Stored) manifest {
	m := manifest{}
	for _, s := range stored {
		clean := s.Clean
		if !s.Partial {
			clean = s.State == api.SpecActive && s.EntryError == "" && !s.HeldBack
		}
		m[s.ID] = store.ManifestEntry{SpecID: s.ID, Entry: s.Entry, Digest: s.Digest, State: s.State, Clean: clean}
	}
	return m
}

func (m manifest) remove(id string) { delete(m, id) }

// dirty makes an entry unclean (an entry error recorded on it).
func (m manifest) dirty(id string) {
	if e, ok := m[id]; ok {
		e.Clean = false
		m[id] = e
	}
}

// offered follows a create or upsert of c.
func (m manifest) offered(c Candidate, o store.UpsertOutcome) {
	switch o {
	case store.Created, store.Updated, store.Unmarked, store.Repaired, store.Unchanged:
		// The spec now holds exactly the offered content, active, with
		// no entry error and nothing held back.
		m[c.ID] = store.ManifestEntry{SpecID: c.ID, Entry: c.Entry, Digest: c.Digest, State: api.SpecActive, Clean: true}
	default: // a conflict: another registry's spec
		delete(m, c.ID)
	}
}

// held follows a hold-back: the served version stays, active, not clean.
func (m manifest) held(id string, o store.HoldOutcome) {
	e, ok := m[id]
	switch {
	case o == store.HeldSkipped:
		delete(m, id)
	case ok:
		e.State, e.Clean = api.SpecActive, false
		m[id] = e
	}
}

// marked follows a mark; one not made (gone, re-owned or already marked
// meanwhile) leaves an entry the next run reads.
func (m manifest) marked(id string, ok bool) {
	if e, found := m[id]; found {
		if ok {
			e.State = api.SpecMarked
		}
		e.Clean = false
		m[id] = e
	}
}

func (m manifest) entries() []store.ManifestEntry {
	out := make([]store.ManifestEntry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	return out
}
