package store

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
)

// TombstonesCollection holds what deprovisions and unbinds leave behind,
// so that OSB's last_operation can tell a resource that was deleted (410
// Gone, which a platform polling a delete takes as success) from one that
// never existed (404). The instance or binding document itself must go:
// an instance document pins its spec.
//
//	tombstones/instance:{instance_id}
//	tombstones/binding:{instance_id}:{binding_id}
//
// (":" is not among the characters an id may hold.)
const TombstonesCollection = "tombstones"

// TombstoneRetention is how long a tombstone answers: a platform polls for
// minutes; a week is generous. Reads treat an expired tombstone as absent;
// a Firestore TTL policy on expires_at deletes it (terraform/firestore.tf).
const TombstoneRetention = 7 * 24 * time.Hour

// Tombstone kinds.
const (
	TombstoneInstance = "instance"
	TombstoneBinding  = "binding"
)

// Tombstone records the deletion of an instance or a binding.
type Tombstone struct {
	Kind       string    `firestore:"kind"`
	InstanceID string    `firestore:"instance_id"`
	BindingID  string    `firestore:"binding_id,omitempty"`
	SpecID     string    `firestore:"spec_id"`
	PlanID     string    `firestore:"plan_id"`
	DeletedAt  time.Time `firestore:"deleted_at"`
	ExpiresAt  time.Time `firestore:"expires_at"`
}

func (s *Store) tombstones() *firestore.CollectionRef {
	return s.client.Collection(TombstonesCollection)
}

// DocID is the id of the tombstone's document: its kind and ids.
func (t Tombstone) DocID() string {
	if t.Kind == TombstoneBinding {
		return TombstoneBinding + ":" + t.InstanceID + ":" + t.BindingID
	}
	return TombstoneInstance + ":" + t.InstanceID
}

func instanceTombstoneID(instanceID string) string {
	return Tombstone{Kind: TombstoneInstance, InstanceID: instanceID}.DocID()
}

func bindingTombstoneID(instanceID, bindingID string) string {
	return Tombstone{Kind: TombstoneBinding, InstanceID: instanceID, BindingID: bindingID}.DocID()
}

func (s *Store) tombstone(kind, instanceID, bindingID, specID, planID string) Tombstone {
	now := s.now().UTC()
	return Tombstone{Kind: kind, InstanceID: instanceID, BindingID: bindingID, SpecID: specID, PlanID: planID,
		DeletedAt: now, ExpiresAt: now.Add(TombstoneRetention)}
}

// Gone returns the unexpired tombstone of an instance (bindingID "") or of
// a binding, nil if there is none. A binding also counts as gone when its
// instance was deprovisioned (it went with it) and the instance has not
// been provisioned again since. Costs one read for an instance, three
// (one round trip) for a binding.
func (s *Store) Gone(ctx context.Context, instanceID, bindingID string) (*Tombstone, error) {
	instTomb := s.tombstones().Doc(instanceTombstoneID(instanceID))
	refs := []*firestore.DocumentRef{instTomb}
	if bindingID != "" {
		refs = []*firestore.DocumentRef{s.tombstones().Doc(bindingTombstoneID(instanceID, bindingID)), instTomb, s.instances().Doc(instanceID)}
	}
	snaps, err := s.client.GetAll(ctx, refs)
	s.ops.read(len(refs))
	if err != nil {
		return nil, classify(err, "read tombstones of instance %s", instanceID)
	}
	if bindingID != "" && snaps[2].Exists() {
		snaps = snaps[:1] // the instance is back: only the binding's own counts
	}
	now := s.now()
	for _, snap := range snaps {
		if !snap.Exists() {
			continue
		}
		var t Tombstone
		if err := snap.DataTo(&t); err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		if t.ExpiresAt.After(now) {
			return &t, nil
		}
	}
	return nil, nil
}
