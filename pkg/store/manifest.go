package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/specsync/specsync/pkg/api"

	"cloud.google.com/go/firestore"
)

// ManifestsCollection holds the registries' manifests: manifests/{name}.{i},
// shard i of registry name's manifest.
const ManifestsCollection = "manifests"

// ManifestEntry is what a registry's manifest says of one spec it owns: the
// entry it came from, its digest and state, and whether it was clean
// (active, no entry error, nothing held back) when the run that wrote the
// manifest ended. It is all a run needs to find a listing entry
// unchanged without reading the spec.
type ManifestEntry struct {
	SpecID string
	Entry  string
	Digest string
	State  api.SpecState
	Clean  bool
}

// MarshalJSON encodes an entry as a JSON array, [id, entry, digest,
// state, clean], without key names: about 160 bytes an entry.
func (e ManifestEntry) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{e.SpecID, e.Entry, e.Digest, e.State, e.Clean})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (e *ManifestEntry) UnmarshalJSON(b []byte) error {
	var a []json.RawMessage
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if len(a) != 5 {
		return fmt.Errorf("manifest entry %s: want 5 fields", b)
	}
	for i, dst := range []any{&e.SpecID, &e.Entry, &e.Digest, &e.State, &e.Clean} {
		if err := json.Unmarshal(a[i], dst); err != nil {
			return fmt.Errorf("manifest entry %s: field %d: %w", b, i, err)
		}
	}
	return nil
}

// ListingPart is what a manifest keeps of one entry of the listing it
// describes: what it added to the listing digest, and, where the run
// that wrote it may hand it back as a hint (registry.Hint), what the
// source read it at and the name of the spec it gave.
type ListingPart struct {
	// Digest is what the entry added to the listing digest
	// (registry.EntryDigest).
	Digest string
	// Upstream is what the source read the entry at
	// (registry.Entry.Upstream: OCI, the read version and the manifest
	// digest), kept only for an entry that gave nothing (an image without
	// a spec label: Spec empty) or the one spec of its entry that the run
	// left active and clean, named Spec. Empty for every other entry
	// (broken, held back, conflicting, of a source without upstream
	// digests): those are read again.
	Upstream string
	Spec     string
}

// MarshalJSON encodes a part as a JSON array: [digest], or [digest,
// upstream, spec name]. A reader of the version before takes the first
// element and ignores the rest.
func (p ListingPart) MarshalJSON() ([]byte, error) {
	if p.Upstream == "" {
		return json.Marshal([]string{p.Digest})
	}
	return json.Marshal([]string{p.Digest, p.Upstream, p.Spec})
}

// ManifestShard is a manifests/{name}.{i} document. The entries are one
// JSON blob, not Firestore maps: a map field per entry would be an index
// entry per field, and 10,000 entries would pass Firestore's 40,000 index
// entries a document long before its 1 MiB. Listing is a blob too: a JSON
// object of the listing entries placed in the shard, each an array
// (ListingPart) whose first element is what the entry added to the
// listing digest (registry.EntryDigest), then, for an entry a run may
// hand back as a hint, its upstream digest and spec name.
type ManifestShard struct {
	Registry string `firestore:"registry"`
	Run      string `firestore:"run"`
	Shard    int    `firestore:"shard"`
	Shards   int    `firestore:"shards"`
	Entries  []byte `firestore:"entries"`
	Listing  []byte `firestore:"listing,omitempty"`
}

// Manifest is a registry's manifest, or the part of it in some shards:
// what it says of each spec (Entries), and what each entry of the listing
// it describes added to the listing's digest, with its upstream digest
// where it may be a hint (Listing, by entry name; an entry the listing did
// not hold is absent).
type Manifest struct {
	Entries []ManifestEntry
	Listing map[string]ListingPart
}

// ManifestPart is one shard of a by-entry manifest as read: everything it
// holds of the entries whose names hash to it (ManifestShardOf).
type ManifestPart struct {
	Shard int
	Manifest
	// Bytes is the shard's size: a part near the limit is left to a full
	// run, which shards again (Roomy).
	Bytes int
}

// manifestShardBytes bounds a shard's blobs, under Firestore's 1 MiB a
// document with room for the rest. A full run fills shards to at most
// two thirds of it (manifestFill), so the runs of named entries between
// two full runs can grow a shard by a third before one is left to a full
// run (Roomy).
var manifestShardBytes = 900 << 10

func manifestFill() int { return manifestShardBytes * 2 / 3 }

// targetedGrowth bounds what one run of named entries adds to a shard:
// queue.MaxEntries entries of the longest names, each with a spec entry
// and its listing digest.
const targetedGrowth = 100 * 2 * (512 + 256)

// Roomy reports whether a run of named entries may rewrite the part:
// whatever it adds keeps the shard under the limit.
func (p *ManifestPart) Roomy() bool { return p.Bytes+targetedGrowth <= manifestShardBytes }

func (s *Store) manifestShard(registry string, i int) *firestore.DocumentRef {
	return s.client.Collection(ManifestsCollection).Doc(fmt.Sprintf("%s.%d", registry, i))
}

// ManifestShardOf is the shard of a by-entry manifest of shards shards
// that holds an entry name's specs and listing digest: the first four
// bytes of the name's SHA-256, modulo the shard count (a power of two).
func ManifestShardOf(entry string, shards int) int {
	if shards <= 1 {
		return 0
	}
	sum := sha256.Sum256([]byte(entry))
	return int(binary.BigEndian.Uint32(sum[:4]) % uint32(shards))
}

// encodedShard is a shard's two blobs.
type encodedShard struct{ entries, listing []byte }

func (e encodedShard) size() int { return len(e.entries) + len(e.listing) }

// encodeManifest places the entries and listing digests in shards by
// entry name (ManifestShardOf), as few as keep every shard within
// manifestFill: a power of two, so that a registry that grows doubles
// them (at least one shard, maybe empty). Each entry and listing part is
// encoded once: the shard count is chosen from their sizes, and each
// shard's blobs are joined from them, the bytes encodeShard gives its
// part (a JSON array of the entries in order, a JSON object of the parts
// by name).
func encodeManifest(m Manifest) ([]encodedShard, error) {
	sorted := inShardOrder(m.Entries)
	entries := make([]encodedPiece, len(sorted))
	for i, e := range sorted {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		entries[i] = encodedPiece{name: e.Entry, b: b}
	}
	names := slices.Sorted(maps.Keys(m.Listing))
	listing := make([]encodedPiece, len(names))
	for i, name := range names {
		k, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.Listing[name])
		if err != nil {
			return nil, err
		}
		listing[i] = encodedPiece{name: name, b: append(append(k, ':'), v...)}
	}
	for n := 1; ; n *= 2 {
		es, ls := spread(entries, n), spread(listing, n)
		fits := true
		for i := range n {
			fits = fits && joinedSize(es[i], true)+joinedSize(ls[i], false) <= manifestFill()
		}
		if fits || n >= 1<<16 {
			shards := make([]encodedShard, n)
			for i := range shards {
				shards[i] = encodedShard{entries: join(es[i], '[', ']', true), listing: join(ls[i], '{', '}', false)}
			}
			return shards, nil
		}
	}
}

// encodedPiece is one entry of a manifest, or one part of its listing
// (`"name":part`), encoded, with the entry name that places it.
type encodedPiece struct {
	name string
	b    []byte
}

// spread places pieces in n shards by name, keeping their order.
func spread(pieces []encodedPiece, n int) [][]encodedPiece {
	out := make([][]encodedPiece, n)
	for _, p := range pieces {
		i := ManifestShardOf(p.name, n)
		out[i] = append(out[i], p)
	}
	return out
}

// joinedSize is the size of join's result.
func joinedSize(pieces []encodedPiece, always bool) int {
	if len(pieces) == 0 {
		if always {
			return 2
		}
		return 0
	}
	n := 2 + len(pieces) - 1
	for _, p := range pieces {
		n += len(p.b)
	}
	return n
}

// join is pieces as a JSON array or object (open, end): none is an
// empty one if always, else nothing.
func join(pieces []encodedPiece, open, end byte, always bool) []byte {
	if len(pieces) == 0 && !always {
		return nil
	}
	out := make([]byte, 0, joinedSize(pieces, always))
	out = append(out, open)
	for i, p := range pieces {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, p.b...)
	}
	return append(out, end)
}

// inShardOrder is the entries sorted by entry then spec id, the order a
// shard keeps them in.
func inShardOrder(es []ManifestEntry) []ManifestEntry {
	sorted := append([]ManifestEntry(nil), es...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Entry != sorted[j].Entry {
			return sorted[i].Entry < sorted[j].Entry
		}
		return sorted[i].SpecID < sorted[j].SpecID
	})
	return sorted
}

// encodeShard encodes one shard: its entries sorted by entry then spec
// id, its listing digests by entry name, so that equal parts encode to
// equal bytes.
func encodeShard(p Manifest) (encodedShard, error) {
	sorted := inShardOrder(p.Entries)
	if sorted == nil {
		sorted = []ManifestEntry{}
	}
	entries, err := json.Marshal(sorted)
	if err != nil {
		return encodedShard{}, err
	}
	out := encodedShard{entries: entries}
	if len(p.Listing) > 0 {
		if out.listing, err = json.Marshal(p.Listing); err != nil {
			return encodedShard{}, err
		}
	}
	return out, nil
}

// ReadManifest reads the manifest h names, one read a shard. It returns
// nil (and no error) when the shards do not all belong to h (written by
// another run: two runs of one registry at once without a lease), which
// the caller takes as "no manifest": it reads every spec instead.
func (s *Store) ReadManifest(ctx context.Context, registry string, h *ManifestHeader) (*Manifest, error) {
	if h == nil || h.Shards <= 0 {
		return nil, nil
	}
	idx := make([]int, h.Shards)
	for i := range idx {
		idx[i] = i
	}
	parts, err := s.readShards(ctx, registry, h, idx)
	if err != nil || parts == nil {
		return nil, err
	}
	out := &Manifest{Listing: map[string]ListingPart{}}
	for _, p := range parts {
		out.Entries = append(out.Entries, p.Entries...)
		maps.Copy(out.Listing, p.Listing)
	}
	if len(out.Entries) != h.Entries {
		return nil, nil
	}
	return out, nil
}

// ReadManifestShards reads the shards of a by-entry manifest that hold
// the given entry names, one read a shard: what a run of those entries
// needs. It returns nil (and no error) when the manifest is not by entry
// or a shard does not belong to h, as ReadManifest does.
func (s *Store) ReadManifestShards(ctx context.Context, registry string, h *ManifestHeader, entries []string) (map[int]*ManifestPart, error) {
	if h == nil || h.Shards <= 0 || h.Layout != api.ManifestByEntry {
		return nil, nil
	}
	var idx []int
	for _, e := range entries {
		if i := ManifestShardOf(e, h.Shards); !slices.Contains(idx, i) {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	parts, err := s.readShards(ctx, registry, h, idx)
	if err != nil || parts == nil {
		return nil, err
	}
	out := make(map[int]*ManifestPart, len(parts))
	for _, p := range parts {
		out[p.Shard] = p
	}
	return out, nil
}

// readShards reads shards idx of the manifest h names; nil when one is
// missing, another run's, or not where h says.
func (s *Store) readShards(ctx context.Context, registry string, h *ManifestHeader, idx []int) ([]*ManifestPart, error) {
	refs := make([]*firestore.DocumentRef, len(idx))
	for i, n := range idx {
		refs[i] = s.manifestShard(registry, n)
	}
	snaps, err := s.client.GetAll(ctx, refs)
	s.ops.read(len(refs))
	if err != nil {
		return nil, classify(err, "read the manifest of registry %s", registry)
	}
	out := make([]*ManifestPart, 0, len(snaps))
	for j, snap := range snaps {
		i := idx[j]
		if !snap.Exists() {
			return nil, nil
		}
		var sh ManifestShard
		if err := snap.DataTo(&sh); err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		if sh.Run != h.ShardRun(i) || sh.Shard != i || sh.Shards != h.Shards || sh.Registry != registry {
			return nil, nil
		}
		m, err := sh.Decode()
		if err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		out = append(out, &ManifestPart{Shard: i, Manifest: m, Bytes: len(sh.Entries) + len(sh.Listing)})
	}
	return out, nil
}

// Decode returns what the shard holds.
func (sh *ManifestShard) Decode() (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(sh.Entries, &m.Entries); err != nil {
		return m, fmt.Errorf("manifest shard %d of registry %s: entries do not decode: %w", sh.Shard, sh.Registry, err)
	}
	if len(sh.Listing) == 0 {
		return m, nil
	}
	var listing map[string][]json.RawMessage
	if err := json.Unmarshal(sh.Listing, &listing); err != nil {
		return m, fmt.Errorf("manifest shard %d of registry %s: listing does not decode: %w", sh.Shard, sh.Registry, err)
	}
	m.Listing = make(map[string]ListingPart, len(listing))
	for entry, fields := range listing {
		var p ListingPart
		if len(fields) == 0 || json.Unmarshal(fields[0], &p.Digest) != nil {
			return m, fmt.Errorf("manifest shard %d of registry %s: listing entry %q has no digest", sh.Shard, sh.Registry, entry)
		}
		if len(fields) >= 3 && (json.Unmarshal(fields[1], &p.Upstream) != nil || json.Unmarshal(fields[2], &p.Spec) != nil) {
			return m, fmt.Errorf("manifest shard %d of registry %s: listing entry %q: its upstream digest and spec name are not strings", sh.Shard, sh.Registry, entry)
		}
		m.Listing[entry] = p
	}
	return m, nil
}

// BeginWriting records, before a run's first write, that run id writes
// the registry's specs now: until that run records a manifest, the one
// recorded before no longer describes the store (RecordRunWithManifest).
// A run holding the lease need not: AcquireLease records it in the same
// write.
func (s *Store) BeginWriting(ctx context.Context, registry, run string) error {
	if _, err := s.registries().Doc(registry).Set(ctx, map[string]any{"writer": run}, firestore.Merge(firestore.FieldPath{"writer"})); err != nil {
		return classify(err, "record the run writing registry %s", registry)
	}
	s.ops.write(1)
	return nil
}

// Seen is what a run saw of its registry's status when it started, and
// whether it began writing (BeginWriting, AcquireLease).
type Seen struct {
	LastRun, Writer string
	Began           bool
}

// RecordRunWithManifest is RecordRun for a run that planned over every
// spec of the registry: with the status it writes the manifest of what
// the run left (m, sharded by entry), in one transaction, if nothing else
// may have written the specs since the run read them: the registry's
// writer is still this run (it began writing) or still the one it saw (it
// wrote no spec), and its last recorded run is still the one it saw at
// its start (none finished meanwhile). The run then becomes the writer of
// record, which the manifest names. Otherwise it records the run with no
// manifest, so no later run trusts one. It reports whether the manifest
// was written.
func (s *Store) RecordRunWithManifest(ctx context.Context, name string, run *Run, success bool, digest, etag string, marked int, saw Seen, m Manifest) (bool, error) {
	shards, err := encodeManifest(m)
	if err != nil {
		return false, classify(err, "encode the manifest of registry %s", name)
	}
	active := activeEntries(m.Entries)
	ref := s.registries().Doc(name)
	base := run.Ops
	var written bool
	var writes, deletes int
	err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		written, writes, deletes = false, 1, 0
		cur, err := txGet[RegistryStatus](s, tx, ref)
		if err != nil {
			return err
		}
		writer := saw.Writer
		if saw.Began {
			writer = run.ID
		}
		ours := cur != nil && cur.Writer == writer && cur.LastRun.ID == saw.LastRun
		if cur == nil {
			ours = !saw.Began && saw.Writer == "" && saw.LastRun == "" // a registry never recorded, and nobody began since
		}
		keep := 0 // shards of the previous manifest that are overwritten
		if ours {
			keep = len(shards)
			for i, b := range shards {
				if err := tx.Set(s.manifestShard(name, i), ManifestShard{Registry: name, Run: run.ID, Shard: i, Shards: len(shards), Entries: b.entries, Listing: b.listing}); err != nil {
					return err
				}
			}
			writes += len(shards)
		}
		if cur != nil && cur.Manifest != nil {
			for i := keep; i < cur.Manifest.Shards; i++ {
				if err := tx.Delete(s.manifestShard(name, i)); err != nil {
					return err
				}
				deletes++
			}
		}
		// The run's record counts what recording it costs.
		run.Ops = Counts{Reads: base.Reads + 1, Writes: base.Writes + int64(writes), Deletes: base.Deletes + int64(deletes)}
		data := runRecord(name, *run, success, digest, etag, marked)
		if !ours {
			data["manifest"] = firestore.Delete
			return tx.Set(ref, data, firestore.Merge(mergePaths(data)...))
		}
		data["manifest"] = ManifestHeader{Run: run.ID, Shards: len(shards), Entries: len(m.Entries), At: s.now().UTC(),
			Layout: api.ManifestByEntry, Active: active}
		data["writer"] = run.ID
		written = true
		return tx.Set(ref, data, firestore.Merge(mergePaths(data)...))
	})
	if err != nil {
		run.Ops = base
		return false, classify(err, "record run of registry %s", name)
	}
	s.ops.write(writes)
	s.ops.delete(deletes)
	return written, nil
}

// TargetedRecord is what a targeted run (one of named entries) records
// besides itself (RecordTargetedRun).
type TargetedRecord struct {
	// Saw is the status as it was when the run took the lease: the
	// manifest header it read its shards under, the last full run.
	Saw *RegistryStatus
	// Manifest says the run may restore trust in the manifest: it
	// finished, from a trusted by-entry manifest. Read are the shards it
	// read (ReadManifestShards), and Parts those it changed, each whole
	// as it leaves it (the shards it did not change are not rewritten).
	Manifest bool
	Read     map[int]*ManifestPart
	Parts    map[int]Manifest
	// Digest is the listing digest as the run leaves it: worked out for
	// the entries it saw, or "" (the next full run does the full work).
	// A changed digest drops the ETag, which described the old listing.
	Digest string
	// Marked is how many more of the registry's specs are marked (or,
	// negative, fewer) after the run.
	Marked int
	// Covered are the entries the run reconciled (it finished): each is
	// recorded as covered from the run's start.
	Covered []string
}

// RecordTargetedRun records a targeted run in its registry's status:
// last_targeted_run (never last_run: the last full run stays the
// baseline), the entries it covered, the marked count, the listing
// digest, and the shards of the manifest it changed, releasing its lease,
// in one transaction. The manifest is trusted again (its header names
// this run, which is the writer) only if nothing else wrote meanwhile:
// the run still holds the lease and is still the writer, no full run
// recorded since it took the lease, and the header is the one it read
// its shards under. Otherwise the manifest is withdrawn (and the run
// named the writer), so no later run trusts one, and the digest is
// cleared. It reports whether the manifest was written.
func (s *Store) RecordTargetedRun(ctx context.Context, name string, run *Run, t TargetedRecord) (bool, error) {
	saw := t.Saw
	if saw == nil {
		saw = &RegistryStatus{}
	}
	type part struct {
		i int
		b encodedShard
	}
	var parts []part
	for i, m := range t.Parts {
		b, err := encodeShard(m)
		if err != nil {
			return false, classify(err, "encode shard %d of the manifest of registry %s", i, name)
		}
		if b.size() > manifestShardBytes {
			t.Manifest = false // a full run shards again
		}
		parts = append(parts, part{i, b})
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].i < parts[j].i })
	ref := s.registries().Doc(name)
	base := run.Ops
	var written bool
	var writes int
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		written, writes = false, 1
		cur, err := txGet[RegistryStatus](s, tx, ref)
		if err != nil {
			return err
		}
		if cur == nil {
			cur = &RegistryStatus{}
		}
		held := heldBy(cur, run.ID)
		ours := held && cur.Writer == run.ID && cur.LastRun.ID == saw.LastRun.ID && sameHeader(cur.Manifest, saw.Manifest)
		h := cur.Manifest
		trusted := ours && t.Manifest && h != nil && h.Layout == api.ManifestByEntry
		data := map[string]any{
			"name":    name,
			"marked":  max(cur.Marked+t.Marked, 0),
			"covered": coveredAfter(cur.Covered, t.Covered, run.StartedAt),
		}
		if held {
			data["lease"] = firestore.Delete
		}
		digest := t.Digest
		if !trusted {
			digest = ""
		}
		if digest != cur.ListingDigest {
			data["listing_digest"], data["etag"] = digest, ""
		}
		if trusted {
			next := *h
			next.ShardRuns = make([]string, h.Shards)
			for i := range next.ShardRuns {
				next.ShardRuns[i] = h.ShardRun(i)
			}
			for _, p := range parts {
				if p.i < 0 || p.i >= h.Shards {
					return fmt.Errorf("shard %d of a manifest of %d", p.i, h.Shards)
				}
				if err := tx.Set(s.manifestShard(name, p.i), ManifestShard{Registry: name, Run: run.ID, Shard: p.i, Shards: h.Shards, Entries: p.b.entries, Listing: p.b.listing}); err != nil {
					return err
				}
				next.ShardRuns[p.i] = run.ID
				writes++
			}
			next.Entries, next.Active = h.Entries, h.Active
			for _, p := range parts {
				next.Entries += len(t.Parts[p.i].Entries) - t.oldEntries(p.i, false)
				next.Active += activeEntries(t.Parts[p.i].Entries) - t.oldEntries(p.i, true)
			}
			next.Run, next.At = run.ID, s.now().UTC()
			data["manifest"] = next
			written = true
		} else {
			data["manifest"] = firestore.Delete
			// It may have written specs: whatever manifest another run
			// records, it does not describe them.
			data["writer"] = run.ID
		}
		run.Ops = Counts{Reads: base.Reads + 1, Writes: base.Writes + int64(writes), Deletes: base.Deletes}
		data["last_targeted_run"] = *run
		return tx.Set(ref, data, firestore.Merge(mergePaths(data)...))
	})
	if err != nil {
		run.Ops = base
		return false, classify(err, "record targeted run of registry %s", name)
	}
	s.ops.write(writes)
	return written, nil
}

// oldEntries counts the entries (active ones, if active) of shard i as
// the run read it.
func (t TargetedRecord) oldEntries(i int, active bool) int {
	p := t.Read[i]
	if p == nil {
		return 0
	}
	if active {
		return activeEntries(p.Entries)
	}
	return len(p.Entries)
}

func activeEntries(es []ManifestEntry) int {
	n := 0
	for _, e := range es {
		if e.State == api.SpecActive {
			n++
		}
	}
	return n
}

// sameHeader reports whether two manifest headers name the same manifest.
func sameHeader(a, b *ManifestHeader) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Run == b.Run && a.Shards == b.Shards && a.Layout == b.Layout && slices.Equal(a.ShardRuns, b.ShardRuns)
}

// coveredAfter is the covered list with entries put first, at, and the
// rest after them (each entry once, at most api.MaxCovered).
func coveredAfter(old []CoveredEntry, entries []string, at time.Time) []CoveredEntry {
	out := make([]CoveredEntry, 0, min(len(old)+len(entries), api.MaxCovered))
	seen := map[string]bool{}
	for _, e := range entries {
		if !seen[e] && len(out) < api.MaxCovered {
			seen[e] = true
			out = append(out, CoveredEntry{Entry: e, At: at})
		}
	}
	for _, c := range old {
		if !seen[c.Entry] && len(out) < api.MaxCovered {
			seen[c.Entry] = true
			out = append(out, c)
		}
	}
	return out
}
