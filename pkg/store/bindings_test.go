package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// updatable is a spec whose plans may move small <-> large (not to tiny),
// bindable except for plan "sealed".
func updatable(t *testing.T, registry, name string) store.Offer {
	t.Helper()
	s := &spec.Spec{Name: name, Description: "d", Bindable: true, Plans: []spec.Plan{
		{Name: "small", Description: "p", UpdatesTo: []string{"large"}},
		{Name: "large", Description: "p", UpdatesTo: []string{"small"}},
		{Name: "tiny", Description: "p"},
		{Name: "sealed", Description: "p", Bindable: new(false), UpdatesTo: []string{"small"}},
	}, Platforms: []spec.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}}
	if err := spec.Validate(s); err != nil {
		t.Fatal(err)
	}
	spec.AssignIDs(s, registry)
	return store.Offer{Registry: registry, Entry: name, Ref: "ref", Spec: s, Digest: spec.Digest(s), Run: "run"}
}

type storeEnv struct {
	t   *testing.T
	ctx context.Context
	st  *store.Store
	ops *store.Ops
	o   store.Offer
}

func newStoreEnv(t *testing.T) *storeEnv {
	t.Helper()
	client := checked(t)
	ops := &store.Ops{}
	e := &storeEnv{t: t, ctx: context.Background(), st: store.New(client).WithOps(ops), ops: ops, o: updatable(t, "r1", "db")}
	if _, err := e.st.UpsertSpec(e.ctx, e.o); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *storeEnv) plan(name string) string {
	p, ok := e.o.Spec.PlanByName(name)
	if !ok {
		e.t.Fatalf("no plan %s", name)
	}
	return p.ID
}

func (e *storeEnv) counts() *store.SpecRecord {
	e.t.Helper()
	rec, err := e.st.GetSpec(e.ctx, e.o.Spec.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// delta runs f and returns the Firestore operations it cost.
func (e *storeEnv) delta(f func()) store.Counts {
	before := e.ops.Snapshot()
	f()
	after := e.ops.Snapshot()
	return store.Counts{Reads: after.Reads - before.Reads, Writes: after.Writes - before.Writes, Deletes: after.Deletes - before.Deletes}
}

func TestUpdateInstancePlanChange(t *testing.T) {
	e := newStoreEnv(t)
	small, large, tiny := e.plan("small"), e.plan("large"), e.plan("tiny")
	if _, err := e.st.CreateInstance(e.ctx, store.Instance{ID: "i1", SpecID: e.o.Spec.ID, PlanID: small, Platform: "linux/amd64"}); err != nil {
		t.Fatal(err)
	}
	var res store.UpdateInstanceResult
	cost := e.delta(func() {
		var err error
		res, err = e.st.UpdateInstance(e.ctx, store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, PlanID: large, PreviousPlanID: small})
		if err != nil {
			t.Fatal(err)
		}
	})
	if !res.Changed || res.Instance.PlanID != large || res.Instance.PreviousPlanID != small || res.Instance.UpdatedAt.IsZero() {
		t.Fatalf("plan change: %+v", res)
	}
	// The instance and its spec read, the instance written: the spec
	// keeps no counters (its usage is counted from the records).
	if cost != (store.Counts{Reads: 2, Writes: 1}) {
		t.Fatalf("plan change cost %+v, want 2 reads and 1 write", cost)
	}
	rec := e.counts()
	if rec.Instances != 1 || rec.PlanInstances[small] != 0 || rec.PlanInstances[large] != 1 || rec.PlatformInstances["linux/amd64"] != 1 {
		t.Fatalf("counters after the move: %d %v %v", rec.Instances, rec.PlanInstances, rec.PlatformInstances)
	}
	// The same request again (a platform's retry) changes nothing and
	// writes nothing, although previous_values still names the old plan.
	cost = e.delta(func() {
		res, err := e.st.UpdateInstance(e.ctx, store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, PlanID: large, PreviousPlanID: small})
		if err != nil || res.Changed {
			t.Fatalf("repeat: %+v %v", res, err)
		}
	})
	if cost != (store.Counts{Reads: 2}) {
		t.Fatalf("a repeat cost %+v, want the 2 reads and nothing written", cost)
	}

	// tiny lists no updates_to and the spec says no plan_updateable: its
	// instances cannot change plans at all.
	if _, err := e.st.CreateInstance(e.ctx, store.Instance{ID: "t1", SpecID: e.o.Spec.ID, PlanID: tiny}); err != nil {
		t.Fatal(err)
	}
	refusals := []struct {
		name string
		u    store.InstanceUpdate
		kind failure.Kind
		is   error
	}{
		{"not in updates_to", store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, PlanID: tiny}, failure.Invalid, store.ErrPlanChange},
		{"plan not updateable", store.InstanceUpdate{ID: "t1", ServiceID: e.o.Spec.ID, PlanID: small}, failure.Invalid, store.ErrPlanNotUpdateable},
		{"unknown plan", store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, PlanID: "no-such-plan"}, failure.NotFound, nil},
		{"another service", store.InstanceUpdate{ID: "i1", ServiceID: "other", PlanID: small}, failure.Invalid, nil},
		{"stale previous plan", store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, PlanID: small, PreviousPlanID: tiny}, failure.Invalid, nil},
		{"unknown instance", store.InstanceUpdate{ID: "nope", ServiceID: e.o.Spec.ID, PlanID: small}, failure.NotFound, store.ErrNoInstance},
		{"old maintenance version", store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, MaintenanceVersion: "0.9.0"}, failure.Precondition, store.ErrMaintenanceInfo},
		{"unsupported platform", store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, Platform: "linux/s390x"}, failure.Invalid, nil},
		{"no service id", store.InstanceUpdate{ID: "i1"}, failure.Invalid, nil},
	}
	for _, r := range refusals {
		cost := e.delta(func() {
			_, err := e.st.UpdateInstance(e.ctx, r.u)
			if !failure.Is(err, r.kind) || (r.is != nil && !errors.Is(err, r.is)) {
				t.Errorf("%s: %v, want kind %s (%v)", r.name, err, r.kind, r.is)
			}
			// The two plan-change refusals answer differently: neither
			// may pass for the other.
			if (r.is == store.ErrPlanChange && errors.Is(err, store.ErrPlanNotUpdateable)) || (r.is == store.ErrPlanNotUpdateable && errors.Is(err, store.ErrPlanChange)) {
				t.Errorf("%s: %v is both plan-change refusals", r.name, err)
			}
		})
		if cost.Writes != 0 || cost.Deletes != 0 {
			t.Errorf("%s: a refused update wrote %+v", r.name, cost)
		}
	}

	// A platform move and a maintenance upgrade to the current version.
	res, err := e.st.UpdateInstance(e.ctx, store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, Platform: "linux/arm64", MaintenanceVersion: "1.0.0",
		Context: map[string]any{"platform": "kubernetes", "namespace": "renamed"}})
	if err != nil || res.Instance.Platform != "linux/arm64" || res.Instance.MaintenanceVersion != "1.0.0" || res.Instance.Context["namespace"] != "renamed" {
		t.Fatalf("platform, maintenance, context: %+v %v", res, err)
	}
	if rec := e.counts(); rec.PlatformInstances["linux/amd64"] != 0 || rec.PlatformInstances["linux/arm64"] != 1 || rec.PlanInstances[large] != 1 {
		t.Fatalf("counters after the platform move: %v %v", rec.PlanInstances, rec.PlatformInstances)
	}

	// A marked spec takes no plan change, but still a context update.
	if ok, err := e.st.MarkSpec(e.ctx, "r1", e.o.Spec.ID, "run-2"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	if _, err := e.st.UpdateInstance(e.ctx, store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, PlanID: small}); !failure.Is(err, failure.Invalid) {
		t.Fatalf("plan change on a marked spec: %v", err)
	}
	if res, err := e.st.UpdateInstance(e.ctx, store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, Context: map[string]any{"platform": "cf"}}); err != nil || !res.Changed {
		t.Fatalf("context update on a marked spec: %+v %v", res, err)
	}
}

func TestBindingLifecycle(t *testing.T) {
	e := newStoreEnv(t)
	small, sealed := e.plan("small"), e.plan("sealed")
	if _, err := e.st.CreateInstance(e.ctx, store.Instance{ID: "i1", SpecID: e.o.Spec.ID, PlanID: small}); err != nil {
		t.Fatal(err)
	}
	b := store.Binding{ID: "b1", InstanceID: "i1", SpecID: e.o.Spec.ID, PlanID: small, AppGUID: "app-1"}
	var res store.CreateBindingResult
	cost := e.delta(func() {
		var err error
		if res, err = e.st.CreateBinding(e.ctx, b); err != nil || res.Existed {
			t.Fatalf("bind: %+v %v", res, err)
		}
	})
	// The instance's bindings counted (one read), instance, binding id
	// and spec read; the binding created, and nothing else written.
	if cost != (store.Counts{Reads: 4, Writes: 1}) {
		t.Fatalf("bind cost %+v, want 4 reads and 1 write", cost)
	}
	if res, err := e.st.CreateBinding(e.ctx, b); err != nil || !res.Existed {
		t.Fatalf("identical bind: %+v %v", res, err)
	}
	other := b
	other.AppGUID = "app-2"
	if _, err := e.st.CreateBinding(e.ctx, other); !failure.Is(err, failure.Conflict) {
		t.Fatalf("same id, another app: %v", err)
	}
	if got, err := e.st.GetBinding(e.ctx, "i1", "b1"); err != nil || got.AppGUID != "app-1" || got.InstanceID != "i1" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := e.st.GetBinding(e.ctx, "i1", "b9"); !failure.Is(err, failure.NotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	for _, bad := range []struct {
		name string
		b    store.Binding
		kind failure.Kind
		is   error
	}{
		{"unknown instance", store.Binding{ID: "b2", InstanceID: "nope", SpecID: e.o.Spec.ID, PlanID: small}, failure.NotFound, store.ErrNoInstance},
		{"another plan", store.Binding{ID: "b2", InstanceID: "i1", SpecID: e.o.Spec.ID, PlanID: sealed}, failure.Invalid, nil},
		{"another service", store.Binding{ID: "b2", InstanceID: "i1", SpecID: "other", PlanID: small}, failure.Invalid, nil},
		{"no id", store.Binding{InstanceID: "i1", SpecID: e.o.Spec.ID, PlanID: small}, failure.Invalid, nil},
	} {
		if _, err := e.st.CreateBinding(e.ctx, bad.b); !failure.Is(err, bad.kind) || (bad.is != nil && !errors.Is(err, bad.is)) {
			t.Errorf("%s: %v, want %s", bad.name, err, bad.kind)
		}
	}
	// A plan that is not bindable takes no binding.
	if _, err := e.st.CreateInstance(e.ctx, store.Instance{ID: "i2", SpecID: e.o.Spec.ID, PlanID: sealed}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateBinding(e.ctx, store.Binding{ID: "b3", InstanceID: "i2", SpecID: e.o.Spec.ID, PlanID: sealed}); !errors.Is(err, store.ErrNotBindable) || !failure.Is(err, failure.Invalid) {
		t.Fatalf("bind a sealed plan: %v", err)
	}
	// Bindings count toward nothing on the spec.
	if rec := e.counts(); rec.Instances != 2 {
		t.Fatalf("spec instances %d, want 2", rec.Instances)
	}

	// After a plan change the binding is unbound with either plan.
	if _, err := e.st.UpdateInstance(e.ctx, store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, PlanID: e.plan("large")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.DeleteBinding(e.ctx, store.Unbind{InstanceID: "i1", BindingID: "b1", ServiceID: e.o.Spec.ID, PlanID: sealed}); !failure.Is(err, failure.Invalid) {
		t.Fatalf("unbind with a plan of neither: %v", err)
	}
	if gone, err := e.st.Gone(e.ctx, "i1", "b1"); err != nil || gone != nil {
		t.Fatalf("tombstone of a live binding: %+v %v", gone, err)
	}
	cost = e.delta(func() {
		if _, err := e.st.DeleteBinding(e.ctx, store.Unbind{InstanceID: "i1", BindingID: "b1", ServiceID: e.o.Spec.ID, PlanID: e.plan("large")}); err != nil {
			t.Fatal(err)
		}
	})
	if cost != (store.Counts{Reads: 2, Writes: 1, Deletes: 1}) {
		t.Fatalf("unbind cost %+v, want 2 reads, 1 write (the tombstone), 1 delete", cost)
	}
	if _, err := e.st.DeleteBinding(e.ctx, store.Unbind{InstanceID: "i1", BindingID: "b1", ServiceID: e.o.Spec.ID, PlanID: small}); !failure.Is(err, failure.NotFound) {
		t.Fatalf("second unbind: %v", err)
	}
	if gone, err := e.st.Gone(e.ctx, "i1", "b1"); err != nil || gone == nil || gone.Kind != store.TombstoneBinding {
		t.Fatalf("tombstone of the unbound binding: %+v %v", gone, err)
	}
	if gone, err := e.st.Gone(e.ctx, "i1", "never"); err != nil || gone != nil {
		t.Fatalf("tombstone of a binding that never was: %+v %v", gone, err)
	}
}

// A deprovision takes the instance's bindings along (one transaction) and
// leaves a tombstone; a binding changes nothing about the spec's pin.
func TestDeprovisionTakesBindingsAlong(t *testing.T) {
	e := newStoreEnv(t)
	small := e.plan("small")
	if _, err := e.st.CreateInstance(e.ctx, store.Instance{ID: "i1", SpecID: e.o.Spec.ID, PlanID: small}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b1", "b2", "b3"} {
		if _, err := e.st.CreateBinding(e.ctx, store.Binding{ID: id, InstanceID: "i1", SpecID: e.o.Spec.ID, PlanID: small}); err != nil {
			t.Fatal(err)
		}
	}
	// Marked with an instance that has bindings: kept, referenced by one
	// instance (the bindings add nothing).
	if ok, err := e.st.MarkSpec(e.ctx, "r1", e.o.Spec.ID, "run-2"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if out, refs, err := e.st.DeleteMarked(e.ctx, "r1", e.o.Spec.ID, "run-3", time.Now().Add(time.Hour)); err != nil || out != store.Referenced || refs != 1 {
		t.Fatalf("delete of a spec with one bound instance: %s %d %v", out, refs, err)
	}
	// A binding of an instance of a marked spec is still taken.
	if _, err := e.st.CreateBinding(e.ctx, store.Binding{ID: "b4", InstanceID: "i1", SpecID: e.o.Spec.ID, PlanID: small}); err != nil {
		t.Fatalf("bind an instance of a marked spec: %v", err)
	}
	var inst *store.Instance
	cost := e.delta(func() {
		var err error
		if inst, err = e.st.DeleteInstance(e.ctx, "i1"); err != nil {
			t.Fatal(err)
		}
	})
	// Instance and four bindings read; instance and bindings deleted; the
	// tombstone written (the spec is neither read nor written).
	if inst.Bindings != 4 || cost != (store.Counts{Reads: 5, Writes: 1, Deletes: 5}) {
		t.Fatalf("deprovision took %d bindings at %+v, want 4 at 5 reads, 1 write, 5 deletes", inst.Bindings, cost)
	}
	for _, id := range []string{"b1", "b4"} {
		if _, err := e.st.GetBinding(e.ctx, "i1", id); !failure.Is(err, failure.NotFound) {
			t.Fatalf("binding %s outlived its instance: %v", id, err)
		}
		if gone, err := e.st.Gone(e.ctx, "i1", id); err != nil || gone == nil || gone.Kind != store.TombstoneInstance {
			t.Fatalf("binding %s of a deprovisioned instance is not gone: %+v %v", id, gone, err)
		}
	}
	if gone, err := e.st.Gone(e.ctx, "i1", ""); err != nil || gone == nil || gone.SpecID != e.o.Spec.ID || gone.PlanID != small {
		t.Fatalf("instance tombstone: %+v %v", gone, err)
	}
	if out, _, err := e.st.DeleteMarked(e.ctx, "r1", e.o.Spec.ID, "run-3", time.Now().Add(time.Hour)); err != nil || out != store.Deleted {
		t.Fatalf("delete once the bound instance is gone: %s %v", out, err)
	}
	// A binding of a deprovisioned instance is refused, and a new instance
	// of the same id makes the old tombstone irrelevant to its bindings.
	if _, err := e.st.CreateBinding(e.ctx, store.Binding{ID: "b5", InstanceID: "i1", SpecID: e.o.Spec.ID, PlanID: small}); !errors.Is(err, store.ErrNoInstance) {
		t.Fatalf("bind a deprovisioned instance: %v", err)
	}
}

// A deprovision checks the service and plan the platform named in its own
// transaction, at no read of its own: a mismatch deletes nothing, and a
// plan change that came first makes the old plan a mismatch.
func TestDeprovisionChecksServiceAndPlan(t *testing.T) {
	e := newStoreEnv(t)
	small, large := e.plan("small"), e.plan("large")
	if _, err := e.st.CreateInstance(e.ctx, store.Instance{ID: "i1", SpecID: e.o.Spec.ID, PlanID: small}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.UpdateInstance(e.ctx, store.InstanceUpdate{ID: "i1", ServiceID: e.o.Spec.ID, PlanID: large}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []store.Deprovision{
		{ID: "i1", ServiceID: e.o.Spec.ID, PlanID: small}, // the plan before the change
		{ID: "i1", ServiceID: "other", PlanID: large},
	} {
		cost := e.delta(func() {
			if _, err := e.st.Deprovision(e.ctx, d); !failure.Is(err, failure.Invalid) {
				t.Errorf("deprovision naming %s/%s: %v, want invalid", d.ServiceID, d.PlanID, err)
			}
		})
		// The instance read, and nothing else.
		if cost != (store.Counts{Reads: 1}) {
			t.Errorf("refused deprovision cost %+v, want 1 read", cost)
		}
	}
	if _, err := e.st.GetInstance(e.ctx, "i1"); err != nil {
		t.Fatalf("a refused deprovision deleted the instance: %v", err)
	}
	if _, err := e.st.Deprovision(e.ctx, store.Deprovision{ID: "nope", ServiceID: e.o.Spec.ID, PlanID: small}); !errors.Is(err, store.ErrNoInstance) || !failure.Is(err, failure.NotFound) {
		t.Fatalf("deprovision of an unknown instance: %v", err)
	}
	cost := e.delta(func() {
		if _, err := e.st.Deprovision(e.ctx, store.Deprovision{ID: "i1", ServiceID: e.o.Spec.ID, PlanID: large}); err != nil {
			t.Fatal(err)
		}
	})
	// Instance read, and the listing of its bindings (empty: a query
	// bills one read); instance deleted; the tombstone written. Through
	// HTTP that is the whole deprovision: the check used to cost a read of
	// its own before the transaction, and the spec's counters a read and
	// a write.
	if cost != (store.Counts{Reads: 2, Writes: 1, Deletes: 1}) {
		t.Fatalf("deprovision cost %+v, want 2 reads, 1 write, 1 delete", cost)
	}
	if rec := e.counts(); rec.Instances != 0 || rec.PlanInstances[large] != 0 {
		t.Fatalf("counters after the deprovision: %d %v", rec.Instances, rec.PlanInstances)
	}
}

// Bindings are bounded per instance, so the deprovision stays one
// transaction of known size.
func TestBindingLimit(t *testing.T) {
	e := newStoreEnv(t)
	small := e.plan("small")
	if _, err := e.st.CreateInstance(e.ctx, store.Instance{ID: "i1", SpecID: e.o.Spec.ID, PlanID: small}); err != nil {
		t.Fatal(err)
	}
	// 199 bindings written at once, as CreateBinding writes them; the
	// 200th through CreateBinding, the last it takes.
	batch := e.st.Client().Batch()
	bindings := e.st.Client().Collection(store.InstancesCollection).Doc("i1").Collection(store.BindingsCollection)
	for i := range store.MaxBindingsPerInstance - 1 {
		id := fmt.Sprintf("b%03d", i)
		batch.Create(bindings.Doc(id), store.Binding{ID: id, InstanceID: "i1", SpecID: e.o.Spec.ID, PlanID: small, CreatedAt: time.Now()})
	}
	if _, err := batch.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateBinding(e.ctx, store.Binding{ID: "last", InstanceID: "i1", SpecID: e.o.Spec.ID, PlanID: small}); err != nil {
		t.Fatalf("the 200th bind: %v", err)
	}
	_, err := e.st.CreateBinding(e.ctx, store.Binding{ID: "one-more", InstanceID: "i1", SpecID: e.o.Spec.ID, PlanID: small})
	if !errors.Is(err, store.ErrBindingLimit) {
		t.Fatalf("bind past the limit: %v", err)
	}
	if inst, err := e.st.DeleteInstance(e.ctx, "i1"); err != nil || inst.Bindings != store.MaxBindingsPerInstance {
		t.Fatalf("deprovision of an instance at the limit: %+v %v", inst, err)
	}
}
