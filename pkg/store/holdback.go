package store

import (
	"context"
	"slices"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/pkg/api"
)

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
