package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

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

// ManifestShard is a manifests/{name}.{i} document. The entries are one
// JSON blob, not Firestore maps: a map field per entry would be an index
// entry per field, and 10,000 entries would pass Firestore's 40,000 index
// entries a document long before its 1 MiB.
type ManifestShard struct {
	Registry string `firestore:"registry"`
	Run      string `firestore:"run"`
	Shard    int    `firestore:"shard"`
	Shards   int    `firestore:"shards"`
	Entries  []byte `firestore:"entries"`
}

// manifestShardBytes bounds a shard's entries, under Firestore's 1 MiB a
// document with room for the rest. An entry is about 160 bytes, so 10,000
// entries take two shards.
var manifestShardBytes = 900 << 10

func (s *Store) manifestShard(registry string, i int) *firestore.DocumentRef {
	return s.client.Collection(ManifestsCollection).Doc(fmt.Sprintf("%s.%d", registry, i))
}

// encodeManifest sorts the entries by spec id and splits them into shards
// of at most manifestShardBytes each (at least one shard, maybe empty).
func encodeManifest(entries []ManifestEntry) ([][]byte, error) {
	sorted := append([]ManifestEntry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].SpecID < sorted[j].SpecID })
	var shards [][]byte
	var cur []json.RawMessage
	size := 0
	flush := func() error {
		b, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		shards = append(shards, b)
		cur, size = nil, 0
		return nil
	}
	for _, e := range sorted {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		if len(cur) > 0 && size+len(b)+1 > manifestShardBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		cur = append(cur, b)
		size += len(b) + 1
	}
	if len(cur) > 0 || len(shards) == 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return shards, nil
}

// ReadManifest reads the manifest h names, one read a shard. It returns
// nil (and no error) when the shards do not all belong to h (written by
// another run: two runs of one registry at once without a lease), which
// the caller takes as "no manifest": it reads every spec instead.
func (s *Store) ReadManifest(ctx context.Context, registry string, h *ManifestHeader) ([]ManifestEntry, error) {
	if h == nil || h.Shards <= 0 {
		return nil, nil
	}
	refs := make([]*firestore.DocumentRef, h.Shards)
	for i := range refs {
		refs[i] = s.manifestShard(registry, i)
	}
	snaps, err := s.client.GetAll(ctx, refs)
	s.ops.read(len(refs))
	if err != nil {
		return nil, classify(err, "read the manifest of registry %s", registry)
	}
	var out []ManifestEntry
	for i, snap := range snaps {
		if !snap.Exists() {
			return nil, nil
		}
		var sh ManifestShard
		if err := snap.DataTo(&sh); err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		if sh.Run != h.Run || sh.Shard != i || sh.Shards != h.Shards || sh.Registry != registry {
			return nil, nil
		}
		es, err := sh.Decode()
		if err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		out = append(out, es...)
	}
	if len(out) != h.Entries {
		return nil, nil
	}
	return out, nil
}

// Decode returns the shard's entries.
func (sh *ManifestShard) Decode() ([]ManifestEntry, error) {
	var es []ManifestEntry
	if err := json.Unmarshal(sh.Entries, &es); err != nil {
		return nil, fmt.Errorf("manifest shard %d of registry %s: entries do not decode: %w", sh.Shard, sh.Registry, err)
	}
	return es, nil
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
// the run left, in one transaction, if nothing else may have written the
// specs since the run read them: the registry's writer is still this run
// (it began writing) or still the one it saw (it wrote no spec), and its
// last recorded run is still the one it saw at its start (none finished
// meanwhile). The run then becomes the writer of record, which the
// manifest names. Otherwise it records the run with no manifest, so no
// later run trusts one. It reports whether the manifest was written.
func (s *Store) RecordRunWithManifest(ctx context.Context, name string, run *Run, success bool, digest, etag string, marked int, saw Seen, entries []ManifestEntry) (bool, error) {
	shards, err := encodeManifest(entries)
	if err != nil {
		return false, classify(err, "encode the manifest of registry %s", name)
	}
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
				if err := tx.Set(s.manifestShard(name, i), ManifestShard{Registry: name, Run: run.ID, Shard: i, Shards: len(shards), Entries: b}); err != nil {
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
		data, paths := runRecord(name, *run, success, digest, etag, marked)
		paths = append(paths, firestore.FieldPath{"manifest"})
		if !ours {
			data["manifest"] = firestore.Delete
			return tx.Set(ref, data, firestore.Merge(paths...))
		}
		data["manifest"] = ManifestHeader{Run: run.ID, Shards: len(shards), Entries: len(entries), At: s.now().UTC()}
		data["writer"] = run.ID
		paths = append(paths, firestore.FieldPath{"writer"})
		written = true
		return tx.Set(ref, data, firestore.Merge(paths...))
	})
	if err != nil {
		run.Ops = base
		return false, classify(err, "record run of registry %s", name)
	}
	s.ops.write(writes)
	s.ops.delete(deletes)
	return written, nil
}
