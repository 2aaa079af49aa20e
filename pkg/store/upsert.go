package store

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/spec"
)

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
// updates or unmarks it. A new version that drops a plan or a platform an
// instance uses is refused with ErrStranded (txStrands): the run planned
// it on usage read before that instance was provisioned.
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
		if res.Outcome == Updated {
			if err := s.txStrands(tx, &cur, o.Spec); err != nil {
				return err
			}
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
		type write struct {
			cur     SpecRecord
			updates []firestore.Update
			change  *Change
		}
		var ws []write
		// Every read (a strand check's query) before the first write, as
		// a transaction requires.
		for i, it := range items {
			cur := it.Read
			r, updates, change := upsertWrites(&cur, es[i], now)
			res[i] = r
			if updates == nil {
				continue
			}
			if r.Outcome == Updated {
				if err := s.txStrands(tx, &cur, es[i].Spec); err != nil {
					return err
				}
			}
			ws = append(ws, write{cur, updates, change})
			writes += upsertCost(r.Outcome)
		}
		for _, w := range ws {
			if err := tx.Update(s.specs().Doc(w.cur.ID), w.updates, firestore.LastUpdateTime(w.cur.ReadAt)); err != nil {
				return err
			}
			if w.change != nil {
				if err := s.pend(tx, *w.change); err != nil {
					return err
				}
			}
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
