package store_test

import (
	"context"
	"testing"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/store"
)

// The store's own rule, not only the HTTP surface's: a spec marked for
// deletion takes no new instance. CreateInstance refuses it (Invalid,
// never retryable: the catalog no longer offers it), writes no instance
// and leaves the spec's counts alone; once the spec is unmarked (it came
// back upstream) the same provision is recorded.
func TestCreateInstanceRefusesAMarkedSpec(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	o := offer(t, "r1", "db", "small")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.MarkSpec(ctx, "r1", o.Spec.ID, "run-2"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	inst := store.Instance{ID: "late", SpecID: o.Spec.ID, PlanID: o.Spec.Plans[0].ID}
	_, err := st.CreateInstance(ctx, inst)
	if !failure.Is(err, failure.Invalid) {
		t.Fatalf("provision of a marked spec: %v (kind %s), want invalid", err, failure.KindOf(err))
	}
	if _, err := st.GetInstance(ctx, "late"); !failure.Is(err, failure.NotFound) {
		t.Fatalf("the refused provision left an instance: %v", err)
	}
	rec, err := st.GetSpec(ctx, o.Spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Instances != 0 || rec.PlanInstances[inst.PlanID] != 0 {
		t.Fatalf("the refused provision counted: %d instances, %v per plan", rec.Instances, rec.PlanInstances)
	}
	// Back upstream: unmarked with the same id, it takes the instance.
	o.Run = "run-3"
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	if res, err := st.CreateInstance(ctx, inst); err != nil || res.Existed {
		t.Fatalf("provision after the spec came back: %+v %v", res, err)
	}
}
