package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/store"
)

func TestInstances(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	o := offer(t, "r1", "db", "small", "large")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	plan := o.Spec.Plans[1].ID
	inst := store.Instance{ID: "i1", SpecID: o.Spec.ID, PlanID: plan, Context: map[string]any{"platform": "kubernetes"}}
	res, err := st.CreateInstance(ctx, inst)
	if err != nil || res.Existed {
		t.Fatalf("create: %+v %v", res, err)
	}
	res, err = st.CreateInstance(ctx, inst)
	if err != nil || !res.Existed {
		t.Fatalf("identical create must report the existing record: %+v %v", res, err)
	}
	conflicting := inst
	conflicting.PlanID = o.Spec.Plans[0].ID
	if _, err := st.CreateInstance(ctx, conflicting); !failure.Is(err, failure.Conflict) {
		t.Fatalf("conflicting create: %v", err)
	}
	for _, bad := range []store.Instance{
		{ID: "i2", SpecID: "no-such-spec", PlanID: plan},
		{ID: "i3", SpecID: o.Spec.ID, PlanID: "no-such-plan"},
	} {
		if _, err := st.CreateInstance(ctx, bad); !failure.Is(err, failure.NotFound) {
			t.Fatalf("create %+v: %v, want not found", bad, err)
		}
	}
	if _, err := st.CreateInstance(ctx, store.Instance{ID: "i4"}); !failure.Is(err, failure.Invalid) {
		t.Fatalf("incomplete instance: %v", err)
	}
	rec, _ := st.GetSpec(ctx, o.Spec.ID)
	if rec.Instances != 1 {
		t.Fatalf("instance count %d, want 1 (repeats and failures must not count)", rec.Instances)
	}
	got, err := st.GetInstance(ctx, "i1")
	if err != nil || got.PlanID != plan || got.Context["platform"] != "kubernetes" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := st.DeleteInstance(ctx, "i1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteInstance(ctx, "i1"); !failure.Is(err, failure.NotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := st.GetInstance(ctx, "i1"); !failure.Is(err, failure.NotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	rec, _ = st.GetSpec(ctx, o.Spec.ID)
	if rec.Instances != 0 {
		t.Fatalf("instance count %d after delete", rec.Instances)
	}
}

func TestConcurrentInstancesCountExactly(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	o := offer(t, "r1", "db", "small")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = st.CreateInstance(ctx, store.Instance{ID: string(rune('a' + i)), SpecID: o.Spec.ID, PlanID: o.Spec.Plans[0].ID})
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rec, _ := st.GetSpec(ctx, o.Spec.ID)
	if rec.Instances != n {
		t.Fatalf("instance count %d, want %d", rec.Instances, n)
	}
}

// A stored context that does not decode fails every read of its
// instance, saying which instance, rather than reading as no context; a
// query that meets one has still read (and counts) every result.
func TestUndecodableContextFailsTheRead(t *testing.T) {
	ctx := context.Background()
	client := checked(t)
	ops := &store.Ops{}
	st := store.New(client).WithOps(ops)
	o := offer(t, "r1", "db", "small")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"i1", "i2"} {
		if _, err := st.CreateInstance(ctx, store.Instance{ID: id, SpecID: o.Spec.ID, PlanID: o.Spec.Plans[0].ID, Context: map[string]any{"platform": "kubernetes"}}); err != nil {
			t.Fatal(err)
		}
	}
	ref := client.Collection(store.InstancesCollection).Doc("i2")
	if _, err := ref.Update(ctx, []firestore.Update{{Path: "context_json", Value: `{"platform":`}}); err != nil {
		t.Fatal(err)
	}
	before := ops.Snapshot()
	_, err := st.SpecInstances(ctx, o.Spec.ID, 10)
	want := "decode instances of spec " + o.Spec.ID + ": instance i2: context_json is not a JSON object"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("instances of a spec with a context that does not decode: %v, want the error %q", err, want)
	}
	if got := ops.Snapshot().Reads - before.Reads; got != 2 {
		t.Errorf("the query counted %d reads, want 2 (both results were read)", got)
	}
	want = "decode instance i2: instance i2: context_json is not a JSON object"
	if _, err := st.GetInstance(ctx, "i2"); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("get: %v, want the error %q", err, want)
	}
	// Put it right: the end check reads every instance's context too.
	if _, err := ref.Update(ctx, []firestore.Update{{Path: "context_json", Value: `{"platform":"kubernetes"}`}}); err != nil {
		t.Fatal(err)
	}
}
