package store

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/api"
)

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
// spec (which every provision reads in its own transaction) and queries
// the instances for it: a query in a transaction locks the range it read,
// so a concurrent provision of the spec conflicts with the delete (and
// provisions of it with nothing else: usage.go), and either commits first
// and the delete sees it, or retries and finds the spec gone. A spec kept
// for its instances reports how many (counted after the transaction).
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
		if len(pins) > 0 {
			outcome, refs = Referenced, 1
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
	if outcome == Referenced {
		recs, err := s.countUsage(ctx, []SpecRecord{{ID: id}})
		if err != nil {
			return "", 0, err
		}
		refs = max(refs, recs[0].Instances)
	}
	return outcome, refs, nil
}
