package store

// Read-only queries for operators: the admin endpoints and the status page
// of the catalog function list specs, instances and recent bootstrap
// operations through these. Each is declared in queries.go; none needs a
// composite index (one equality, or an order on one field).

import (
	"context"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
)

// OperationsCollection holds the bootstrap operations (written by
// pkg/bootstrap, whose Operation type owns the documents; the store only
// reads them here, as OperationRecord).
const OperationsCollection = "operations"

// SpecFilter selects specs: by owning registry and/or state ("" for any).
type SpecFilter struct {
	Registry string
	State    string
}

// ListSpecs returns the specs the filter selects, in id order. Every
// combination is one query with at most one composite index, the one the
// reconcile already uses (registry and state).
func (s *Store) ListSpecs(ctx context.Context, f SpecFilter) ([]SpecRecord, error) {
	var (
		out []SpecRecord
		err error
	)
	switch {
	case f.Registry != "" && f.State == StateMarked:
		out, err = s.MarkedSpecs(ctx, f.Registry)
	case f.Registry != "":
		out, err = s.OwnedSpecs(ctx, f.Registry)
		if err == nil && f.State != "" {
			kept := out[:0]
			for _, r := range out {
				if r.State == f.State {
					kept = append(kept, r)
				}
			}
			out = kept
		}
	case f.State != "":
		out, err = s.SpecsInState(ctx, f.State)
	default:
		out, err = s.AllSpecs(ctx)
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// SpecsInState returns every spec in state (active or marked).
func (s *Store) SpecsInState(ctx context.Context, state string) ([]SpecRecord, error) {
	return queryAll[SpecRecord](ctx, s, s.specs().Where("state", "==", state), "specs in state "+state)
}

// AllSpecs returns every spec, in id order.
func (s *Store) AllSpecs(ctx context.Context) ([]SpecRecord, error) {
	return queryAll[SpecRecord](ctx, s, s.specs().OrderBy(firestore.DocumentID, firestore.Asc), "all specs")
}

// OperationResult is one registry's result in a bootstrap operation, as
// pkg/bootstrap records it (bootstrap.RegistryResult).
type OperationResult struct {
	State      string          `json:"state" firestore:"state"`
	Result     string          `json:"result" firestore:"result"`
	Counts     RunCounts       `json:"counts" firestore:"counts"`
	Firestore  Counts          `json:"firestore" firestore:"firestore"`
	Error      string          `json:"error,omitempty" firestore:"error,omitempty"`
	RunID      string          `json:"run_id,omitempty" firestore:"run_id,omitempty"`
	ReportedAt time.Time       `json:"reported_at" firestore:"reported_at"`
	Planned    []PlannedChange `json:"planned,omitempty" firestore:"planned,omitempty"`
}

// OperationRecord is an operations/{id} document as operators read it
// (the fields of bootstrap.Operation; a test in pkg/bootstrap checks that
// what Start and Report write reads back here).
type OperationRecord struct {
	ID          string                     `json:"operation" firestore:"id"`
	State       string                     `json:"state" firestore:"state"`
	Description string                     `json:"description" firestore:"description"`
	DryRun      bool                       `json:"dry_run" firestore:"dry_run"`
	Registries  []string                   `json:"registries" firestore:"registries"`
	Results     map[string]OperationResult `json:"results" firestore:"results"`
	CreatedAt   time.Time                  `json:"created_at" firestore:"created_at"`
	UpdatedAt   time.Time                  `json:"updated_at" firestore:"updated_at"`
	Deadline    time.Time                  `json:"deadline" firestore:"deadline"`
	ExpiresAt   time.Time                  `json:"-" firestore:"expires_at"`
	Commit      *OperationCommit           `json:"commit,omitempty" firestore:"commit,omitempty"`
	// CatalogRevision is the revision the operation's changes reached
	// (set when it finished; never for a dry run).
	CatalogRevision *int64 `json:"catalog_revision,omitempty" firestore:"catalog_revision,omitempty"`
}

// OperationCommit is an operation's wait for the committer, once every
// registry reported (bootstrap.Operation.Commit; one type for both views).
type OperationCommit struct {
	// Changes is how many catalog changes the operation's runs wrote.
	Changes     int       `json:"changes" firestore:"changes"`
	RequestedAt time.Time `json:"requested_at" firestore:"requested_at"`
	// State and Description are the outcome of the runs, which the
	// operation takes once the changes are committed.
	State       string    `json:"state" firestore:"state"`
	Description string    `json:"description" firestore:"description"`
	CommittedAt time.Time `json:"committed_at,omitzero" firestore:"committed_at,omitempty"`
}

// Firestore sums the Firestore operations every registry of the
// operation reported: the cost of that bootstrap.
func (o *OperationRecord) Firestore() Counts {
	var c Counts
	for _, r := range o.Results {
		c.Reads += r.Firestore.Reads
		c.Writes += r.Firestore.Writes
		c.Deletes += r.Firestore.Deletes
	}
	return c
}

// RecentOperations returns up to limit bootstrap operations, newest
// first. A finished operation past its retention is left out, as
// bootstrap's Get treats it (the TTL policy deletes it within a day).
func (s *Store) RecentOperations(ctx context.Context, limit int) ([]OperationRecord, error) {
	it := s.client.Collection(OperationsCollection).OrderBy("created_at", firestore.Desc).Limit(limit).Documents(ctx)
	defer it.Stop()
	now := s.now().UTC()
	var out []OperationRecord
	n := 0
	for {
		snap, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return nil, classify(err, "query recent operations")
		}
		n++
		var op OperationRecord
		if err := snap.DataTo(&op); err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		if op.State != "in progress" && !op.ExpiresAt.IsZero() && now.After(op.ExpiresAt) {
			continue
		}
		out = append(out, op)
	}
	s.ops.read(n)
	return out, nil
}

// PlannedChange is one change a dry run found a real run would make, by
// name, so an operator sees the plan as a diff.
type PlannedChange struct {
	// Change is create, update, unmark, repair, mark, delete, keep
	// (marked, still referenced) or hold_back.
	Change string `json:"change" firestore:"change"`
	SpecID string `json:"spec_id" firestore:"spec_id"`
	Name   string `json:"name" firestore:"name"`
	Entry  string `json:"entry,omitempty" firestore:"entry,omitempty"`
	Detail string `json:"detail,omitempty" firestore:"detail,omitempty"`
}

// MaxPlannedChanges bounds the planned changes a dry run reports per
// registry (the counts are always complete).
const MaxPlannedChanges = 200
