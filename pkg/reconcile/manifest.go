package reconcile

import (
	"context"
	"fmt"

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
	// listing is what the manifest says each entry of the listing it
	// describes added to the listing digest; stale says the manifest is
	// worth rewriting anyway (an older layout).
	listing map[string]string
	stale   bool
}

// known reads what the run needs of the stored specs. When the status'
// manifest can be trusted (the run that wrote it is the last that began
// writing, and no lease was left behind) it starts from the manifest and
// reads only the specs the plan asks for: those whose entry changed,
// went away or broke, the unclean ones and the marked ones, so a run with
// k changed entries reads k specs, not the registry's size. Otherwise it
// reads every spec the registry owns (as a dry run, which reads no
// status, always does).
func (r *Runner) known(ctx context.Context, st *store.Store, reg Registry, status *store.RegistryStatus, candidates []Candidate) (knowledge, error) {
	k := knowledge{full: map[string]store.SpecRecord{}}
	if status != nil && status.ManifestTrusted() {
		m, err := st.ReadManifest(ctx, reg.Name, status.Manifest)
		if err != nil {
			return k, err
		}
		if m != nil {
			k.fromManifest = true
			k.listing, k.stale = m.Listing, status.Manifest.Layout != api.ManifestByEntry
			k.stored = partialRecords(m.Entries)
		}
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
		return k, nil
	}
	records, err := st.RegistrySpecs(ctx, reg.Name, k.plan.Read)
	if err != nil {
		return k, err
	}
	k.read += len(k.plan.Read)
	k.readIn(records, k.plan.Read)
	k.plan = MakePlan(candidates, k.stored, reg.Policy)
	if len(k.plan.Read) > 0 {
		return k, fmt.Errorf("the plan still needs specs %v after reading them", k.plan.Read)
	}
	return k, nil
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

// listingDigests is what each entry of a listing adds to its digest, by
// entry name (the entries of one name together): what a manifest keeps
// so that a run of a few entries can work the digest out again.
func listingDigests(entries []registry.Entry) map[string]string {
	byName := map[string][]registry.Entry{}
	for _, e := range entries {
		byName[e.Name] = append(byName[e.Name], e)
	}
	out := make(map[string]string, len(byName))
	for name, es := range byName {
		out[name] = registry.EntriesDigest(es)
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
