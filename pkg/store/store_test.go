package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

func offer(t *testing.T, registry, name string, plans ...string) store.Offer {
	t.Helper()
	s := &spec.Spec{Name: name, Description: "d"}
	for _, p := range plans {
		s.Plans = append(s.Plans, spec.Plan{Name: p, Description: "p"})
	}
	if err := spec.Validate(s); err != nil {
		t.Fatal(err)
	}
	spec.AssignIDs(s, registry)
	return store.Offer{Registry: registry, Entry: name, Ref: "ref", Spec: s, Digest: spec.Digest(s), Revision: 1}
}

func TestUpsertOutcomes(t *testing.T) {
	ctx := context.Background()
	st := store.New(emulatortest.Firestore(t))
	o := offer(t, "r1", "db", "small")
	steps := []struct {
		name string
		o    store.Offer
		want store.UpsertOutcome
	}{
		{"new", o, store.Created},
		{"same", o, store.Unchanged},
		{"changed", offer(t, "r1", "db", "small", "large"), store.Updated},
	}
	for _, s := range steps {
		res, err := st.UpsertSpec(ctx, s.o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != s.want {
			t.Fatalf("%s: outcome %s, want %s", s.name, res.Outcome, s.want)
		}
	}
	// Another registry offering the same id does not take it over.
	other := offer(t, "r1", "db", "small")
	other.Registry = "r2"
	res, err := st.UpsertSpec(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != store.Conflict || res.Owner != "r1" {
		t.Fatalf("conflict: %+v", res)
	}
	rec, err := st.GetSpec(ctx, o.Spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Registry != "r1" || len(mustSpec(t, rec).Plans) != 2 {
		t.Fatalf("record after conflict: %+v", rec)
	}
}

func mustSpec(t *testing.T, rec *store.SpecRecord) *spec.Spec {
	t.Helper()
	s, err := rec.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMarkAndUnmark(t *testing.T) {
	ctx := context.Background()
	st := store.New(emulatortest.Firestore(t))
	o := offer(t, "r1", "db", "small")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.MarkSpec(ctx, "r2", o.Spec.ID, "run", 2); err != nil || ok {
		t.Fatalf("a registry marked a spec it does not own: %v %v", ok, err)
	}
	if ok, err := st.MarkSpec(ctx, "r1", o.Spec.ID, "run", 2); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	if ok, _ := st.MarkSpec(ctx, "r1", o.Spec.ID, "run", 2); ok {
		t.Fatal("marking twice reported a second mark")
	}
	// Marked in this run: not deletable by the same run.
	if out, _, err := st.DeleteMarked(ctx, "r1", o.Spec.ID, "run"); err != nil || out != store.Skipped {
		t.Fatalf("same-run delete: %s %v", out, err)
	}
	res, err := st.UpsertSpec(ctx, o)
	if err != nil || res.Outcome != store.Unmarked {
		t.Fatalf("re-offer: %+v %v", res, err)
	}
	rec, _ := st.GetSpec(ctx, o.Spec.ID)
	if rec.State != store.StateActive || rec.MarkedRun != "" || !rec.MarkedAt.IsZero() {
		t.Fatalf("unmarked record keeps mark fields: %+v", rec)
	}
}

func TestInstances(t *testing.T) {
	ctx := context.Background()
	st := store.New(emulatortest.Firestore(t))
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
	st := store.New(emulatortest.Firestore(t))
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

func TestRevisionAndOps(t *testing.T) {
	ctx := context.Background()
	ops := &store.Ops{}
	st := store.New(emulatortest.Firestore(t)).WithOps(ops)
	if rev, err := st.Revision(ctx); err != nil || rev != 0 {
		t.Fatalf("initial revision %d %v", rev, err)
	}
	for want := int64(1); want <= 3; want++ {
		rev, err := st.BumpRevision(ctx)
		if err != nil || rev != want {
			t.Fatalf("bump: %d %v, want %d", rev, err, want)
		}
	}
	got := ops.Snapshot()
	if got.Reads != 4 || got.Writes != 3 {
		t.Fatalf("ops %+v, want 4 reads (1 + one per bump) and 3 writes", got)
	}
}

func TestRegistryStatusRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := store.New(emulatortest.Firestore(t))
	empty, err := st.RegistryStatus(ctx, "never-run")
	if err != nil || empty.Name != "never-run" || empty.ListingDigest != "" {
		t.Fatalf("unknown registry status %+v %v", empty, err)
	}
	run := store.Run{ID: "r", Result: "fetch_failed", Error: "boom"}
	if err := st.RecordRun(ctx, "a", run, false, "", "", 0); err != nil {
		t.Fatal(err)
	}
	run2 := store.Run{ID: "r2", Result: "succeeded", Counts: store.RunCounts{Created: 2}}
	if err := st.RecordRun(ctx, "a", run2, true, "sha256:x", "etag", 1); err != nil {
		t.Fatal(err)
	}
	if err := st.SetContested(ctx, "a", "b", []string{"id1"}); err != nil {
		t.Fatal(err)
	}
	got, err := st.RegistryStatus(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.LastRun.Error != "" || got.LastRun.Counts.Created != 2 || got.ListingDigest != "sha256:x" || got.Marked != 1 {
		t.Fatalf("status %+v: the second run must replace the first whole", got)
	}
	if len(got.ContestedBy["b"]) != 1 {
		t.Fatalf("contested_by %+v", got.ContestedBy)
	}
	// A later run of a keeps what b wrote; b withdrawing removes it.
	if err := st.RecordRun(ctx, "a", run2, true, "sha256:x", "etag", 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.RegistryStatus(ctx, "a"); len(got.ContestedBy["b"]) != 1 {
		t.Fatal("a's own run erased another registry's note")
	}
	if err := st.SetContested(ctx, "a", "b", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.RegistryStatus(ctx, "a"); len(got.ContestedBy) != 0 {
		t.Fatalf("withdrawn note remains: %+v", got.ContestedBy)
	}
	all, err := st.RegistryStatuses(ctx)
	if err != nil || len(all) != 1 || all[0].Name != "a" {
		t.Fatalf("statuses %+v %v", all, err)
	}
}
