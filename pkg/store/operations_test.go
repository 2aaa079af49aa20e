package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/store"
)

// costs returns what ops counted since the last call.
func costs(ops *store.Ops, last *api.Counts) api.Counts {
	now := ops.Snapshot()
	d := api.Counts{Reads: now.Reads - last.Reads, Writes: now.Writes - last.Writes, Deletes: now.Deletes - last.Deletes}
	*last = now
	return d
}

func newOperation(id string, at time.Time, registries ...string) *api.Operation {
	return &api.Operation{ID: id, State: api.InProgress, Registries: registries, Results: map[string]api.RegistryResult{},
		CreatedAt: at, UpdatedAt: at, Deadline: at.Add(time.Minute), ExpiresAt: at.Add(time.Hour)}
}

// The store's operation primitives write what the caller decided from
// what they read, at the Firestore cost docs/deploy.md's cost model
// counts: a start transaction is 2 reads (1 before any operation) and 2
// writes, a report 1 read and 1 write, and coalescing without a
// transaction 2 plain reads.
func TestOperationPrimitivesAndTheirCost(t *testing.T) {
	ctx := context.Background()
	ops := &store.Ops{}
	st := store.New(checked(t)).WithOps(ops)
	var last api.Counts
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

	if cur, err := st.CurrentOperation(ctx); err != nil || cur != nil {
		t.Fatalf("before any bootstrap: %+v %v", cur, err)
	}
	if c := costs(ops, &last); c != (api.Counts{Reads: 1}) {
		t.Errorf("CurrentOperation with no meta/bootstrap cost %+v, want 1 read", c)
	}

	first := newOperation("op-1", at, "a", "b")
	var seen []*api.Operation
	res, err := st.StartOperation(ctx, func(cur *api.Operation) store.OperationStart {
		seen = append(seen, cur)
		return store.OperationStart{Create: first}
	})
	if err != nil || res.Create != first || len(seen) != 1 || seen[0] != nil {
		t.Fatalf("first start: %+v %v (decided on %v)", res, err, seen)
	}
	if c := costs(ops, &last); c != (api.Counts{Reads: 1, Writes: 2}) {
		t.Errorf("the first start transaction cost %+v, want 1 read, 2 writes", c)
	}

	cur, err := st.CurrentOperation(ctx)
	if err != nil || cur == nil || cur.ID != "op-1" || cur.State != api.InProgress || len(cur.Registries) != 2 || !cur.Deadline.Equal(first.Deadline) {
		t.Fatalf("meta/bootstrap names %+v %v", cur, err)
	}
	if c := costs(ops, &last); c != (api.Counts{Reads: 2}) {
		t.Errorf("coalescing reads cost %+v, want 2 reads", c)
	}

	// A start that joins writes nothing.
	res, err = st.StartOperation(ctx, func(cur *api.Operation) store.OperationStart { return store.OperationStart{Join: cur} })
	if err != nil || res.Join == nil || res.Join.ID != "op-1" || res.Create != nil {
		t.Fatalf("join: %+v %v", res, err)
	}
	if c := costs(ops, &last); c != (api.Counts{Reads: 2}) {
		t.Errorf("a joining start transaction cost %+v, want 2 reads", c)
	}

	// A report: read, decide, write back.
	got, err := st.UpdateOperation(ctx, "op-1", func(op *api.Operation) (bool, error) {
		op.Results["a"] = api.RegistryResult{State: api.Succeeded, Result: api.ResultSucceeded, Counts: api.RunCounts{Created: 3}}
		op.Description = "1 of 2 registries reported"
		return true, nil
	})
	if err != nil || got.Results["a"].Counts.Created != 3 {
		t.Fatalf("update: %+v %v", got, err)
	}
	if c := costs(ops, &last); c != (api.Counts{Reads: 1, Writes: 1}) {
		t.Errorf("a report cost %+v, want 1 read, 1 write", c)
	}
	if _, err := st.UpdateOperation(ctx, "op-1", func(op *api.Operation) (bool, error) { return false, nil }); err != nil {
		t.Fatal(err)
	}
	if c := costs(ops, &last); c != (api.Counts{Reads: 1}) {
		t.Errorf("a decision that changes nothing cost %+v, want 1 read", c)
	}
	refused := failure.New(failure.Invalid, "no such registry")
	if _, err := st.UpdateOperation(ctx, "op-1", func(op *api.Operation) (bool, error) {
		op.Description = "must not be written"
		return true, refused
	}); err != refused {
		t.Fatalf("the decision's error came back as %v", err)
	}
	if _, err := st.UpdateOperation(ctx, "no-such-op", func(op *api.Operation) (bool, error) { return true, nil }); !failure.Is(err, failure.NotFound) {
		t.Fatalf("update of a missing operation: %v", err)
	}
	read, err := st.GetOperation(ctx, "op-1")
	if err != nil || read.Description != "1 of 2 registries reported" || read.Results["a"].Result != api.ResultSucceeded {
		t.Fatalf("read back %+v %v", read, err)
	}
	costs(ops, &last)

	// A new start past op-1's deadline supersedes it: one more write.
	old := *read
	old.State, old.Description = api.Failed, "superseded"
	second := newOperation("op-2", at.Add(2*time.Minute), "a")
	if _, err := st.StartOperation(ctx, func(cur *api.Operation) store.OperationStart {
		if cur == nil || cur.ID != "op-1" {
			t.Errorf("decided on %+v, want op-1", cur)
		}
		return store.OperationStart{Supersede: &old, Create: second}
	}); err != nil {
		t.Fatal(err)
	}
	if c := costs(ops, &last); c != (api.Counts{Reads: 2, Writes: 3}) {
		t.Errorf("a superseding start transaction cost %+v, want 2 reads, 3 writes", c)
	}
	if o, err := st.GetOperation(ctx, "op-1"); err != nil || o.State != api.Failed || o.Results["a"].Counts.Created != 3 {
		t.Fatalf("superseded: %+v %v", o, err)
	}
	if cur, err := st.CurrentOperation(ctx); err != nil || cur.ID != "op-2" {
		t.Fatalf("meta/bootstrap names %+v %v, want op-2", cur, err)
	}
	costs(ops, &last)

	if err := st.FailOperation(ctx, "op-2", "publishing failed", at, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if c := costs(ops, &last); c != (api.Counts{Writes: 1}) {
		t.Errorf("failing an operation cost %+v, want 1 write", c)
	}
	if o, err := st.GetOperation(ctx, "op-2"); err != nil || o.State != api.Failed || o.Description != "publishing failed" || !o.ExpiresAt.Equal(at.Add(time.Hour)) {
		t.Fatalf("failed: %+v %v", o, err)
	}
	if _, err := st.GetOperation(ctx, "no-such-op"); !failure.Is(err, failure.NotFound) {
		t.Fatalf("get of a missing operation: %v", err)
	}
	if err := st.FailOperation(ctx, "no-such-op", "x", at, at); !failure.Is(err, failure.NotFound) {
		t.Fatalf("fail of a missing operation: %v", err)
	}
}
