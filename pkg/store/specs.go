package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/specsync/specsync/pkg/api"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	Instances  int64 `firestore:"instances"`
	// PlanInstances and PlatformInstances count the instances per plan id
	// and per OCI platform, kept in the same transactions as Instances:
	// they are what holds back a version that would strand instances.
	PlanInstances     map[string]int64 `firestore:"plan_instances,omitempty"`
	PlatformInstances map[string]int64 `firestore:"platform_instances,omitempty"`
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
// reads.
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
	return out, nil
}

// OwnedSpecs returns every spec the registry owns, active or marked.
func (s *Store) OwnedSpecs(ctx context.Context, registry string) ([]SpecRecord, error) {
	return queryAll[SpecRecord](ctx, s, s.specs().Where("registry", "==", registry), "specs of registry "+registry)
}

// MarkedSpecs returns the registry's specs that are marked for deletion.
func (s *Store) MarkedSpecs(ctx context.Context, registry string) ([]SpecRecord, error) {
	q := s.specs().Where("registry", "==", registry).Where("state", "==", api.SpecMarked)
	return queryAll[SpecRecord](ctx, s, q, "marked specs of registry "+registry)
}

// RegistrySpecs reads the specs with the given ids that registry owns, in
// id order, one read each: a missing spec, or one another registry owns
// now, is left out.
func (s *Store) RegistrySpecs(ctx context.Context, registry string, ids []string) ([]SpecRecord, error) {
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
		return nil, classify(err, "read %d specs of registry %s", len(ids), registry)
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
		if r.Registry != registry {
			continue
		}
		r.fromSnapshot(snap)
		out = append(out, r)
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

// GetSpec reads one spec; a missing one is a failure.NotFound.
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
	return &r, nil
}

// Offer is one spec a registry offers, to be upserted.
type Offer struct {
	Registry string
	Entry    string
	Ref      string
	Spec     *spec.Spec // ids assigned
	Digest   string
	Run      string // the run writing it, recorded on its change
}

// UpsertOutcome says what UpsertSpec did.
type UpsertOutcome string

// Upsert outcomes.
const (
	Created   UpsertOutcome = "created"
	Updated   UpsertOutcome = "updated"   // content changed (and unmarked if it was marked)
	Unmarked  UpsertOutcome = "unmarked"  // same content, was marked
	Repaired  UpsertOutcome = "repaired"  // same content, entry error cleared
	Unchanged UpsertOutcome = "unchanged" // nothing written
	Conflict  UpsertOutcome = "conflict"  // the id belongs to another registry; nothing written
)

// UpsertResult is the outcome and, for a conflict, the current owner.
type UpsertResult struct {
	Outcome UpsertOutcome
	Owner   string
}

// UpsertSpec writes an offered spec in one transaction: it re-reads the
// document, leaves a spec owned by another registry alone (a conflict),
// writes nothing when the digest is unchanged, and otherwise creates,
// updates or unmarks it. The instance count is never touched here.
func (s *Store) UpsertSpec(ctx context.Context, o Offer) (UpsertResult, error) {
	ref := s.specs().Doc(o.Spec.ID)
	body, platforms, err := encodeOffer(o)
	if err != nil {
		return UpsertResult{}, err
	}
	var res UpsertResult
	err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		s.ops.read(1)
		now := s.now().UTC()
		if isNotFound(err) {
			res = UpsertResult{Outcome: Created}
			return s.create(tx, encoded{o, body, platforms}, now)
		}
		if err != nil {
			return err
		}
		var cur SpecRecord
		if err := snap.DataTo(&cur); err != nil {
			return err
		}
		var updates []firestore.Update
		var change *Change
		res, updates, change = upsertWrites(&cur, encoded{o, body, platforms}, now)
		if updates == nil {
			return nil
		}
		if err := tx.Update(ref, updates); err != nil {
			return err
		}
		if change == nil {
			return nil
		}
		return s.pend(tx, *change)
	})
	if err != nil {
		return UpsertResult{}, classify(err, "upsert spec %s", o.Spec.ID)
	}
	s.ops.write(upsertCost(res.Outcome))
	return res, nil
}

// upsertCost is what an upsert outcome writes.
func upsertCost(o UpsertOutcome) int {
	switch o {
	case Created, Updated, Unmarked:
		return 2 // the spec and its change
	case Repaired:
		return 1
	}
	return 0
}

// upsertWrites decides what offering e does to the spec as stored (cur):
// the outcome, the updates (nil: write nothing) and the catalog change
// (nil for a repair, which the catalog does not see).
func upsertWrites(cur *SpecRecord, e encoded, now time.Time) (UpsertResult, []firestore.Update, *Change) {
	o := e.Offer
	if cur.Registry != o.Registry {
		return UpsertResult{Outcome: Conflict, Owner: cur.Registry}, nil, nil
	}
	change := Change{SpecID: o.Spec.ID, Registry: o.Registry, Name: o.Spec.Name, SpecJSON: string(e.body), Run: o.Run,
		Generation: cur.Generation, SpecCreatedAt: cur.CreatedAt}
	updates := []firestore.Update{{Path: "updated_at", Value: now}}
	res := UpsertResult{Outcome: DecideOffer(cur.offerTarget(), o.Entry, o.Digest)}
	switch res.Outcome {
	case Updated:
		change.Kind, change.Generation = api.ChangeUpdated, cur.Generation+1
		updates = append(updates,
			firestore.Update{Path: "digest", Value: o.Digest},
			firestore.Update{Path: "spec", Value: string(e.body)},
			firestore.Update{Path: "name", Value: o.Spec.Name},
			firestore.Update{Path: "platforms", Value: e.platforms},
			firestore.Update{Path: "generation", Value: change.Generation})
	case Unmarked:
		change.Kind = api.ChangeUnmarked
	case Repaired: // the record only: the catalog does not see it
	default: // Unchanged
		return res, nil, nil
	}
	updates = append(updates,
		firestore.Update{Path: "state", Value: api.SpecActive},
		firestore.Update{Path: "marked_at", Value: firestore.Delete},
		firestore.Update{Path: "marked_run", Value: firestore.Delete},
		firestore.Update{Path: "entry_error", Value: firestore.Delete},
		firestore.Update{Path: "entry_error_at", Value: firestore.Delete},
		firestore.Update{Path: "held_back", Value: firestore.Delete},
		firestore.Update{Path: "entry", Value: o.Entry},
		firestore.Update{Path: "ref", Value: o.Ref})
	if change.Kind == "" {
		return res, updates, nil // a repair is not a catalog change
	}
	return res, updates, &change
}

// SpecUpdate is an offer for a spec the caller read (Read, with its
// ReadAt): UpdateSpecs writes what UpsertSpec would decide on that
// record, if the spec is still as read.
type SpecUpdate struct {
	Offer Offer
	Read  SpecRecord
}

// UpdateSpecs applies offers of specs the caller read, up to fifty to a
// commit, without reading them again: each write is what UpsertSpec
// would do to the record as read, conditional on the spec's update time
// being the one read (a provision or another run since then fails the
// commit whole, atomically, and every offer of that batch goes through
// UpsertSpec, which reads and decides again). So a run that read the
// specs it changes pays no second read for them. Results are in order.
func (s *Store) UpdateSpecs(ctx context.Context, items []SpecUpdate) ([]UpsertResult, error) {
	out := make([]UpsertResult, 0, len(items))
	for start := 0; start < len(items); {
		end, size := start, 0
		for end < len(items) && end-start < createBatch && (end == start || size+2*len(items[end].Read.SpecJSON) <= createBatchBytes) {
			size += 2 * len(items[end].Read.SpecJSON)
			end++
		}
		res, err := s.updateBatch(ctx, items[start:end])
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
		start = end
	}
	return out, nil
}

func (s *Store) updateBatch(ctx context.Context, items []SpecUpdate) ([]UpsertResult, error) {
	for _, it := range items {
		if it.Read.ReadAt.IsZero() || it.Read.ID != it.Offer.Spec.ID {
			// Not read after all: nothing to condition on.
			return s.upsertEach(ctx, items)
		}
	}
	es := make([]encoded, len(items))
	for i, it := range items {
		body, platforms, err := encodeOffer(it.Offer)
		if err != nil {
			return nil, err
		}
		es[i] = encoded{it.Offer, body, platforms}
	}
	res := make([]UpsertResult, len(items))
	writes := 0
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		writes = 0
		now := s.now().UTC()
		for i, it := range items {
			cur := it.Read
			r, updates, change := upsertWrites(&cur, es[i], now)
			res[i] = r
			if updates == nil {
				continue
			}
			if err := tx.Update(s.specs().Doc(cur.ID), updates, firestore.LastUpdateTime(cur.ReadAt)); err != nil {
				return err
			}
			if change != nil {
				if err := s.pend(tx, *change); err != nil {
					return err
				}
			}
			writes += upsertCost(r.Outcome)
		}
		return nil
	})
	if c := status.Code(err); c == codes.FailedPrecondition || c == codes.NotFound {
		// A spec of the batch changed (or went) since it was read.
		return s.upsertEach(ctx, items)
	}
	if err != nil {
		return nil, classify(err, "update %d specs (first %s)", len(items), items[0].Read.ID)
	}
	s.ops.write(writes)
	return res, nil
}

// upsertEach offers each item through UpsertSpec, which reads and decides.
func (s *Store) upsertEach(ctx context.Context, items []SpecUpdate) ([]UpsertResult, error) {
	res := make([]UpsertResult, len(items))
	for i, it := range items {
		var err error
		if res[i], err = s.UpsertSpec(ctx, it.Offer); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// encodeOffer is the stored form of an offered spec: its JSON and its
// platforms as strings.
func encodeOffer(o Offer) ([]byte, []string, error) {
	body, err := json.Marshal(o.Spec)
	if err != nil {
		return nil, nil, failure.Wrap(failure.Invalid, fmt.Errorf("spec %s: encode: %w", o.Spec.ID, err))
	}
	platforms := make([]string, len(o.Spec.Platforms))
	for i, p := range o.Spec.Platforms {
		platforms[i] = p.String()
	}
	return body, platforms, nil
}

// encoded is an offer with its stored form (see encodeOffer).
type encoded struct {
	Offer
	body      []byte
	platforms []string
}

// create writes a new spec, generation 1, and its pending "created"
// change in tx. tx.Create carries Firestore's must-not-exist
// precondition: the commit fails if the document appeared meanwhile.
func (s *Store) create(tx *firestore.Transaction, e encoded, now time.Time) error {
	if err := tx.Create(s.specs().Doc(e.Spec.ID), SpecRecord{
		ID: e.Spec.ID, Registry: e.Registry, Entry: e.Entry, Ref: e.Ref, Name: e.Spec.Name,
		Digest: e.Digest, SpecJSON: string(e.body), State: api.SpecActive, Platforms: e.platforms,
		Generation: 1, CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		return err
	}
	return s.pend(tx, Change{Kind: api.ChangeCreated, Generation: 1, SpecID: e.Spec.ID, Registry: e.Registry,
		Name: e.Spec.Name, SpecJSON: string(e.body), SpecCreatedAt: now, Run: e.Run})
}

// Limits of one CreateSpecs batch: two writes a spec (the spec and its
// change), well under Firestore's 500 writes a commit, and the spec JSON,
// which both documents carry, well under the 10 MiB a commit may hold (a
// spec is at most spec.MaxSpecBytes). Fifty a batch import as fast as a
// hundred on the emulator and hold half as much in flight (the 10,000-spec
// benchmark peaked at 92 MiB, against 99 to 111 with a hundred).
const (
	createBatch      = 50
	createBatchBytes = 4 << 20
)

// CreateBatch is a group of offers CreateSpecs writes in one commit.
type CreateBatch struct{ offers []encoded }

// Len is the number of offers in the batch.
func (b CreateBatch) Len() int { return len(b.offers) }

// CreateBatches groups offers of specs the caller believes absent into
// batches for CreateSpecs, in order.
func CreateBatches(offers []Offer) ([]CreateBatch, error) {
	var out []CreateBatch
	var cur CreateBatch
	size := 0
	for _, o := range offers {
		body, platforms, err := encodeOffer(o)
		if err != nil {
			return nil, err
		}
		if cur.Len() > 0 && (cur.Len() == createBatch || size+2*len(body) > createBatchBytes) {
			out, cur, size = append(out, cur), CreateBatch{}, 0
		}
		cur.offers = append(cur.offers, encoded{o, body, platforms})
		size += 2 * len(body)
	}
	if cur.Len() > 0 {
		out = append(out, cur)
	}
	return out, nil
}

// CreateSpecs creates a batch of specs the caller believes absent (they
// were not among the registry's specs it just read) with their pending
// changes, in one transaction that reads nothing: a first import costs a
// commit per fifty specs instead of a read-write transaction per spec.
// If any of them exists after all (owned by another registry, or created
// since), the precondition fails the whole commit, atomically, and each
// offer of the batch goes through UpsertSpec, which sorts out conflicts.
// Results are in the batch's order.
func (s *Store) CreateSpecs(ctx context.Context, b CreateBatch) ([]UpsertResult, error) {
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		now := s.now().UTC()
		for _, e := range b.offers {
			if err := s.create(tx, e, now); err != nil {
				return err
			}
		}
		return nil
	})
	if status.Code(err) == codes.AlreadyExists {
		out := make([]UpsertResult, len(b.offers))
		for i, e := range b.offers {
			if out[i], err = s.UpsertSpec(ctx, e.Offer); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if err != nil {
		return nil, classify(err, "create %d specs (first %s)", len(b.offers), b.offers[0].Spec.ID)
	}
	s.ops.write(2 * len(b.offers))
	out := make([]UpsertResult, len(b.offers))
	for i := range out {
		out[i] = UpsertResult{Outcome: Created}
	}
	return out, nil
}

// MarkSpec marks an active spec of registry for deletion, in one
// transaction. It reports false (and writes nothing) if the spec is gone,
// already marked or no longer owned by the registry.
func (s *Store) MarkSpec(ctx context.Context, registry, id, runID string) (bool, error) {
	ref := s.specs().Doc(id)
	marked := false
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		marked = false
		cur, err := txGet[SpecRecord](s, tx, ref)
		if err != nil || cur == nil {
			return err
		}
		if cur.Registry != registry || cur.State != api.SpecActive {
			return nil
		}
		marked = true
		now := s.now().UTC()
		if err := tx.Update(ref, []firestore.Update{
			{Path: "state", Value: api.SpecMarked},
			{Path: "marked_at", Value: now},
			{Path: "marked_run", Value: runID},
			{Path: "updated_at", Value: now},
		}); err != nil {
			return err
		}
		return s.pend(tx, Change{Kind: api.ChangeMarked, SpecID: id, Registry: registry, Name: cur.Name, Run: runID})
	})
	if err != nil {
		return false, classify(err, "mark spec %s", id)
	}
	if marked {
		s.ops.write(2) // the spec and its change
	}
	return marked, nil
}

// MarkSpecs marks specs of registry the caller read (with their ReadAt),
// up to fifty to a commit, without reading them again: each active one
// is marked, with its change, on condition that it is still as read; a
// commit whose condition fails (a spec changed or went since) is redone
// spec by spec with MarkSpec, which reads and decides again. It reports,
// in order, which were marked.
func (s *Store) MarkSpecs(ctx context.Context, registry, runID string, read []SpecRecord) ([]bool, error) {
	out := make([]bool, 0, len(read))
	for start := 0; start < len(read); start += createBatch {
		batch := read[start:min(start+createBatch, len(read))]
		marked := make([]bool, len(batch))
		n := 0
		unread := false
		for _, cur := range batch {
			unread = unread || cur.ReadAt.IsZero()
		}
		var err error
		if unread {
			// Not read after all: nothing to condition on.
			err = status.Error(codes.FailedPrecondition, "not read")
		} else {
			err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
				n = 0
				now := s.now().UTC()
				for i, cur := range batch {
					marked[i] = cur.Registry == registry && cur.State == api.SpecActive
					if !marked[i] {
						continue
					}
					if err := tx.Update(s.specs().Doc(cur.ID), []firestore.Update{
						{Path: "state", Value: api.SpecMarked},
						{Path: "marked_at", Value: now},
						{Path: "marked_run", Value: runID},
						{Path: "updated_at", Value: now},
					}, firestore.LastUpdateTime(cur.ReadAt)); err != nil {
						return err
					}
					if err := s.pend(tx, Change{Kind: api.ChangeMarked, SpecID: cur.ID, Registry: registry, Name: cur.Name, Run: runID}); err != nil {
						return err
					}
					n++
				}
				return nil
			})
		}
		if c := status.Code(err); c == codes.FailedPrecondition || c == codes.NotFound {
			for i, cur := range batch {
				if marked[i], err = s.MarkSpec(ctx, registry, cur.ID, runID); err != nil {
					return nil, err
				}
			}
			out = append(out, marked...)
			continue
		}
		if err != nil {
			return nil, classify(err, "mark %d specs (first %s)", len(batch), batch[0].ID)
		}
		s.ops.write(2 * n) // each spec and its change
		out = append(out, marked...)
	}
	return out, nil
}

// DeleteOutcome says what DeleteMarked did.
type DeleteOutcome string

// Delete outcomes.
const (
	Deleted    DeleteOutcome = "deleted"
	Referenced DeleteOutcome = "referenced" // kept: instances use it
	Skipped    DeleteOutcome = "skipped"    // gone, unmarked, re-owned, or marked by this run or an unfinished one
)

// DeleteMarked deletes a spec marked in an earlier run that no instance
// references. The check and the delete are one transaction that reads the
// spec (whose instance count every provision increments in its own
// transaction) and queries the instances for it, so a concurrent provision
// either commits first and the delete sees it, or conflicts and retries
// and finds the spec gone.
//
// markedBefore is when the registry's last successful run finished: a
// spec marked after it was marked by a run that did not finish (it
// crashed, or failed part-way), which does not count as an earlier run,
// so the grace of one full run survives a crash.
func (s *Store) DeleteMarked(ctx context.Context, registry, id, runID string, markedBefore time.Time) (DeleteOutcome, int64, error) {
	ref := s.specs().Doc(id)
	var outcome DeleteOutcome
	var refs int64
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		outcome, refs = Skipped, 0
		cur, err := txGet[SpecRecord](s, tx, ref)
		if err != nil || cur == nil {
			return err
		}
		if cur.Registry != registry || cur.State != api.SpecMarked || cur.MarkedRun == runID || !cur.MarkedAt.Before(markedBefore) {
			return nil
		}
		pins, err := tx.Documents(s.instances().Where("spec_id", "==", id).Limit(1)).GetAll()
		s.ops.read(len(pins))
		if err != nil {
			return err
		}
		refs = cur.Instances
		if int64(len(pins)) > refs {
			refs = int64(len(pins))
		}
		if refs > 0 {
			outcome = Referenced
			return nil
		}
		outcome = Deleted
		if err := tx.Delete(ref); err != nil {
			return err
		}
		return s.pend(tx, Change{Kind: api.ChangeDeleted, SpecID: id, Registry: registry, Name: cur.Name, Run: runID})
	})
	if err != nil {
		return "", 0, classify(err, "delete marked spec %s", id)
	}
	if outcome == Deleted {
		s.ops.delete(1)
		s.ops.write(1) // its change
	}
	return outcome, refs, nil
}

// RecordEntryError records, on the stored spec, the error of the registry
// entry it came from; the stored spec itself stays as it was.
func (s *Store) RecordEntryError(ctx context.Context, id, message string) error {
	_, err := s.specs().Doc(id).Update(ctx, []firestore.Update{
		{Path: "entry_error", Value: message},
		{Path: "entry_error_at", Value: s.now().UTC()},
	})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return classify(err, "record entry error on spec %s", id)
	}
	s.ops.write(1)
	return nil
}

// HoldOutcome says what HoldBack did.
type HoldOutcome string

// Hold-back outcomes.
const (
	HeldNew      HoldOutcome = "held_new"      // a version not held back before: recorded, and a change
	HeldUnmarked HoldOutcome = "held_unmarked" // and the served version, marked, is back in the catalog
	HeldSame     HoldOutcome = "held_same"     // already held back; at most its blockers were refreshed
	HeldSkipped  HoldOutcome = "held_skipped"  // the spec is gone or owned by another registry
)

// HoldBack records on a spec that the registry offers a newer version the
// store does not adopt (h says which, and what blocks it). The served
// version stays as it is; if it was marked, the registry offers the spec
// again, so it is unmarked. A version held back for the first time, and an
// unmark, are catalog changes; the same version held back again is not.
func (s *Store) HoldBack(ctx context.Context, registry string, h HeldBackSpec, runID string) (HoldOutcome, error) {
	ref := s.specs().Doc(h.SpecID)
	var outcome HoldOutcome
	writes := 0
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		outcome, writes = HeldSkipped, 0
		cur, err := txGet[SpecRecord](s, tx, ref)
		if err != nil || cur == nil || cur.Registry != registry {
			return err
		}
		now := s.now().UTC()
		updates := []firestore.Update{{Path: "held_back", Value: h}, {Path: "updated_at", Value: now}}
		kind := api.ChangeHeldBack
		switch {
		case cur.State == api.SpecMarked:
			outcome, kind = HeldUnmarked, api.ChangeUnmarked
			updates = append(updates,
				firestore.Update{Path: "state", Value: api.SpecActive},
				firestore.Update{Path: "marked_at", Value: firestore.Delete},
				firestore.Update{Path: "marked_run", Value: firestore.Delete})
		case cur.HeldBack == nil || cur.HeldBack.Digest != h.Digest:
			outcome = HeldNew
		default:
			outcome = HeldSame
			if slices.Equal(cur.HeldBack.Blockers, h.Blockers) && slices.Equal(cur.HeldBack.Instances, h.Instances) {
				return nil
			}
		}
		writes = 1
		if err := tx.Update(ref, updates); err != nil {
			return err
		}
		if outcome == HeldSame {
			return nil
		}
		writes = 2
		held := h
		return s.pend(tx, Change{Kind: kind, SpecID: cur.ID, Registry: registry, Name: cur.Name,
			SpecJSON: cur.SpecJSON, Generation: cur.Generation, SpecCreatedAt: cur.CreatedAt, HeldBack: &held, Run: runID})
	})
	if err != nil {
		return "", classify(err, "hold back a new version of spec %s", h.SpecID)
	}
	s.ops.write(writes)
	return outcome, nil
}
