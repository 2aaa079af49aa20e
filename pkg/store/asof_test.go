package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

// TestChangesCarryTheirWriteAndCreation: what a catalog cache needs to
// apply a change instead of re-reading the specs. Every change that puts
// a spec in the catalog carries the spec's created_at (the render order),
// and every change read back knows when it was written: the commit time of
// the spec write it describes, the same instant as the spec's own update
// time, whatever the commit did to the change later.
func TestChangesCarryTheirWriteAndCreation(t *testing.T) {
	ctx := context.Background()
	client := checked(t)
	st := store.New(client)
	// updateTime is the spec document's update time.
	updateTime := func(id string) time.Time {
		t.Helper()
		snap, err := client.Collection(store.SpecsCollection).Doc(id).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return snap.UpdateTime
	}
	type write struct {
		kind      api.ChangeKind
		updatedAt time.Time // the spec document's update time after the write
	}
	var writes []write
	wrote := func(kind api.ChangeKind, id string) {
		t.Helper()
		writes = append(writes, write{kind, updateTime(id)})
	}

	o := offer(t, "r1", "db", "small")
	batches, err := store.CreateBatches([]store.Offer{o, offer(t, "r1", "mq", "small")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateSpecs(ctx, batches[0]); err != nil {
		t.Fatal(err)
	}
	wrote(api.ChangeCreated, o.Spec.ID)
	mq := offer(t, "r1", "mq", "small").Spec.ID
	wrote(api.ChangeCreated, mq)
	if res, err := st.UpsertSpec(ctx, offer(t, "r1", "db", "small", "large")); err != nil || res.Outcome != store.Updated {
		t.Fatalf("update: %+v %v", res, err)
	}
	wrote(api.ChangeUpdated, o.Spec.ID)
	if ok, err := st.MarkSpec(ctx, "r1", o.Spec.ID, "run-1"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	wrote(api.ChangeMarked, o.Spec.ID)
	h := store.HeldBackSpec{SpecID: o.Spec.ID, Name: "db", Digest: "sha256:next", Blockers: []string{"plan x is used by 1 instances"}}
	if got, err := st.HoldBack(ctx, "r1", h, "run-2"); err != nil || got != store.HeldUnmarked {
		t.Fatalf("hold back while marked: %s %v", got, err)
	}
	wrote(api.ChangeUnmarked, o.Spec.ID)
	if got, err := st.HoldBack(ctx, "r1", store.HeldBackSpec{SpecID: mq, Name: "mq", Digest: "sha256:other"}, "run-2"); err != nil || got != store.HeldNew {
		t.Fatalf("hold back: %s %v", got, err)
	}
	wrote(api.ChangeHeldBack, mq)
	if ok, err := st.MarkSpec(ctx, "r1", mq, "run-2"); err != nil || !ok {
		t.Fatalf("mark mq: %v %v", ok, err)
	}
	wrote(api.ChangeMarked, mq)
	if res, err := st.UpsertSpec(ctx, offer(t, "r1", "mq", "small")); err != nil || res.Outcome != store.Unmarked {
		t.Fatalf("unmark mq: %+v %v", res, err)
	}
	wrote(api.ChangeUnmarked, mq)
	createdAt := func(id string) time.Time {
		t.Helper()
		rec, err := st.GetSpec(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return rec.CreatedAt
	}
	dbCreated, mqCreated := createdAt(o.Spec.ID), createdAt(mq)
	// The delete leaves no spec document: its change must still be
	// later than every write before it.
	if ok, err := st.MarkSpec(ctx, "r1", mq, "run-3"); err != nil || !ok {
		t.Fatalf("mark mq again: %v %v", ok, err)
	}
	wrote(api.ChangeMarked, mq)
	if out, _, err := st.DeleteMarked(ctx, "r1", mq, "run-4", time.Now().Add(time.Hour)); err != nil || out != store.Deleted {
		t.Fatalf("delete: %s %v", out, err)
	}
	writes = append(writes, write{kind: api.ChangeDeleted})

	if _, err := st.CommitPending(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	cs, err := st.ChangesAfter(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []api.ChangeKind
	for _, c := range cs {
		kinds = append(kinds, c.Kind)
	}
	var wantKinds []api.ChangeKind
	for _, w := range writes {
		wantKinds = append(wantKinds, w.kind)
	}
	if !slices.Equal(kinds, wantKinds) {
		t.Fatalf("changes %v, want %v", kinds, wantKinds)
	}
	for i, c := range cs {
		w := writes[i]
		if !w.updatedAt.IsZero() && !c.WrittenAt.Equal(w.updatedAt) {
			t.Errorf("change %d (%s %s): written at %v, its spec write committed at %v", c.Revision, c.Kind, c.Name, c.WrittenAt, w.updatedAt)
		}
		// The two creates of one batch share a commit; every other write
		// is its own.
		if i > 1 && !c.WrittenAt.After(cs[i-1].WrittenAt) {
			t.Errorf("change %d (%s) written at %v, not after change %d (%v)", c.Revision, c.Kind, c.WrittenAt, cs[i-1].Revision, cs[i-1].WrittenAt)
		}
		created := map[string]time.Time{o.Spec.ID: dbCreated, mq: mqCreated}[c.SpecID]
		if c.InCatalog() && !c.SpecCreatedAt.Equal(created) {
			t.Errorf("change %d (%s %s): spec created at %v, the spec says %v", c.Revision, c.Kind, c.Name, c.SpecCreatedAt, created)
		}
		if c.InCatalog() {
			if _, err := c.Spec(); err != nil {
				t.Errorf("change %d: %v", c.Revision, err)
			}
		}
	}
	if !cs[0].WrittenAt.Equal(cs[1].WrittenAt) {
		t.Errorf("the creates of one batch written at %v and %v, want their one commit", cs[0].WrittenAt, cs[1].WrittenAt)
	}
}

func mustActive(t *testing.T, st *store.Store) []store.SpecRecord {
	t.Helper()
	recs, err := st.ActiveSpecs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestActiveSpecsAtRevisionRead: the specs read as of RevisionAt's read
// time are the specs of that instant: a write after it is not in them,
// and the change of that write says it was written after that instant.
func TestActiveSpecsAtRevisionRead(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	rev, empty, err := st.RevisionAt(ctx)
	if err != nil || rev != 0 || empty.IsZero() {
		t.Fatalf("revision of an empty store: %d at %v, %v; want 0 at a read time", rev, empty, err)
	}
	a := offer(t, "r1", "a", "small")
	if _, err := st.UpsertSpec(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CommitPending(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	rev, at, err := st.RevisionAt(ctx)
	if err != nil || rev != 1 || !at.After(empty) {
		t.Fatalf("revision %d at %v (%v), want 1 after %v", rev, at, err, empty)
	}
	b := offer(t, "r1", "b", "small")
	if _, err := st.UpsertSpec(ctx, b); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.MarkSpec(ctx, "r1", a.Spec.ID, "run"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	then, err := st.ActiveSpecsAt(ctx, at)
	if err != nil || len(then) != 1 || then[0].ID != a.Spec.ID {
		t.Fatalf("specs as of the revision read: %v %v, want only a", then, err)
	}
	if none, err := st.ActiveSpecsAt(ctx, empty); err != nil || len(none) != 0 {
		t.Fatalf("specs as of the empty store: %d %v", len(none), err)
	}
	if now := mustActive(t, st); len(now) != 1 || now[0].ID != b.Spec.ID {
		t.Fatalf("specs now: %v, want only b", now)
	}
	if _, err := st.CommitPending(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	cs, err := st.ChangesAfter(ctx, rev, 10)
	if err != nil || len(cs) != 2 {
		t.Fatalf("changes after %d: %d %v", rev, len(cs), err)
	}
	first, err := st.ChangesAfter(ctx, 0, 1)
	if err != nil || len(first) != 1 {
		t.Fatal(err)
	}
	if first[0].WrittenAt.After(at) {
		t.Errorf("the change in the snapshot was written at %v, after its read time %v", first[0].WrittenAt, at)
	}
	for _, c := range cs {
		if !c.WrittenAt.After(at) {
			t.Errorf("change %d (%s) is not in the snapshot but written at %v, not after %v", c.Revision, c.Kind, c.WrittenAt, at)
		}
	}
}
