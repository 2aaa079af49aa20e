package store

import (
	"context"
	"errors"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/spec"
)

// A spec's usage (its instances, per plan and per OCI platform) is the
// instance records themselves, counted when a reader needs it; nothing
// on the spec document counts them. A stored counter would make every
// provision, deprovision and plan change of a spec write that one
// document in its transaction, so a burst of provisions of one service
// would queue on it (Firestore sustains about one write a second to a
// document, and its emulator times contended transactions out). Without
// one, provisions of one spec write only their own instance documents,
// and what a counter guarded is guarded by reads in the transactions that
// need it:
//
//   - a marked spec takes no instance: the provision reads the spec in its
//     transaction, and marking writes it, so they are ordered;
//   - a referenced spec is not deleted: DeleteMarked queries the instances
//     of the spec in its transaction, which locks that range of the
//     index, so a provision committing an instance of it conflicts with
//     the delete (and only with it), and whichever commits second sees
//     the other.

// usageBatch is how many spec ids one usage query names: Firestore's most
// values in an "in" filter.
const usageBatch = 30

// usageOf is the part of an instance record a usage count reads.
type usageOf struct {
	SpecID   string `firestore:"spec_id"`
	PlanID   string `firestore:"plan_id"`
	Platform string `firestore:"platform"`
}

// querySpecs runs a query of specs and fills in their usage (countUsage).
func (s *Store) querySpecs(ctx context.Context, q firestore.Query, what string) ([]SpecRecord, error) {
	recs, err := queryAll[SpecRecord](ctx, s, q, what)
	if err != nil {
		return nil, err
	}
	return s.countUsage(ctx, recs)
}

// countUsage fills in each record's usage from the instance records: one
// query per thirty specs, projected to the three fields a count needs,
// costing a read per instance found (one for a query that finds none).
// No records cost nothing.
func (s *Store) countUsage(ctx context.Context, recs []SpecRecord) ([]SpecRecord, error) {
	byID := make(map[string]*SpecRecord, len(recs))
	ids := make([]string, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		r.Instances, r.PlanInstances, r.PlatformInstances = 0, nil, nil
		byID[r.ID] = r
		ids = append(ids, r.ID)
	}
	for start := 0; start < len(ids); start += usageBatch {
		batch := ids[start:min(start+usageBatch, len(ids))]
		q := s.instances().Where("spec_id", "in", batch).Select("spec_id", "plan_id", "platform")
		snaps, err := q.Documents(ctx).GetAll()
		s.ops.read(len(snaps))
		if err != nil {
			return nil, classify(err, "count the instances of %d specs", len(batch))
		}
		for _, snap := range snaps {
			var u usageOf
			if err := snap.DataTo(&u); err != nil {
				return nil, classify(err, "decode %s", snap.Ref.Path)
			}
			if r := byID[u.SpecID]; r != nil {
				r.count(u)
			}
		}
	}
	return recs, nil
}

// count adds an instance like u to the record's usage.
func (r *SpecRecord) count(u usageOf) {
	r.Instances++
	if r.PlanInstances == nil {
		r.PlanInstances = map[string]int64{}
	}
	r.PlanInstances[u.PlanID]++
	if u.Platform != "" {
		if r.PlatformInstances == nil {
			r.PlatformInstances = map[string]int64{}
		}
		r.PlatformInstances[u.Platform]++
	}
}

// ErrStranded: a new version of a spec was about to be adopted although
// an instance uses a plan or an OCI platform it drops, because the
// instance was provisioned (or moved) after the run read the spec's
// usage. Nothing is written; the run fails retryably, and the next one
// reads the usage again and holds the version back.
var ErrStranded = errors.New("a new version would strand an instance")

// drops reports whether adopting next over the stored version could
// strand an instance: it lacks a plan of cur, or declares platforms that
// leave out one cur accepts (cur declaring none accepts any).
func drops(cur, next *spec.Spec) bool {
	for _, p := range cur.Plans {
		if _, ok := next.PlanByID(p.ID); !ok {
			return true
		}
	}
	if len(next.Platforms) == 0 {
		return false
	}
	if len(cur.Platforms) == 0 {
		return true
	}
	for _, p := range cur.Platforms {
		if !next.SupportsPlatform(p.String()) {
			return true
		}
	}
	return false
}

// txStrands checks, in tx, that adopting next over the stored record
// strands no instance. Most new versions drop nothing and cost nothing
// here; one that does queries the spec's instances in the transaction,
// which locks their range: a provision committing an instance of the spec
// conflicts with the adoption, and whichever commits second sees the
// other (a provision then finds the new version, without the plan).
func (s *Store) txStrands(tx *firestore.Transaction, cur *SpecRecord, next *spec.Spec) error {
	was, err := cur.Spec()
	if err != nil || !drops(was, next) {
		return err
	}
	snaps, err := tx.Documents(s.instances().Where("spec_id", "==", cur.ID).Select("spec_id", "plan_id", "platform")).GetAll()
	s.ops.read(len(snaps))
	if err != nil {
		return err
	}
	for _, snap := range snaps {
		var u usageOf
		if err := snap.DataTo(&u); err != nil {
			return err
		}
		if next.Strands(u.PlanID, u.Platform) {
			return refused(failure.Precondition, ErrStranded, "spec %s: instance %s (plan %s, platform %q) was provisioned after the run read the spec's usage, and the new version drops its plan or platform: run again to hold the version back", cur.ID, snap.Ref.ID, u.PlanID, u.Platform)
		}
	}
	return nil
}
