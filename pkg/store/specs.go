package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/spec"
)

// Spec states.
const (
	StateActive = "active"
	StateMarked = "marked"
)

// SpecRecord is a specs/{id} document. The spec itself is kept as its
// canonical JSON so that it round-trips exactly (Firestore maps would turn
// every number into a float or an int by guesswork) and so its digest can
// be recomputed from what is stored.
type SpecRecord struct {
	ID        string   `firestore:"id"`
	Registry  string   `firestore:"registry"`
	Entry     string   `firestore:"entry"`
	Ref       string   `firestore:"ref"`
	Name      string   `firestore:"name"`
	Digest    string   `firestore:"digest"`
	SpecJSON  string   `firestore:"spec"`
	State     string   `firestore:"state"`
	Platforms []string `firestore:"platforms"`
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
	q := s.specs().Where("registry", "==", registry).Where("state", "==", StateMarked)
	return queryAll[SpecRecord](ctx, s, q, "marked specs of registry "+registry)
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
	q := s.specs().Where("state", "==", StateActive)
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
		change := Change{SpecID: o.Spec.ID, Registry: o.Registry, Name: o.Spec.Name, SpecJSON: string(body), Run: o.Run}
		var cur SpecRecord
		if err := snap.DataTo(&cur); err != nil {
			return err
		}
		if cur.Registry != o.Registry {
			res = UpsertResult{Outcome: Conflict, Owner: cur.Registry}
			return nil
		}
		updates := []firestore.Update{{Path: "updated_at", Value: now}}
		change.Generation, change.SpecCreatedAt = cur.Generation, cur.CreatedAt
		switch {
		case cur.Digest != o.Digest:
			res.Outcome = Updated
			change.Kind, change.Generation = KindUpdated, cur.Generation+1
			updates = append(updates,
				firestore.Update{Path: "digest", Value: o.Digest},
				firestore.Update{Path: "spec", Value: string(body)},
				firestore.Update{Path: "name", Value: o.Spec.Name},
				firestore.Update{Path: "platforms", Value: platforms},
				firestore.Update{Path: "generation", Value: change.Generation})
		case cur.State == StateMarked:
			res.Outcome = Unmarked
			change.Kind = KindUnmarked
		case cur.EntryError != "" || cur.Entry != o.Entry || cur.HeldBack != nil:
			res.Outcome = Repaired
		default:
			res.Outcome = Unchanged
			return nil
		}
		updates = append(updates,
			firestore.Update{Path: "state", Value: StateActive},
			firestore.Update{Path: "marked_at", Value: firestore.Delete},
			firestore.Update{Path: "marked_run", Value: firestore.Delete},
			firestore.Update{Path: "entry_error", Value: firestore.Delete},
			firestore.Update{Path: "entry_error_at", Value: firestore.Delete},
			firestore.Update{Path: "held_back", Value: firestore.Delete},
			firestore.Update{Path: "entry", Value: o.Entry},
			firestore.Update{Path: "ref", Value: o.Ref})
		if err := tx.Update(ref, updates); err != nil {
			return err
		}
		if change.Kind == "" {
			return nil // a repair is not a catalog change
		}
		return s.pend(tx, change)
	})
	if err != nil {
		return UpsertResult{}, classify(err, "upsert spec %s", o.Spec.ID)
	}
	switch res.Outcome {
	case Created, Updated, Unmarked:
		s.ops.write(2) // the spec and its change
	case Repaired:
		s.ops.write(1)
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
		Digest: e.Digest, SpecJSON: string(e.body), State: StateActive, Platforms: e.platforms,
		Generation: 1, CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		return err
	}
	return s.pend(tx, Change{Kind: KindCreated, Generation: 1, SpecID: e.Spec.ID, Registry: e.Registry,
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
		if cur.Registry != registry || cur.State != StateActive {
			return nil
		}
		marked = true
		now := s.now().UTC()
		if err := tx.Update(ref, []firestore.Update{
			{Path: "state", Value: StateMarked},
			{Path: "marked_at", Value: now},
			{Path: "marked_run", Value: runID},
			{Path: "updated_at", Value: now},
		}); err != nil {
			return err
		}
		return s.pend(tx, Change{Kind: KindMarked, SpecID: id, Registry: registry, Name: cur.Name, Run: runID})
	})
	if err != nil {
		return false, classify(err, "mark spec %s", id)
	}
	if marked {
		s.ops.write(2) // the spec and its change
	}
	return marked, nil
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
		if cur.Registry != registry || cur.State != StateMarked || cur.MarkedRun == runID || !cur.MarkedAt.Before(markedBefore) {
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
		return s.pend(tx, Change{Kind: KindDeleted, SpecID: id, Registry: registry, Name: cur.Name, Run: runID})
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
		kind := KindHeldBack
		switch {
		case cur.State == StateMarked:
			outcome, kind = HeldUnmarked, KindUnmarked
			updates = append(updates,
				firestore.Update{Path: "state", Value: StateActive},
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
