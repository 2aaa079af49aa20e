package store

// Read-only queries for operators: the admin endpoints and the status page
// of the catalog function list specs and instances through these (recent
// bootstrap operations through RecentOperations, in operations.go). Each
// is declared in queries.go; none needs a composite index (one equality,
// or an order on one field).

import (
	"context"
	"sort"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/pkg/api"
)

// SpecFilter selects specs: by owning registry and/or state ("" for any).
type SpecFilter struct {
	Registry string
	State    api.SpecState
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
	case f.Registry != "" && f.State == api.SpecMarked:
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

// SpecsInState returns every spec in state (active or marked), with its
// usage.
func (s *Store) SpecsInState(ctx context.Context, state api.SpecState) ([]SpecRecord, error) {
	return s.querySpecs(ctx, s.specs().Where("state", "==", state), "specs in state "+string(state))
}

// AllSpecs returns every spec, in id order, with its usage.
func (s *Store) AllSpecs(ctx context.Context) ([]SpecRecord, error) {
	return s.querySpecs(ctx, s.specs().OrderBy(firestore.DocumentID, firestore.Asc), "all specs")
}

// PlannedChange is one change a dry run found a real run would make, by
// name (a run's Planned; never stored but in a bootstrap's result).
type PlannedChange = api.PlannedChange

// MaxPlannedChanges bounds the planned changes a dry run reports per
// registry (the counts are always complete).
const MaxPlannedChanges = 200
