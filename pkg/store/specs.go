package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/spec"
	"google.golang.org/api/iterator"
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
	Revision  int64    `firestore:"revision"`
	Instances int64    `firestore:"instances"`
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
}

// Spec decodes the stored spec.
func (r *SpecRecord) Spec() (*spec.Spec, error) {
	var s spec.Spec
	if err := json.Unmarshal([]byte(r.SpecJSON), &s); err != nil {
		return nil, failure.Wrap(failure.Invalid, fmt.Errorf("spec %s: stored spec does not decode: %w", r.ID, err))
	}
	return &s, nil
}

func (s *Store) queryAll(ctx context.Context, q firestore.Query, what string) ([]SpecRecord, error) {
	it := q.Documents(ctx)
	defer it.Stop()
	var out []SpecRecord
	for {
		snap, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return nil, classify(err, "query %s", what)
		}
		var r SpecRecord
		if err := snap.DataTo(&r); err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		out = append(out, r)
	}
	s.ops.read(len(out))
	return out, nil
}

// OwnedSpecs returns every spec the registry owns, active or marked.
func (s *Store) OwnedSpecs(ctx context.Context, registry string) ([]SpecRecord, error) {
	return s.queryAll(ctx, s.specs().Where("registry", "==", registry), "specs of registry "+registry)
}

// MarkedSpecs returns the registry's specs that are marked for deletion.
func (s *Store) MarkedSpecs(ctx context.Context, registry string) ([]SpecRecord, error) {
	q := s.specs().Where("registry", "==", registry).Where("state", "==", StateMarked)
	return s.queryAll(ctx, q, "marked specs of registry "+registry)
}

// ActiveSpecs returns every spec the catalog serves, in id order. Sorting
// happens here rather than in the query: equality on one field and order
// on another would need a composite index.
func (s *Store) ActiveSpecs(ctx context.Context) ([]SpecRecord, error) {
	out, err := s.queryAll(ctx, s.specs().Where("state", "==", StateActive), "active specs")
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
	Revision int64 // catalog revision the change belongs to
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
	body, err := json.Marshal(o.Spec)
	if err != nil {
		return UpsertResult{}, failure.Wrap(failure.Invalid, fmt.Errorf("spec %s: encode: %w", o.Spec.ID, err))
	}
	platforms := make([]string, len(o.Spec.Platforms))
	for i, p := range o.Spec.Platforms {
		platforms[i] = p.String()
	}
	var res UpsertResult
	err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		s.ops.read(1)
		now := s.now().UTC()
		if isNotFound(err) {
			res = UpsertResult{Outcome: Created}
			return tx.Create(ref, SpecRecord{
				ID: o.Spec.ID, Registry: o.Registry, Entry: o.Entry, Ref: o.Ref, Name: o.Spec.Name,
				Digest: o.Digest, SpecJSON: string(body), State: StateActive, Platforms: platforms,
				Revision: o.Revision, CreatedAt: now, UpdatedAt: now,
			})
		}
		if err != nil {
			return err
		}
		var cur SpecRecord
		if err := snap.DataTo(&cur); err != nil {
			return err
		}
		if cur.Registry != o.Registry {
			res = UpsertResult{Outcome: Conflict, Owner: cur.Registry}
			return nil
		}
		updates := []firestore.Update{{Path: "updated_at", Value: now}}
		switch {
		case cur.Digest != o.Digest:
			res.Outcome = Updated
			updates = append(updates,
				firestore.Update{Path: "digest", Value: o.Digest},
				firestore.Update{Path: "spec", Value: string(body)},
				firestore.Update{Path: "name", Value: o.Spec.Name},
				firestore.Update{Path: "platforms", Value: platforms},
				firestore.Update{Path: "revision", Value: o.Revision})
		case cur.State == StateMarked:
			res.Outcome = Unmarked
			updates = append(updates, firestore.Update{Path: "revision", Value: o.Revision})
		case cur.EntryError != "" || cur.Entry != o.Entry:
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
			firestore.Update{Path: "entry", Value: o.Entry},
			firestore.Update{Path: "ref", Value: o.Ref})
		return tx.Update(ref, updates)
	})
	if err != nil {
		return UpsertResult{}, classify(err, "upsert spec %s", o.Spec.ID)
	}
	if res.Outcome != Unchanged && res.Outcome != Conflict {
		s.ops.write(1)
	}
	return res, nil
}

// MarkSpec marks an active spec of registry for deletion, in one
// transaction. It reports false (and writes nothing) if the spec is gone,
// already marked or no longer owned by the registry.
func (s *Store) MarkSpec(ctx context.Context, registry, id, runID string, revision int64) (bool, error) {
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
		return tx.Update(ref, []firestore.Update{
			{Path: "state", Value: StateMarked},
			{Path: "marked_at", Value: now},
			{Path: "marked_run", Value: runID},
			{Path: "revision", Value: revision},
			{Path: "updated_at", Value: now},
		})
	})
	if err != nil {
		return false, classify(err, "mark spec %s", id)
	}
	if marked {
		s.ops.write(1)
	}
	return marked, nil
}

// DeleteOutcome says what DeleteMarked did.
type DeleteOutcome string

// Delete outcomes.
const (
	Deleted    DeleteOutcome = "deleted"
	Referenced DeleteOutcome = "referenced" // kept: instances use it
	Skipped    DeleteOutcome = "skipped"    // gone, unmarked, re-owned, or marked by this very run
)

// DeleteMarked deletes a spec marked in an earlier run that no instance
// references. The check and the delete are one transaction that reads the
// spec (whose instance count every provision increments in its own
// transaction) and queries the instances for it, so a concurrent provision
// either commits first and the delete sees it, or conflicts and retries
// and finds the spec gone.
func (s *Store) DeleteMarked(ctx context.Context, registry, id, runID string) (DeleteOutcome, int64, error) {
	ref := s.specs().Doc(id)
	var outcome DeleteOutcome
	var refs int64
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		outcome, refs = Skipped, 0
		cur, err := txGet[SpecRecord](s, tx, ref)
		if err != nil || cur == nil {
			return err
		}
		if cur.Registry != registry || cur.State != StateMarked || cur.MarkedRun == runID {
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
		return tx.Delete(ref)
	})
	if err != nil {
		return "", 0, classify(err, "delete marked spec %s", id)
	}
	if outcome == Deleted {
		s.ops.delete(1)
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
