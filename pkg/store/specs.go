package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/spec"
)

// SpecRecord is a specs/{id} document. The spec itself is kept as its
// canonical JSON so that it round-trips exactly (Firestore maps would turn
// every number into a float or an int by guesswork) and so its digest can
// be recomputed from what is stored.
type SpecRecord struct {
	ID        string        `firestore:"id"`
	Registry  string        `firestore:"registry"`
	Entry     string        `firestore:"entry"`
	Ref       string        `firestore:"ref"`
	Name      string        `firestore:"name"`
	Digest    string        `firestore:"digest"`
	SpecJSON  string        `firestore:"spec"`
	State     api.SpecState `firestore:"state"`
	Platforms []string      `firestore:"platforms"`
	// Generation counts the versions adopted: 1 when created, +1 for each
	// new content adopted. A held-back version does not count; the plans'
	// OSB maintenance_info is derived from it.
	Generation int64 `firestore:"generation"`
	// Instances, PlanInstances and PlatformInstances are the spec's usage:
	// how many instances it has, per plan id and per OCI platform. They
	// are never stored on the spec (a provision would write this document,
	// and every provision of the spec would queue on it): the readers
	// that decide with them (the reconcile's, the operators') count the
	// instance records (countUsage, usage.go). They are what holds back a
	// version that would strand instances. Documents written before carry
	// stale counters under these names; nothing reads them.
	Instances         int64            `firestore:"-"`
	PlanInstances     map[string]int64 `firestore:"-"`
	PlatformInstances map[string]int64 `firestore:"-"`
	CreatedAt         time.Time        `firestore:"created_at"`
	UpdatedAt         time.Time        `firestore:"updated_at"`
	// Set while State is marked.
	MarkedAt  time.Time `firestore:"marked_at,omitempty"`
	MarkedRun string    `firestore:"marked_run,omitempty"`
	// The last error of the registry entry this spec came from; the spec
	// above is its last good version.
	EntryError   string    `firestore:"entry_error,omitempty"`
	EntryErrorAt time.Time `firestore:"entry_error_at,omitempty"`
	// HeldBack is the newer version the registry offers and the store did
	// not adopt, with what blocks it; cleared when a version is adopted or
	// the registry offers the stored one again.
	HeldBack *HeldBackSpec `firestore:"held_back,omitempty"`
	// ReadAt is the document's update time when it was read (not stored):
	// a write decided on what was read is conditional on it
	// (UpdateSpecs, MarkSpecs).
	ReadAt time.Time `firestore:"-"`
}

// fromSnapshot implements snapshotted: the update time it was read at.
func (r *SpecRecord) fromSnapshot(snap *firestore.DocumentSnapshot) { r.ReadAt = snap.UpdateTime }

// Clean reports whether the spec is active with no entry error and
// nothing held back: what a manifest entry may call clean.
func (r *SpecRecord) Clean() bool {
	return r.State == api.SpecActive && r.EntryError == "" && r.HeldBack == nil
}

// offerTarget is what deciding an offer needs of the record (DecideOffer).
func (r *SpecRecord) offerTarget() *OfferTarget {
	return &OfferTarget{Entry: r.Entry, Digest: r.Digest, State: r.State, EntryError: r.EntryError != "", HeldBack: r.HeldBack != nil}
}

// Spec decodes the stored spec.
func (r *SpecRecord) Spec() (*spec.Spec, error) { return decodeSpec(r.ID, r.SpecJSON) }

func decodeSpec(id, body string) (*spec.Spec, error) {
	var s spec.Spec
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		return nil, failure.Wrap(failure.Invalid, fmt.Errorf("spec %s: stored spec does not decode: %w", id, err))
	}
	return &s, nil
}

// snapshotted is a document type that keeps something of its snapshot
// beyond the fields (Change keeps its create time).
type snapshotted interface {
	fromSnapshot(*firestore.DocumentSnapshot)
}

// queryAll runs a query and decodes every result into a T, counting the
// reads. A record that finishes its decoding (finish: an instance's
// context) does so once the query is read in full and counted, so a
// record whose context does not decode fails the query at the cost of
// all of it.
func queryAll[T any](ctx context.Context, s *Store, q firestore.Query, what string) ([]T, error) {
	it := q.Documents(ctx)
	defer it.Stop()
	var out []T
	for {
		snap, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return nil, classify(err, "query %s", what)
		}
		var v T
		if err := snap.DataTo(&v); err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		if sv, ok := any(&v).(snapshotted); ok {
			sv.fromSnapshot(snap)
		}
		out = append(out, v)
	}
	s.ops.read(len(out))
	for i := range out {
		if err := finish(&out[i]); err != nil {
			return nil, classify(err, "decode %s", what)
		}
	}
	return out, nil
}

// OwnedSpecs returns every spec the registry owns, active or marked,
// with its usage.
func (s *Store) OwnedSpecs(ctx context.Context, registry string) ([]SpecRecord, error) {
	return s.querySpecs(ctx, s.specs().Where("registry", "==", registry), "specs of registry "+registry)
}

// MarkedSpecs returns the registry's specs that are marked for deletion,
// with their usage.
func (s *Store) MarkedSpecs(ctx context.Context, registry string) ([]SpecRecord, error) {
	q := s.specs().Where("registry", "==", registry).Where("state", "==", api.SpecMarked)
	return s.querySpecs(ctx, q, "marked specs of registry "+registry)
}

// RegistrySpecs reads the specs with the given ids that registry owns, in
// id order, one read each, with their usage: a missing spec, or one
// another registry owns now, is left out.
func (s *Store) RegistrySpecs(ctx context.Context, registry string, ids []string) ([]SpecRecord, error) {
	all, err := s.specsByID(ctx, ids)
	if err != nil {
		return nil, classify(err, "read %d specs of registry %s", len(ids), registry)
	}
	out := all[:0]
	for _, r := range all {
		if r.Registry == registry {
			out = append(out, r)
		}
	}
	return s.countUsage(ctx, out)
}

// SpecsByID reads the specs with the given ids, whoever owns them, in id
// order, one read each (with the update time each was read at), with
// their usage; a missing one is left out.
func (s *Store) SpecsByID(ctx context.Context, ids []string) ([]SpecRecord, error) {
	recs, err := s.specsByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	return s.countUsage(ctx, recs)
}

func (s *Store) specsByID(ctx context.Context, ids []string) ([]SpecRecord, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = s.specs().Doc(id)
	}
	snaps, err := s.client.GetAll(ctx, refs)
	s.ops.read(len(refs))
	if err != nil {
		return nil, classify(err, "read %d specs", len(ids))
	}
	var out []SpecRecord
	for _, snap := range snaps {
		if !snap.Exists() {
			continue
		}
		var r SpecRecord
		if err := snap.DataTo(&r); err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		r.fromSnapshot(snap)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// RegistrySpecsNamed returns the registry's specs named name, whatever
// their id (spec names are unique within a registry's listing, ids are
// not always derived from them), in id order: one read each, one if
// there is none.
func (s *Store) RegistrySpecsNamed(ctx context.Context, registry, name string) ([]SpecRecord, error) {
	q := s.specs().Where("registry", "==", registry).Where("name", "==", name)
	out, err := s.querySpecs(ctx, q, "specs of registry "+registry+" named "+name)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ActiveSpecs returns every spec the catalog serves, in id order.
func (s *Store) ActiveSpecs(ctx context.Context) ([]SpecRecord, error) {
	return s.ActiveSpecsAt(ctx, time.Time{})
}

// ActiveSpecsAt is ActiveSpecs as of readTime (a snapshot read time, such
// as RevisionAt's; zero is now): the specs exactly as they were then, all
// of them from one snapshot. Sorting happens here rather than in the
// query: equality on one field and order on another would need a
// composite index.
func (s *Store) ActiveSpecsAt(ctx context.Context, readTime time.Time) ([]SpecRecord, error) {
	q := s.specs().Where("state", "==", api.SpecActive)
	if !readTime.IsZero() {
		q.WithReadOptions(firestore.ReadTime(readTime))
	}
	out, err := queryAll[SpecRecord](ctx, s, q, "active specs")
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// GetSpec reads one spec with its usage; a missing one is a
// failure.NotFound.
func (s *Store) GetSpec(ctx context.Context, id string) (*SpecRecord, error) {
	snap, err := s.specs().Doc(id).Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return nil, failure.New(failure.NotFound, "spec %s does not exist", id)
	}
	if err != nil {
		return nil, classify(err, "read spec %s", id)
	}
	var r SpecRecord
	if err := snap.DataTo(&r); err != nil {
		return nil, classify(err, "decode spec %s", id)
	}
	recs, err := s.countUsage(ctx, []SpecRecord{r})
	if err != nil {
		return nil, err
	}
	return &recs[0], nil
}
