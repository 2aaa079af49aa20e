package invariant

import (
	"fmt"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

func (c *checker) specs() {
	byName := map[[2]string]string{}
	for _, id := range sortedKeys(c.s.Specs) {
		r := c.s.Specs[id]
		doc := store.SpecsCollection + "/" + id
		byName[[2]string{r.Registry, r.Name}] = id
		if r.ID != id {
			c.add("spec-id", doc, "id field %q is not the document id", r.ID)
		}
		if r.Registry == "" {
			c.add("spec-id", doc, "no owning registry")
		}
		c.body(doc, id, r)
		switch r.State {
		case api.SpecActive:
			if !r.MarkedAt.IsZero() || r.MarkedRun != "" {
				c.add("spec-state", doc, "active but carries marked_at %v / marked_run %q", r.MarkedAt, r.MarkedRun)
			}
		case api.SpecMarked:
			if r.MarkedAt.IsZero() || r.MarkedRun == "" {
				c.add("spec-state", doc, "marked without marked_at (%v) or marked_run (%q)", r.MarkedAt, r.MarkedRun)
			}
		default:
			c.add("spec-state", doc, "state %q is neither active nor marked", r.State)
		}
		if r.Generation < 1 {
			c.add("spec-generation", doc, "generation %d: a stored spec has adopted at least one version", r.Generation)
		}
		if h := r.HeldBack; h != nil && h.SpecID != "" && h.SpecID != id {
			c.add("spec-id", doc, "holds back a version of spec %s", h.SpecID)
		}
	}
	if p := c.opts.Previous; p != nil {
		for _, id := range sortedKeys(p.Specs) {
			old := p.Specs[id]
			now, ok := byName[[2]string{old.Registry, old.Name}]
			if ok && now != id {
				c.add("spec-stable", store.SpecsCollection+"/"+now, "spec %q of registry %s had id %s, now %s", old.Name, old.Registry, id, now)
			}
		}
	}
}

// body checks the stored spec against its record.
func (c *checker) body(doc, id string, r store.SpecRecord) {
	sp, err := r.Spec()
	if err != nil {
		c.add("spec-body", doc, "%v", err)
		return
	}
	if sp.ID != id {
		c.add("spec-id", doc, "stored spec has id %q", sp.ID)
	}
	if sp.Name != r.Name {
		c.add("spec-body", doc, "stored spec is named %q, the record %q", sp.Name, r.Name)
	}
	// Ids are assigned before the digest is taken, so the digest of what
	// is stored is the recorded one.
	if d := spec.Digest(sp); d != r.Digest {
		c.add("spec-body", doc, "digest %s is not the content digest %s of the stored spec", r.Digest, d)
	}
	derived := spec.DeriveSpecID(r.Registry, sp.Name)
	seen := map[string]bool{}
	for i, p := range sp.Plans {
		switch {
		case p.ID == "":
			c.add("spec-body", doc, "plan %d (%s) has no id", i, p.Name)
		case seen[p.ID]:
			c.add("spec-body", doc, "plan id %s is used twice", p.ID)
		}
		seen[p.ID] = true
		// A plan id derived from another spec id than this one means the
		// spec's id changed under its plans.
		if id != derived && p.ID == spec.DerivePlanID(derived, p.Name) {
			c.add("spec-id", doc, "plan %s has the id derived from spec id %s, not from %s", p.Name, derived, id)
		}
	}
}

func (c *checker) registries() {
	if !c.opts.Settled {
		return
	}
	marked := map[string]int{}
	for _, r := range c.s.Specs {
		if r.State == api.SpecMarked {
			marked[r.Registry]++
		}
	}
	for _, name := range sortedKeys(c.s.Registries) {
		st := c.s.Registries[name]
		if st.LastRun.ID == "" {
			continue // never ran here (a contested_by or lease record only)
		}
		if st.Marked != marked[name] {
			c.add("registry-marked", store.RegistriesCollection+"/"+name, "records %d marked specs, %d are stored marked", st.Marked, marked[name])
		}
	}
}

func (c *checker) manifests() {
	for _, name := range sortedKeys(c.s.Registries) {
		st := c.s.Registries[name]
		if !st.ManifestTrusted() {
			continue
		}
		doc := store.RegistriesCollection + "/" + name
		h := st.Manifest
		entries := map[string]store.ManifestEntry{}
		listing := map[string]store.ListingPart{}
		whole := true
		byEntry := h.Layout == api.ManifestByEntry
		for i := range h.Shards {
			id := fmt.Sprintf("%s.%d", name, i)
			sh, ok := c.s.Manifests[id]
			if !ok || sh.Run != h.ShardRun(i) || sh.Shard != i || sh.Shards != h.Shards || sh.Registry != name {
				c.add("manifest", store.ManifestsCollection+"/"+id, "shard %d of the manifest of run %s is missing or another's (%+v)", i, h.ShardRun(i), sh)
				whole = false
				continue
			}
			m, err := sh.Decode()
			if err != nil {
				c.add("manifest", store.ManifestsCollection+"/"+id, "%v", err)
				whole = false
				continue
			}
			for _, e := range m.Entries {
				if _, dup := entries[e.SpecID]; dup {
					c.add("manifest", doc, "spec %s is in the manifest twice", e.SpecID)
				}
				entries[e.SpecID] = e
				// A run of named entries reads only their shards: an
				// entry elsewhere would never be seen by one.
				if byEntry && store.ManifestShardOf(e.Entry, h.Shards) != i {
					c.add("manifest", store.ManifestsCollection+"/"+id, "spec %s of entry %q is in shard %d, not in the entry's shard %d", e.SpecID, e.Entry, i, store.ManifestShardOf(e.Entry, h.Shards))
				}
			}
			for entry, p := range m.Listing {
				listing[entry] = p
				if byEntry && store.ManifestShardOf(entry, h.Shards) != i {
					c.add("manifest", store.ManifestsCollection+"/"+id, "the listing digest of entry %q is in shard %d, not in the entry's shard %d", entry, i, store.ManifestShardOf(entry, h.Shards))
				}
			}
		}
		if !whole {
			continue
		}
		if len(entries) != h.Entries {
			c.add("manifest", doc, "the header says %d entries, the shards hold %d", h.Entries, len(entries))
		}
		if active := countActive(entries); byEntry && active != h.Active {
			c.add("manifest", doc, "the header says %d active entries, the shards hold %d", h.Active, active)
		}
		for _, id := range sortedKeys(c.s.Specs) {
			r := c.s.Specs[id]
			if r.Registry != name {
				continue
			}
			e, ok := entries[id]
			switch {
			case !ok:
				c.add("manifest", doc, "spec %s (%s) is not in the trusted manifest: a run would never see it", id, r.Name)
			case e.Entry != r.Entry || e.Digest != r.Digest || e.State != r.State:
				c.add("manifest", doc, "spec %s: the manifest says entry %q digest %s %s, the store %q %s %s", id, e.Entry, e.Digest, e.State, r.Entry, r.Digest, r.State)
			case e.Clean && !r.Clean():
				c.add("manifest", doc, "spec %s is clean in the manifest, but %s with entry error %q and held back %v", id, r.State, r.EntryError, r.HeldBack != nil)
			}
		}
		for _, id := range sortedKeys(entries) {
			r, stored := c.s.Specs[id]
			if stored && r.Registry == name {
				continue
			}
			if e := entries[id]; e.State != api.SpecMarked {
				c.add("manifest", doc, "spec %s is in the manifest %s, but %s", id, e.State, describeOwner(r, stored))
			}
		}
		c.hints(doc, entries, listing)
	}
}

// hints checks what a run would hand a source as hints (an entry of the
// listing kept with its upstream digest and a spec's name, whose entry
// has one spec active and clean in the manifest): that spec must be
// stored as the hint says, the registry's, active and clean, under that
// name, so that the entry given back unread is exactly what reading it
// would give. (Its entry and digest are the manifest's, checked above.)
func (c *checker) hints(doc string, entries map[string]store.ManifestEntry, listing map[string]store.ListingPart) {
	clean := map[string][]string{}
	for id, e := range entries {
		if e.Clean && e.State == api.SpecActive {
			clean[e.Entry] = append(clean[e.Entry], id)
		}
	}
	for _, entry := range sortedKeys(listing) {
		p := listing[entry]
		if p.Upstream == "" || p.Spec == "" || len(clean[entry]) != 1 {
			continue
		}
		id := clean[entry][0]
		r, stored := c.s.Specs[id]
		switch {
		case !stored:
			c.add("manifest", doc, "entry %q is hinted as spec %s (%q), which is not stored", entry, id, p.Spec)
		case r.Name != p.Spec || !r.Clean() || r.State != api.SpecActive:
			c.add("manifest", doc, "entry %q is hinted as spec %s named %q, active and clean; the store has %q, %s, entry error %q, held back %v",
				entry, id, p.Spec, r.Name, r.State, r.EntryError, r.HeldBack != nil)
		}
	}
}

func describeOwner(r store.SpecRecord, stored bool) string {
	if !stored {
		return "not stored"
	}
	return "owned by registry " + r.Registry
}

func countActive(entries map[string]store.ManifestEntry) int {
	n := 0
	for _, e := range entries {
		if e.State == api.SpecActive {
			n++
		}
	}
	return n
}
