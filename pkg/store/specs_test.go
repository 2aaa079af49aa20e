package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
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
	return store.Offer{Registry: registry, Entry: name, Ref: "ref", Spec: s, Digest: spec.Digest(s), Run: "run"}
}

func TestUpsertOutcomes(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
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
	st := store.New(checked(t))
	o := offer(t, "r1", "db", "small")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.MarkSpec(ctx, "r2", o.Spec.ID, "run"); err != nil || ok {
		t.Fatalf("a registry marked a spec it does not own: %v %v", ok, err)
	}
	if ok, err := st.MarkSpec(ctx, "r1", o.Spec.ID, "run"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	if ok, _ := st.MarkSpec(ctx, "r1", o.Spec.ID, "run"); ok {
		t.Fatal("marking twice reported a second mark")
	}
	// Marked in this run: not deletable by the same run.
	if out, _, err := st.DeleteMarked(ctx, "r1", o.Spec.ID, "run", time.Now()); err != nil || out != store.Skipped {
		t.Fatalf("same-run delete: %s %v", out, err)
	}
	// Marked after the registry's last successful run finished: by a run
	// that did not finish, which is no earlier run.
	rec, _ := st.GetSpec(ctx, o.Spec.ID)
	if out, _, err := st.DeleteMarked(ctx, "r1", o.Spec.ID, "next-run", rec.MarkedAt.Add(-time.Second)); err != nil || out != store.Skipped {
		t.Fatalf("delete of a spec marked by an unfinished run: %s %v", out, err)
	}
	res, err := st.UpsertSpec(ctx, o)
	if err != nil || res.Outcome != store.Unmarked {
		t.Fatalf("re-offer: %+v %v", res, err)
	}
	rec, _ = st.GetSpec(ctx, o.Spec.ID)
	if rec.State != api.SpecActive || rec.MarkedRun != "" || !rec.MarkedAt.IsZero() {
		t.Fatalf("unmarked record keeps mark fields: %+v", rec)
	}
}

// A held-back version is a change once; a marked spec that is held back
// is offered again, so it is unmarked; adopting clears the hold.
func TestHoldBack(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	o := offer(t, "r1", "db", "small")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	h := store.HeldBackSpec{SpecID: o.Spec.ID, Name: "db", Digest: "sha256:next", Blockers: []string{"plan x is used by 1 instances"}}
	for i, want := range []store.HoldOutcome{store.HeldNew, store.HeldSame} {
		if got, err := st.HoldBack(ctx, "r1", h, "run"); err != nil || got != want {
			t.Fatalf("hold %d: %s %v, want %s", i, got, err, want)
		}
	}
	if got, _ := st.HoldBack(ctx, "other", h, "run"); got != store.HeldSkipped {
		t.Fatalf("another registry held back a spec it does not own: %s", got)
	}
	if ok, err := st.MarkSpec(ctx, "r1", o.Spec.ID, "run"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	if got, _ := st.HoldBack(ctx, "r1", h, "run"); got != store.HeldUnmarked {
		t.Fatalf("held back while marked: %s", got)
	}
	rec, _ := st.GetSpec(ctx, o.Spec.ID)
	if rec.State != api.SpecActive || rec.HeldBack == nil || rec.HeldBack.Digest != h.Digest || rec.Generation != 1 {
		t.Fatalf("after hold while marked: %+v", rec)
	}
	cs := commit(t, st)
	var kinds []api.ChangeKind
	for _, c := range cs {
		kinds = append(kinds, c.Kind)
	}
	if want := []api.ChangeKind{api.ChangeCreated, api.ChangeHeldBack, api.ChangeMarked, api.ChangeUnmarked}; !slices.Equal(kinds, want) {
		t.Fatalf("changes %v, want %v", kinds, want)
	}
	if last := cs[len(cs)-1]; !last.InCatalog() || last.HeldBack == nil {
		t.Fatalf("the unmark by hold-back does not carry the served spec and the hold: %+v", last)
	}
	next := offer(t, "r1", "db", "small", "large")
	if res, err := st.UpsertSpec(ctx, next); err != nil || res.Outcome != store.Updated {
		t.Fatalf("adopt: %v %v", res, err)
	}
	rec, _ = st.GetSpec(ctx, o.Spec.ID)
	if rec.HeldBack != nil || rec.Generation != 2 {
		t.Fatalf("adopted version: held_back %+v generation %d", rec.HeldBack, rec.Generation)
	}
}
