package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/spec"
)

// Instance is an instances/{id} document: a service instance the broker
// provisioned. While it exists, its spec cannot be deleted.
type Instance struct {
	ID     string `firestore:"id" json:"id"`
	SpecID string `firestore:"spec_id" json:"service_id"`
	PlanID string `firestore:"plan_id" json:"plan_id"`
	// Platform is the OCI platform (os/arch[/variant]) the instance runs
	// on, when the provision request said so.
	Platform string         `firestore:"platform,omitempty" json:"platform,omitempty"`
	Context  map[string]any `firestore:"context,omitempty" json:"context,omitempty"`
	// MaintenanceVersion is the plan's maintenance_info version the
	// provision request named (OSB), checked against the spec's generation.
	MaintenanceVersion string    `firestore:"maintenance_version,omitempty" json:"maintenance_version,omitempty"`
	CreatedAt          time.Time `firestore:"created_at" json:"created_at"`
}

// ErrMaintenanceInfo is in the chain of a provision whose maintenance_info
// version is not the plan's current one (OSB: 422 MaintenanceInfoConflict).
var ErrMaintenanceInfo = errors.New("maintenance_info conflict")

// CreateInstanceResult says whether CreateInstance wrote anything.
type CreateInstanceResult struct {
	Instance Instance
	Existed  bool // an identical instance already existed; nothing written
}

// CreateInstance records an instance of an active spec and one of its
// plans. In one transaction it reads the spec (it must exist, be active
// and have the plan), reads the instance id (an identical existing record
// is returned as is, a different one is a failure.Conflict), creates the
// record and increments the spec's instance count. Because it writes the
// spec document, it cannot interleave with DeleteMarked on that spec.
func (s *Store) CreateInstance(ctx context.Context, inst Instance) (CreateInstanceResult, error) {
	if inst.ID == "" || inst.SpecID == "" || inst.PlanID == "" {
		return CreateInstanceResult{}, failure.New(failure.Invalid, "instance needs an id, a service id and a plan id")
	}
	specRef := s.specs().Doc(inst.SpecID)
	instRef := s.instances().Doc(inst.ID)
	var res CreateInstanceResult
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		res = CreateInstanceResult{}
		specSnap, err := tx.Get(specRef)
		s.ops.read(1)
		if isNotFound(err) {
			return failure.New(failure.NotFound, "service %s is not in the catalog", inst.SpecID)
		}
		if err != nil {
			return err
		}
		instSnap, err := tx.Get(instRef)
		s.ops.read(1)
		if err == nil {
			var cur Instance
			if err := instSnap.DataTo(&cur); err != nil {
				return err
			}
			if cur.SpecID == inst.SpecID && cur.PlanID == inst.PlanID {
				res = CreateInstanceResult{Instance: cur, Existed: true}
				return nil
			}
			return failure.New(failure.Conflict, "instance %s already exists with service %s and plan %s", inst.ID, cur.SpecID, cur.PlanID)
		}
		if !isNotFound(err) {
			return err
		}
		var rec SpecRecord
		if err := specSnap.DataTo(&rec); err != nil {
			return err
		}
		if rec.State != StateActive {
			return failure.New(failure.Invalid, "service %s is marked for deletion and takes no new instances", inst.SpecID)
		}
		sp, err := rec.Spec()
		if err != nil {
			return err
		}
		if _, ok := sp.PlanByID(inst.PlanID); !ok {
			return failure.New(failure.NotFound, "service %s has no plan %s", inst.SpecID, inst.PlanID)
		}
		if v := spec.MaintenanceVersion(rec.Generation); inst.MaintenanceVersion != "" && inst.MaintenanceVersion != v {
			return failure.Wrap(failure.Precondition, fmt.Errorf("service %s plan %s is at maintenance_info version %q, not %q: %w", inst.SpecID, inst.PlanID, v, inst.MaintenanceVersion, ErrMaintenanceInfo))
		}
		if inst.Platform != "" && len(sp.Platforms) > 0 && !supports(sp, inst.Platform) {
			return failure.New(failure.Invalid, "service %s does not support platform %s (it supports %s)", inst.SpecID, inst.Platform, strings.Join(rec.Platforms, ", "))
		}
		if inst.CreatedAt.IsZero() {
			inst.CreatedAt = s.now().UTC()
		}
		res.Instance = inst
		if err := tx.Create(instRef, inst); err != nil {
			return err
		}
		return tx.Update(specRef, usageUpdates(inst, 1))
	})
	if err != nil {
		return CreateInstanceResult{}, classify(err, "create instance %s", inst.ID)
	}
	if !res.Existed {
		s.ops.write(2)
	}
	return res, nil
}

// GetInstance reads one instance; a missing one is a failure.NotFound.
func (s *Store) GetInstance(ctx context.Context, id string) (*Instance, error) {
	snap, err := s.instances().Doc(id).Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return nil, failure.New(failure.NotFound, "instance %s does not exist", id)
	}
	if err != nil {
		return nil, classify(err, "read instance %s", id)
	}
	var inst Instance
	if err := snap.DataTo(&inst); err != nil {
		return nil, classify(err, "decode instance %s", id)
	}
	return &inst, nil
}

// DeleteInstance removes an instance record and decrements its spec's
// instance count, in one transaction. A missing instance is a
// failure.NotFound.
func (s *Store) DeleteInstance(ctx context.Context, id string) (*Instance, error) {
	instRef := s.instances().Doc(id)
	var inst Instance
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(instRef)
		s.ops.read(1)
		if isNotFound(err) {
			return failure.New(failure.NotFound, "instance %s does not exist", id)
		}
		if err != nil {
			return err
		}
		if err := snap.DataTo(&inst); err != nil {
			return err
		}
		specRef := s.specs().Doc(inst.SpecID)
		rec, err := txGet[SpecRecord](s, tx, specRef)
		if err != nil {
			return err
		}
		if err := tx.Delete(instRef); err != nil {
			return err
		}
		if rec != nil {
			return tx.Update(specRef, usageUpdates(inst, -1))
		}
		return nil
	})
	if err != nil {
		return nil, classify(err, "delete instance %s", id)
	}
	s.ops.delete(1)
	s.ops.write(1)
	return &inst, nil
}

// usageUpdates moves a spec's instance counters by delta for inst.
func usageUpdates(inst Instance, delta int64) []firestore.Update {
	u := []firestore.Update{
		{Path: "instances", Value: firestore.Increment(delta)},
		{FieldPath: firestore.FieldPath{"plan_instances", inst.PlanID}, Value: firestore.Increment(delta)},
	}
	if inst.Platform != "" {
		u = append(u, firestore.Update{FieldPath: firestore.FieldPath{"platform_instances", inst.Platform}, Value: firestore.Increment(delta)})
	}
	return u
}

func supports(s *spec.Spec, platform string) bool {
	for _, p := range s.Platforms {
		if p.String() == platform {
			return true
		}
	}
	return false
}

// SpecInstances returns up to limit instances of a spec, in no particular
// order.
func (s *Store) SpecInstances(ctx context.Context, specID string, limit int) ([]Instance, error) {
	q := s.instances().Where("spec_id", "==", specID).Limit(limit)
	return queryAll[Instance](ctx, s, q, "instances of spec "+specID)
}
