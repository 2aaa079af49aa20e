package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/api"
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
	Platform string `firestore:"platform,omitempty" json:"platform,omitempty"`
	// Context is the OSB context as the request gave it; stored as
	// ContextJSON (context.go), read from LegacyContext on records
	// written before that.
	Context       map[string]any `firestore:"-" json:"context,omitempty"`
	ContextJSON   string         `firestore:"context_json,omitempty" json:"-"`
	LegacyContext map[string]any `firestore:"context,omitempty" json:"-"`
	// OrganizationGUID and SpaceGUID are the provision's organization_guid
	// and space_guid: OSB v2.17 deprecates them in favour of the context,
	// but a platform that sends no context (Korifi's OSB client) says
	// where an instance belongs only with them, so a provision of the id
	// again must name the same ones. Empty on records from before they
	// were kept: unknown, never a conflict.
	OrganizationGUID string `firestore:"organization_guid,omitempty" json:"organization_guid,omitempty"`
	SpaceGUID        string `firestore:"space_guid,omitempty" json:"space_guid,omitempty"`
	// MaintenanceVersion is the OSB maintenance_info version of the spec
	// version the instance is on: the current one when it was provisioned
	// (a provision naming another is refused), the current one again after
	// a PATCH that names it. Empty on records from before it was kept.
	MaintenanceVersion string    `firestore:"maintenance_version,omitempty" json:"maintenance_version,omitempty"`
	CreatedAt          time.Time `firestore:"created_at" json:"created_at"`
	// UpdatedAt is when a PATCH last changed the record (zero: never).
	UpdatedAt time.Time `firestore:"updated_at,omitempty" json:"updated_at,omitzero"`
	// PreviousPlanID is the plan before the last plan change: OSB has a
	// platform poll last_operation with it after a plan change.
	PreviousPlanID string `firestore:"previous_plan_id,omitempty" json:"previous_plan_id,omitempty"`
	// Bindings is how many bindings went with the instance when
	// Deprovision deleted it (its listing's count). Not stored: a counter
	// here would make every bind of the instance write this document, and
	// concurrent binds queue on it; the deprovision lists the bindings in
	// its transaction instead (see CreateBinding). Records written before
	// carry a stale "bindings" field that nothing reads.
	Bindings int64 `firestore:"-" json:"bindings"`
	// ParametersDigest is the salted, deliberately slow digest of the
	// provision's parameters (NoParameters when it had none; see
	// parameters.go): it answers whether a provision again under this id
	// names the same parameters, and nothing else. "" on records from
	// before it was kept: unknown, never a conflict. A PATCH's parameters
	// do not change it (how they combine with the provision's is the
	// service's business, not the broker's).
	ParametersDigest string `firestore:"parameters_digest,omitempty" json:"-"`
	// Parameters are the provision request's parameters (raw JSON) for
	// CreateInstance to digest; never stored, they may hold secrets.
	Parameters json.RawMessage `firestore:"-" json:"-"`
}

// Sentinels in the chain of refused instance and binding operations, for
// the HTTP surface to pick OSB's status and error code; each is wrapped
// with its failure kind and a message naming the ids.
var (
	// ErrMaintenanceInfo: a maintenance_info version that is not the
	// plan's current one (OSB: 422 MaintenanceInfoConflict).
	ErrMaintenanceInfo = errors.New("maintenance_info conflict")
	// ErrNoInstance: the instance named does not exist.
	ErrNoInstance = errors.New("no such instance")
	// ErrPlanNotUpdateable: the instance's plan is not plan_updateable, so
	// its instances cannot change plans at all. The catalog says so (the
	// plan's plan_updateable is false), and OSB forbids a platform to ask.
	ErrPlanNotUpdateable = errors.New("plan not updateable")
	// ErrPlanChange: the instance's plan is updateable, but its updates_to
	// does not list the plan asked for. The OSB catalog cannot say which
	// plans a plan moves to, so the platform could not have known.
	ErrPlanChange = errors.New("plan change not supported")
)

// refused is a refusal of kind k that errors.Is matches with sentinel,
// worded by format alone (the sentinel's own text would only repeat it).
func refused(k failure.Kind, sentinel error, format string, args ...any) error {
	return failure.Wrap(k, &tagged{msg: fmt.Sprintf(format, args...), sentinel: sentinel})
}

type tagged struct {
	msg      string
	sentinel error
}

func (t *tagged) Error() string { return t.msg }
func (t *tagged) Unwrap() error { return t.sentinel }

// CreateInstanceResult says whether CreateInstance wrote anything.
type CreateInstanceResult struct {
	Instance Instance
	Existed  bool // an identical instance already existed; nothing written
}

// CreateInstance records an instance of an active spec and one of its
// plans. An id that has a record is answered from it, read outside any
// transaction (existingInstance: the record for an identical request, a
// failure.Conflict otherwise). Otherwise one transaction reads the spec
// (it must exist, be active and have the plan) and creates the record with
// Firestore's must-not-exist precondition; a request that loses that race
// to another under the same id is answered from the winner's record. It
// writes nothing else: provisions of one spec share only a read of the
// spec, and provisions under one id no lock on it, so a burst of either
// never queues behind a lock (usage.go). Its read of the spec orders it
// against MarkSpec, which writes the spec; its new record, in the range
// DeleteMarked's query locks, orders it against the delete: either commits
// first, and the other sees it.
//
// Identical is OSB's "the same attributes": the service, the plan, the
// organization and space, the context (as recorded: a context update
// replaces it) and the parameters
// (by their digest, derived outside the transaction so that the slow
// derivation holds no lock: a new record's before it, a comparison
// against the record read).
func (s *Store) CreateInstance(ctx context.Context, inst Instance) (CreateInstanceResult, error) {
	if inst.ID == "" || inst.SpecID == "" || inst.PlanID == "" {
		return CreateInstanceResult{}, failure.New(failure.Invalid, "instance needs an id, a service id and a plan id")
	}
	if err := inst.encodeContext(); err != nil {
		return CreateInstanceResult{}, failure.Wrap(failure.Invalid, err)
	}
	specRef := s.specs().Doc(inst.SpecID)
	instRef := s.instances().Doc(inst.ID)
	// An instance that exists is answered from the record as read, with
	// no transaction: once created, a record is the answer to every
	// provision of its id until it is deprovisioned.
	if cur, err := readRecord[Instance](ctx, s, instRef); err != nil || cur != nil {
		if err != nil {
			return CreateInstanceResult{}, classify(err, "read instance %s", inst.ID)
		}
		return s.existingInstance(ctx, *cur, inst)
	}
	digest, err := digestParameters(ctx, inst.Parameters)
	if err != nil {
		return CreateInstanceResult{}, classify(err, "digest the parameters of instance %s", inst.ID)
	}
	inst.ParametersDigest = digest
	var res CreateInstanceResult
	err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		res = CreateInstanceResult{}
		specSnap, err := tx.Get(specRef)
		s.ops.read(1)
		if isNotFound(err) {
			return failure.New(failure.NotFound, "service %s is not in the catalog", inst.SpecID)
		}
		if err != nil {
			return err
		}
		var rec SpecRecord
		if err := specSnap.DataTo(&rec); err != nil {
			return err
		}
		if rec.State != api.SpecActive {
			return failure.New(failure.Invalid, "service %s is marked for deletion and takes no new instances", inst.SpecID)
		}
		sp, err := rec.Spec()
		if err != nil {
			return err
		}
		if _, ok := sp.PlanByID(inst.PlanID); !ok {
			return failure.New(failure.NotFound, "service %s has no plan %s", inst.SpecID, inst.PlanID)
		}
		v, err := maintenance(&rec, sp, inst.PlanID, inst.MaintenanceVersion)
		if err != nil {
			return err
		}
		inst.MaintenanceVersion = v
		if err := platformOK(&rec, sp, inst.Platform); err != nil {
			return err
		}
		inst.Bindings, inst.UpdatedAt, inst.PreviousPlanID = 0, time.Time{}, ""
		if inst.CreatedAt.IsZero() {
			inst.CreatedAt = s.now().UTC()
		}
		res.Instance = inst
		// Create, not a read of the id: a read would lock it, and every
		// request of a burst under one id would hold that lock while one
		// of them waits to write. Create's precondition lets the first
		// commit and fails the rest (AlreadyExists), which then answer
		// from the record the winner wrote.
		return tx.Create(instRef, inst)
	})
	if status.Code(err) == codes.AlreadyExists {
		cur, rerr := readRecord[Instance](ctx, s, instRef)
		if rerr != nil {
			return CreateInstanceResult{}, classify(rerr, "read instance %s", inst.ID)
		}
		if cur != nil {
			return s.existingInstance(ctx, *cur, inst)
		}
	}
	if err != nil {
		return CreateInstanceResult{}, classify(err, "create instance %s", inst.ID)
	}
	s.ops.write(1)
	return res, nil
}

// readRecord reads an instance or binding record outside any
// transaction (nil: there is none): the answer to a request under an id
// that has one, read without taking part in the writers' transactions.
func readRecord[T any](ctx context.Context, s *Store, ref *firestore.DocumentRef) (*T, error) {
	snap, err := ref.Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cur T
	if err := dataTo(snap, &cur); err != nil {
		return nil, err
	}
	return &cur, nil
}

// existingInstance answers a provision of an id that has a record: the
// record when the request is identical (OSB's 200), a failure.Conflict
// naming what differs otherwise (409). Parameters are compared by their
// digest (sameParameters), the one slow derivation a repeat costs.
func (s *Store) existingInstance(ctx context.Context, cur, inst Instance) (CreateInstanceResult, error) {
	if cur.SpecID != inst.SpecID || cur.PlanID != inst.PlanID {
		return CreateInstanceResult{}, failure.New(failure.Conflict, "instance %s already exists with service %s and plan %s", inst.ID, cur.SpecID, cur.PlanID)
	}
	if (cur.OrganizationGUID != "" && cur.OrganizationGUID != inst.OrganizationGUID) || (cur.SpaceGUID != "" && cur.SpaceGUID != inst.SpaceGUID) {
		return CreateInstanceResult{}, failure.New(failure.Conflict, "instance %s already exists in another organization or space (organization_guid %q, space_guid %q)", inst.ID, cur.OrganizationGUID, cur.SpaceGUID)
	}
	if !sameContext(cur.Context, inst.Context) {
		return CreateInstanceResult{}, failure.New(failure.Conflict, "instance %s already exists with another context", inst.ID)
	}
	same, err := sameParameters(ctx, cur.ParametersDigest, inst.Parameters)
	if err != nil {
		return CreateInstanceResult{}, classify(err, "compare the parameters of instance %s", inst.ID)
	}
	if !same {
		return CreateInstanceResult{}, failure.New(failure.Conflict, "instance %s already exists with other parameters", inst.ID)
	}
	return CreateInstanceResult{Instance: cur, Existed: true}, nil
}

// maintenance checks a maintenance_info version a request named against
// the served spec's current one ("" names none) and returns the current
// one: the spec's own maintenance version (a chart's) or its generation's
// (spec.Spec.MaintenanceAt), as the catalog renders it.
func maintenance(rec *SpecRecord, sp *spec.Spec, planID, asked string) (string, error) {
	v := sp.MaintenanceAt(rec.Generation)
	if asked != "" && asked != v {
		return "", refused(failure.Precondition, ErrMaintenanceInfo, "service %s plan %s is at maintenance_info version %q, not %q", rec.ID, planID, v, asked)
	}
	return v, nil
}

// platformOK checks that the spec supports an instance's OCI platform ("" is
// none said; a spec that declares no platforms supports any).
func platformOK(rec *SpecRecord, sp *spec.Spec, platform string) error {
	if !sp.SupportsPlatform(platform) {
		return failure.New(failure.Invalid, "service %s does not support platform %s (it supports %s)", rec.ID, platform, strings.Join(rec.Platforms, ", "))
	}
	return nil
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
	if err := dataTo(snap, &inst); err != nil {
		return nil, classify(err, "decode instance %s", id)
	}
	return &inst, nil
}

// DeleteInstance removes an instance record with its bindings and writes
// its tombstone, in one transaction.
// OSB has the platform unbind first and leaves a deprovision with bindings
// to the broker: here it takes them along, because a binding cannot
// outlive its instance and a platform's orphan mitigation retries a
// deprovision until it succeeds. The returned record's Bindings says how
// many went with it. A missing instance is a failure.NotFound.
func (s *Store) DeleteInstance(ctx context.Context, id string) (*Instance, error) {
	return s.Deprovision(ctx, Deprovision{ID: id})
}

// Deprovision names an instance to delete and the service and plan the
// platform says it has (OSB's required query parameters; "" unchecked).
type Deprovision struct {
	ID                string
	ServiceID, PlanID string
}

// Deprovision is DeleteInstance that first checks, in its transaction,
// the service and plan the platform named against the instance's: a
// mismatch is a failure.Invalid and deletes nothing. Checked there, a
// plan change that commits first makes a deprovision naming the old plan
// fail rather than delete an instance on the new one, and the check
// costs no read of its own.
func (s *Store) Deprovision(ctx context.Context, d Deprovision) (*Instance, error) {
	id := d.ID
	instRef := s.instances().Doc(id)
	var inst Instance
	var bindings []*firestore.DocumentSnapshot
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(instRef)
		s.ops.read(1)
		if isNotFound(err) {
			return refused(failure.NotFound, ErrNoInstance, "instance %s does not exist", id)
		}
		if err != nil {
			return err
		}
		if err := dataTo(snap, &inst); err != nil {
			return err
		}
		if (d.ServiceID != "" && d.ServiceID != inst.SpecID) || (d.PlanID != "" && d.PlanID != inst.PlanID) {
			return failure.New(failure.Invalid, "instance %s is of service %s plan %s, not service %s plan %s", id, inst.SpecID, inst.PlanID, d.ServiceID, d.PlanID)
		}
		// The listing, a query in the transaction, locks the range of the
		// instance's bindings: a bind committing one conflicts with this
		// deprovision, and whichever commits second sees the other (a bind
		// then finds no instance).
		if bindings, err = tx.Documents(instRef.Collection(BindingsCollection)).GetAll(); err != nil {
			return err
		}
		s.ops.read(len(bindings))
		inst.Bindings = int64(len(bindings))
		for _, b := range bindings {
			if err := tx.Delete(b.Ref); err != nil {
				return err
			}
		}
		if err := tx.Delete(instRef); err != nil {
			return err
		}
		return tx.Set(s.tombstones().Doc(instanceTombstoneID(id)), s.tombstone(TombstoneInstance, id, "", inst.SpecID, inst.PlanID))
	})
	if err != nil {
		return nil, classify(err, "delete instance %s", id)
	}
	s.ops.delete(1 + len(bindings))
	s.ops.write(1) // the tombstone
	return &inst, nil
}

// InstanceUpdate is what an OSB PATCH asks of an instance. Zero fields keep
// what is recorded.
type InstanceUpdate struct {
	ID        string
	ServiceID string // required: the instance's service
	PlanID    string // the plan to move to ("" keeps the plan)
	// PreviousPlanID is the plan the platform believes the instance is on
	// (OSB previous_values.plan_id; "" unchecked).
	PreviousPlanID string
	// Context replaces the recorded context (nil keeps it).
	Context map[string]any
	// Platform moves the instance to another OCI platform ("" keeps it).
	Platform string
	// MaintenanceVersion asks for the spec's current version: the instance
	// is upgraded to it; another version is ErrMaintenanceInfo.
	MaintenanceVersion string
}

// UpdateInstanceResult is the record after an update and whether anything
// was written.
type UpdateInstanceResult struct {
	Instance Instance
	Changed  bool
}

// UpdateInstance applies an OSB PATCH in one transaction that reads the
// instance and its spec. A plan change needs the spec active (a marked
// spec is not in the catalog, so neither is the plan asked for), the new
// plan in it and the spec's plan_updateable and updates_to to allow it
// (spec.Spec.PlanChange); the record's new plan is what lets a held-back
// version that drops the old plan be adopted by the next run (a spec's
// usage is counted from the records). The spec is read, never written. A
// maintenance_info version must be the spec's current one and records it.
// An update that changes nothing writes nothing.
func (s *Store) UpdateInstance(ctx context.Context, u InstanceUpdate) (UpdateInstanceResult, error) {
	if u.ID == "" || u.ServiceID == "" {
		return UpdateInstanceResult{}, failure.New(failure.Invalid, "an update needs an instance id and a service id")
	}
	instRef := s.instances().Doc(u.ID)
	var res UpdateInstanceResult
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		res = UpdateInstanceResult{}
		cur, err := txGet[Instance](s, tx, instRef)
		if err != nil {
			return err
		}
		if cur == nil {
			return refused(failure.NotFound, ErrNoInstance, "instance %s does not exist", u.ID)
		}
		if u.ServiceID != cur.SpecID {
			return failure.New(failure.Invalid, "instance %s is of service %s, not %s", u.ID, cur.SpecID, u.ServiceID)
		}
		// A repeat of a plan change that was applied names the old plan
		// as previous and the new one as the plan: that is no mismatch.
		if u.PreviousPlanID != "" && u.PreviousPlanID != cur.PlanID && u.PlanID != cur.PlanID {
			return failure.New(failure.Invalid, "previous_values.plan_id is %s, but instance %s is on plan %s", u.PreviousPlanID, u.ID, cur.PlanID)
		}
		rec, sp, err := s.txSpecOf(tx, cur)
		if err != nil {
			return err
		}
		next := *cur
		if u.PlanID != "" && u.PlanID != cur.PlanID {
			if rec.State != api.SpecActive {
				return failure.New(failure.Invalid, "service %s is marked for deletion: its instances cannot change plans", cur.SpecID)
			}
			if _, ok := sp.PlanByID(u.PlanID); !ok {
				return failure.New(failure.NotFound, "service %s has no plan %s", cur.SpecID, u.PlanID)
			}
			if why := sp.PlanChange(cur.PlanID, u.PlanID); why != "" {
				sentinel := ErrPlanChange
				if src, ok := sp.PlanByID(cur.PlanID); ok && !sp.Updateable(src) {
					sentinel = ErrPlanNotUpdateable
				}
				return refused(failure.Invalid, sentinel, "instance %s: %s", u.ID, why)
			}
			next.PlanID, next.PreviousPlanID = u.PlanID, cur.PlanID
		}
		if u.Platform != "" && u.Platform != cur.Platform {
			if err := platformOK(rec, sp, u.Platform); err != nil {
				return err
			}
			next.Platform = u.Platform
		}
		if u.MaintenanceVersion != "" {
			if next.MaintenanceVersion, err = maintenance(rec, sp, next.PlanID, u.MaintenanceVersion); err != nil {
				return err
			}
		}
		if u.Context != nil {
			next.Context = u.Context
		}
		if reflect.DeepEqual(next, *cur) {
			res.Instance = *cur
			return nil
		}
		next.UpdatedAt = s.now().UTC()
		if err := next.encodeContext(); err != nil {
			return failure.Wrap(failure.Invalid, err)
		}
		res = UpdateInstanceResult{Instance: next, Changed: true}
		return tx.Set(instRef, next)
	})
	if err != nil {
		return UpdateInstanceResult{}, classify(err, "update instance %s", u.ID)
	}
	if res.Changed {
		s.ops.write(1)
	}
	return res, nil
}

// txSpecOf reads, in tx, the spec an existing instance is of, decoded. Its
// absence is a failure.NotFound: the instance pins it, so only a damaged
// store lacks it.
func (s *Store) txSpecOf(tx *firestore.Transaction, inst *Instance) (*SpecRecord, *spec.Spec, error) {
	rec, err := txGet[SpecRecord](s, tx, s.specs().Doc(inst.SpecID))
	if err != nil {
		return nil, nil, err
	}
	if rec == nil {
		return nil, nil, failure.New(failure.NotFound, "service %s of instance %s is not stored", inst.SpecID, inst.ID)
	}
	sp, err := rec.Spec()
	if err != nil {
		return nil, nil, err
	}
	return rec, sp, nil
}

// SpecInstances returns up to limit instances of a spec, in no particular
// order.
func (s *Store) SpecInstances(ctx context.Context, specID string, limit int) ([]Instance, error) {
	q := s.instances().Where("spec_id", "==", specID).Limit(limit)
	return queryAll[Instance](ctx, s, q, "instances of spec "+specID)
}
