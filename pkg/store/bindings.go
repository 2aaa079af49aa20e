package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	firestorepb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/failure"
)

// BindingsCollection is the subcollection of an instance that holds its
// bindings: instances/{instance_id}/bindings/{binding_id}.
//
// A subcollection rather than a top-level collection: a binding belongs to
// its instance, and its path says which, so no field can disagree with it;
// OSB addresses a binding by both ids (its 409 is "the same id, for the
// same Service Instance"); and the instance's bindings are one listing of
// the subcollection, which needs no index, in the deprovision transaction
// that takes them along.
const BindingsCollection = "bindings"

// MaxBindingsPerInstance bounds an instance's bindings, so the deprovision
// that deletes them with the instance stays one transaction of a known
// size (a few hundred writes at most). A bind counts them before its
// transaction (a count inside it would lock the range every other bind of
// the instance writes into), so binds racing at the limit may each pass
// it: the bound is exceeded by at most as many binds as run at once.
const MaxBindingsPerInstance = 200

// Binding is an instances/{id}/bindings/{binding_id} document: a service
// binding the broker recorded. It pins nothing: its instance pins the spec.
// Its bind parameters are not recorded (they may hold secrets), only their
// digest.
type Binding struct {
	ID         string `firestore:"id" json:"id"`
	InstanceID string `firestore:"instance_id" json:"instance_id"`
	// SpecID and PlanID are the instance's service and plan at bind time.
	SpecID string `firestore:"spec_id" json:"service_id"`
	PlanID string `firestore:"plan_id" json:"plan_id"`
	// AppGUID and Route are OSB's bind_resource (app_guid also from the
	// deprecated top-level field).
	AppGUID string `firestore:"app_guid,omitempty" json:"app_guid,omitempty"`
	Route   string `firestore:"route,omitempty" json:"route,omitempty"`
	// Context is the OSB context as the request gave it; stored as
	// ContextJSON (context.go), read from LegacyContext on records
	// written before that.
	Context       map[string]any `firestore:"-" json:"context,omitempty"`
	ContextJSON   string         `firestore:"context_json,omitempty" json:"-"`
	LegacyContext map[string]any `firestore:"context,omitempty" json:"-"`
	CreatedAt     time.Time      `firestore:"created_at" json:"created_at"`
	// ParametersDigest is the digest of the bind's parameters, as an
	// instance's (see Instance.ParametersDigest): "" on records from
	// before it was kept.
	ParametersDigest string `firestore:"parameters_digest,omitempty" json:"-"`
	// Parameters are the bind request's parameters (raw JSON) for
	// CreateBinding to digest; never stored.
	Parameters json.RawMessage `firestore:"-" json:"-"`
}

// Sentinels of refused binds (see ErrNoInstance).
var (
	// ErrNotBindable: the instance's plan is not bindable.
	ErrNotBindable = errors.New("plan not bindable")
	// ErrBindingLimit: the instance has MaxBindingsPerInstance bindings.
	ErrBindingLimit = errors.New("too many bindings")
)

// CreateBindingResult says whether CreateBinding wrote anything.
type CreateBindingResult struct {
	Binding Binding
	Existed bool // an identical binding already existed; nothing written
}

func (s *Store) bindingRef(instanceID, bindingID string) *firestore.DocumentRef {
	return s.instances().Doc(instanceID).Collection(BindingsCollection).Doc(bindingID)
}

// sameBinding is OSB's "already exists and identical" but for the context
// (compared next) and the parameters (by their digest, after the
// transaction): the same service, application and route, on the plan it
// was bound on or the one its instance is on now (a platform sends the
// current plan after a plan change).
func sameBinding(cur, b Binding, instancePlan string) bool {
	return cur.SpecID == b.SpecID && cur.AppGUID == b.AppGUID && cur.Route == b.Route &&
		(b.PlanID == cur.PlanID || b.PlanID == instancePlan)
}

// CreateBinding records a binding of an instance. A binding id that has a
// record is answered from it, read outside any transaction
// (existingBinding: the record for an identical bind, a failure.Conflict
// otherwise). Otherwise one transaction reads the instance (it must exist,
// with the service and plan the binding names) and the spec (the plan
// must be bindable), then creates the binding with Firestore's
// must-not-exist precondition, and writes nothing else; a bind that loses
// that race to another under the same id is answered from the winner's
// record. So binds of one instance share only reads, and binds under one
// id no lock on it: a burst of either never queues behind a lock (a read
// of the binding id in the transaction would lock it, and every bind of
// the burst would hold that lock while one of them waits to write it).
// The deprovision that deletes the instance with its bindings lists them
// in its transaction, which locks their range, and deletes the instance
// this transaction read: one of the two commits first, and a bind that
// loses finds no instance. The spec is read, never written: a binding
// pins nothing its instance does not already pin, and a spec marked for
// deletion still takes bindings of its existing instances. Parameters are
// digested and compared as CreateInstance does, outside the transaction;
// the instance's bindings are counted there too (MaxBindingsPerInstance).
func (s *Store) CreateBinding(ctx context.Context, b Binding) (CreateBindingResult, error) {
	if b.ID == "" || b.InstanceID == "" || b.SpecID == "" || b.PlanID == "" {
		return CreateBindingResult{}, failure.New(failure.Invalid, "a binding needs an id, an instance id, a service id and a plan id")
	}
	if err := b.encodeContext(); err != nil {
		return CreateBindingResult{}, failure.Wrap(failure.Invalid, err)
	}
	instRef := s.instances().Doc(b.InstanceID)
	ref := s.bindingRef(b.InstanceID, b.ID)
	// A binding that exists is answered from the record as read, with no
	// transaction: once created, a record is the answer to every bind of
	// its id until it is unbound.
	if cur, err := readRecord[Binding](ctx, s, ref); err != nil || cur != nil {
		if err != nil {
			return CreateBindingResult{}, classify(err, "read binding %s of instance %s", b.ID, b.InstanceID)
		}
		return s.existingBinding(ctx, *cur, b)
	}
	digest, err := digestParameters(ctx, b.Parameters)
	if err != nil {
		return CreateBindingResult{}, classify(err, "digest the parameters of binding %s", b.ID)
	}
	b.ParametersDigest = digest
	bound, err := s.countBindings(ctx, instRef)
	if err != nil {
		return CreateBindingResult{}, classify(err, "count the bindings of instance %s", b.InstanceID)
	}
	var res CreateBindingResult
	err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		res = CreateBindingResult{}
		inst, err := txGet[Instance](s, tx, instRef)
		if err != nil {
			return err
		}
		if inst == nil {
			return refused(failure.NotFound, ErrNoInstance, "instance %s does not exist", b.InstanceID)
		}
		if b.SpecID != inst.SpecID || b.PlanID != inst.PlanID {
			return failure.New(failure.Invalid, "instance %s is of service %s plan %s, not service %s plan %s", b.InstanceID, inst.SpecID, inst.PlanID, b.SpecID, b.PlanID)
		}
		_, sp, err := s.txSpecOf(tx, inst)
		if err != nil {
			return err
		}
		plan, ok := sp.PlanByID(inst.PlanID)
		if !ok {
			return failure.New(failure.NotFound, "service %s has no plan %s", inst.SpecID, inst.PlanID)
		}
		if !sp.PlanBindable(plan) {
			return refused(failure.Invalid, ErrNotBindable, "plan %s (%s) of service %s is not bindable", plan.Name, plan.ID, sp.Name)
		}
		if bound >= MaxBindingsPerInstance {
			return refused(failure.Precondition, ErrBindingLimit, "instance %s has %d bindings, the most it may have", b.InstanceID, bound)
		}
		if b.CreatedAt.IsZero() {
			b.CreatedAt = s.now().UTC()
		}
		res.Binding = b
		// Create, not a read of the id (see above): its precondition
		// lets the first commit and fails the rest (AlreadyExists),
		// which then answer from the record the winner wrote.
		return tx.Create(ref, b)
	})
	if status.Code(err) == codes.AlreadyExists {
		cur, rerr := readRecord[Binding](ctx, s, ref)
		if rerr != nil {
			return CreateBindingResult{}, classify(rerr, "read binding %s of instance %s", b.ID, b.InstanceID)
		}
		if cur != nil {
			return s.existingBinding(ctx, *cur, b)
		}
	}
	if err != nil {
		return CreateBindingResult{}, classify(err, "bind %s to instance %s", b.ID, b.InstanceID)
	}
	s.ops.write(1)
	return res, nil
}

// existingBinding answers a bind of an id that has a record: the record
// when the bind is identical (OSB's 200), a failure.Conflict naming what
// differs otherwise (409). The instance is read (outside any transaction)
// for the plan it is on now, which a platform names after a plan change;
// one deprovisioned since the binding was read is ErrNoInstance, as a
// bind that lost to the deprovision in its transaction.
func (s *Store) existingBinding(ctx context.Context, cur, b Binding) (CreateBindingResult, error) {
	inst, err := readRecord[Instance](ctx, s, s.instances().Doc(b.InstanceID))
	if err != nil {
		return CreateBindingResult{}, classify(err, "read instance %s", b.InstanceID)
	}
	if inst == nil {
		return CreateBindingResult{}, refused(failure.NotFound, ErrNoInstance, "instance %s does not exist", b.InstanceID)
	}
	if !sameBinding(cur, b, inst.PlanID) {
		return CreateBindingResult{}, failure.New(failure.Conflict, "binding %s of instance %s already exists with service %s plan %s app_guid %q route %q",
			b.ID, b.InstanceID, cur.SpecID, cur.PlanID, cur.AppGUID, cur.Route)
	}
	if !sameContext(cur.Context, b.Context) {
		return CreateBindingResult{}, failure.New(failure.Conflict, "binding %s of instance %s already exists with another context", b.ID, b.InstanceID)
	}
	same, err := sameParameters(ctx, cur.ParametersDigest, b.Parameters)
	if err != nil {
		return CreateBindingResult{}, classify(err, "compare the parameters of binding %s", b.ID)
	}
	if !same {
		return CreateBindingResult{}, failure.New(failure.Conflict, "binding %s of instance %s already exists with other parameters", b.ID, b.InstanceID)
	}
	return CreateBindingResult{Binding: cur, Existed: true}, nil
}

// countBindings counts an instance's bindings with an aggregation query
// (a read per thousand bindings, at least one), outside any transaction.
func (s *Store) countBindings(ctx context.Context, instRef *firestore.DocumentRef) (int64, error) {
	res, err := instRef.Collection(BindingsCollection).NewAggregationQuery().WithCount("n").Get(ctx)
	s.ops.read(1)
	if err != nil {
		return 0, err
	}
	v, ok := res["n"].(*firestorepb.Value)
	if !ok {
		return 0, fmt.Errorf("a count of bindings answered %T", res["n"])
	}
	return v.GetIntegerValue(), nil
}

// CountBindings counts an instance's bindings (0 for an instance that
// does not exist).
func (s *Store) CountBindings(ctx context.Context, instanceID string) (int64, error) {
	n, err := s.countBindings(ctx, s.instances().Doc(instanceID))
	if err != nil {
		return 0, classify(err, "count the bindings of instance %s", instanceID)
	}
	return n, nil
}

// GetBinding reads one binding; a missing one is a failure.NotFound.
func (s *Store) GetBinding(ctx context.Context, instanceID, bindingID string) (*Binding, error) {
	snap, err := s.bindingRef(instanceID, bindingID).Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return nil, failure.New(failure.NotFound, "binding %s of instance %s does not exist", bindingID, instanceID)
	}
	if err != nil {
		return nil, classify(err, "read binding %s of instance %s", bindingID, instanceID)
	}
	var b Binding
	if err := dataTo(snap, &b); err != nil {
		return nil, classify(err, "decode binding %s of instance %s", bindingID, instanceID)
	}
	return &b, nil
}

// Unbind names a binding to delete and the service and plan the platform
// says it has (OSB's required query parameters).
type Unbind struct {
	InstanceID, BindingID string
	ServiceID, PlanID     string
}

// DeleteBinding deletes a binding and writes its tombstone, in one
// transaction that checks the service and plan the
// platform named: the binding's service, and the plan it was bound on or
// the one its instance is on now. A binding that does not exist (or whose
// instance does not) is a failure.NotFound.
func (s *Store) DeleteBinding(ctx context.Context, u Unbind) (*Binding, error) {
	instRef := s.instances().Doc(u.InstanceID)
	ref := s.bindingRef(u.InstanceID, u.BindingID)
	var b Binding
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		inst, err := txGet[Instance](s, tx, instRef)
		if err != nil {
			return err
		}
		cur, err := txGet[Binding](s, tx, ref)
		if err != nil {
			return err
		}
		if inst == nil || cur == nil {
			return failure.New(failure.NotFound, "binding %s of instance %s does not exist", u.BindingID, u.InstanceID)
		}
		if u.ServiceID != cur.SpecID || (u.PlanID != cur.PlanID && u.PlanID != inst.PlanID) {
			return failure.New(failure.Invalid, "binding %s of instance %s is of service %s plan %s, not service %s plan %s",
				u.BindingID, u.InstanceID, cur.SpecID, inst.PlanID, u.ServiceID, u.PlanID)
		}
		b = *cur
		if err := tx.Delete(ref); err != nil {
			return err
		}
		return tx.Set(s.tombstones().Doc(bindingTombstoneID(u.InstanceID, u.BindingID)),
			s.tombstone(TombstoneBinding, u.InstanceID, u.BindingID, cur.SpecID, cur.PlanID))
	})
	if err != nil {
		return nil, classify(err, "unbind %s from instance %s", u.BindingID, u.InstanceID)
	}
	s.ops.delete(1)
	s.ops.write(1) // the tombstone
	return &b, nil
}
