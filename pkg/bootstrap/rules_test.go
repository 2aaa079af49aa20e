package bootstrap

// The operation's rules without a database: each decision the store runs
// inside its transactions, given an operation as stored.

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
)

var (
	t0    = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	limit = rules{deadline: 10 * time.Minute, retention: time.Hour}
)

func inProgress(dryRun bool, registries ...string) *api.Operation {
	return &api.Operation{ID: "op", State: api.InProgress, DryRun: dryRun, Registries: registries,
		Results: map[string]api.RegistryResult{}, CreatedAt: t0, UpdatedAt: t0, Deadline: t0.Add(limit.deadline), ExpiresAt: t0.Add(limit.deadline + limit.retention)}
}

func TestStartJoinsOnlyAnOperationOfItsKindBeforeItsDeadline(t *testing.T) {
	running := inProgress(false, "a")
	finished := inProgress(false, "a")
	finished.State = api.Succeeded
	for _, c := range []struct {
		name    string
		current *api.Operation
		now     time.Time
		dryRun  bool
		join    bool
	}{
		{"none", nil, t0, false, false},
		{"in progress", running, t0.Add(time.Minute), false, true},
		{"in progress, a dry run asks", running, t0.Add(time.Minute), true, false},
		{"at its deadline", running, t0.Add(limit.deadline), false, false},
		{"finished", finished, t0.Add(time.Minute), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := limit.start(c.current, c.now, "new", []string{"b", "a"}, c.dryRun)
			if joined := got.Join != nil; joined != c.join || joined != joins(c.current, c.now, c.dryRun) {
				t.Fatalf("join %v (joins %v), want %v", joined, joins(c.current, c.now, c.dryRun), c.join)
			}
			if c.join {
				if got.Join != c.current || got.Create != nil || got.Supersede != nil {
					t.Fatalf("a join writes nothing: %+v", got)
				}
				return
			}
			op := got.Create
			if op == nil || op.ID != "new" || op.State != api.InProgress || op.DryRun != c.dryRun || !reflect.DeepEqual(op.Registries, []string{"a", "b"}) ||
				op.Description != "reconciling 2 registries" || op.Results == nil || len(op.Results) != 0 {
				t.Fatalf("new operation %+v", op)
			}
			if !op.CreatedAt.Equal(c.now) || !op.Deadline.Equal(c.now.Add(limit.deadline)) || !op.ExpiresAt.Equal(c.now.Add(limit.deadline+limit.retention)) {
				t.Fatalf("new operation's times %+v", op)
			}
		})
	}
}

func TestStartSupersedesAnOperationPastItsDeadline(t *testing.T) {
	stuck := inProgress(false, "a")
	now := t0.Add(limit.deadline)
	got := limit.start(stuck, now, "new", []string{"a"}, false)
	old := got.Supersede
	if old == nil || old.ID != stuck.ID || old.State != api.Failed || !strings.Contains(old.Description, "superseded") ||
		!old.UpdatedAt.Equal(now) || !old.ExpiresAt.Equal(now.Add(limit.retention)) || got.Create == nil {
		t.Fatalf("superseded %+v, start %+v", old, got)
	}
	if stuck.State != api.InProgress {
		t.Fatal("the decision changed the operation it was given, which a retried transaction reads again")
	}
	// One still before its deadline, of the other kind, is left alone.
	if got := limit.start(inProgress(true, "a"), t0.Add(time.Minute), "new", []string{"a"}, false); got.Supersede != nil || got.Create == nil {
		t.Fatalf("a dry run in progress was superseded: %+v", got)
	}
}

func TestFirstReportCountsAndTheLastWaitsForTheCommit(t *testing.T) {
	op := inProgress(false, "a", "b")
	at := t0.Add(time.Minute)
	ok := api.RegistryResult{State: api.Succeeded, Result: api.ResultSucceeded, Counts: api.RunCounts{Created: 2, Changes: 2}}
	if changed, err := limit.report(op, "a", ok, at); err != nil || !changed || op.Description != "1 of 2 registries reported" || !op.Results["a"].ReportedAt.Equal(at) || op.Commit != nil {
		t.Fatalf("first report: %v %v %+v", changed, err, op)
	}
	late := api.RegistryResult{State: api.Failed, Result: api.ResultError}
	if changed, err := limit.report(op, "a", late, at.Add(time.Second)); err != nil || changed || op.Results["a"].State != api.Succeeded {
		t.Fatalf("a redelivered report changed the result: %v %v %+v", changed, err, op.Results["a"])
	}
	if _, err := limit.report(op, "zzz", ok, at); !failure.Is(err, failure.Invalid) {
		t.Fatalf("a registry the operation does not include: %v", err)
	}
	failed := api.RegistryResult{State: api.Failed, Result: api.ResultFetchFailed, Counts: api.RunCounts{Changes: 1}}
	if changed, err := limit.report(op, "b", failed, at); err != nil || !changed {
		t.Fatal(changed, err)
	}
	c := op.Commit
	if op.State != api.InProgress || !op.AwaitsCommit() || c.Changes != 3 || c.State != api.Failed || c.Description != "1 of 2 registries failed: b" ||
		op.Description != "all 2 registries reported; committing 3 changes" || !op.ExpiresAt.Equal(t0.Add(limit.deadline+limit.retention)) {
		t.Fatalf("last report: %+v commit %+v", op, c)
	}

	// The committer finishes it at the revision its changes reached.
	done := t0.Add(2 * time.Minute)
	if !limit.committed(op, 7, done) {
		t.Fatal("an operation awaiting its commit was not finished")
	}
	if op.State != api.Failed || *op.CatalogRevision != 7 || !op.Commit.CommittedAt.Equal(done) || !op.ExpiresAt.Equal(done.Add(limit.retention)) ||
		op.Description != "1 of 2 registries failed: b; 3 changes committed, catalog at revision 7" {
		t.Fatalf("committed: %+v", op)
	}
	if limit.committed(op, 9, done.Add(time.Second)) || *op.CatalogRevision != 7 {
		t.Fatal("a redelivered commit request finished the operation again")
	}
	if _, err := limit.report(op, "b", ok, done); err != nil {
		t.Fatal(err)
	} else if op.Results["b"].State != api.Failed {
		t.Fatal("a report after the end changed a result")
	}
}

func TestTheLastReportOfADryRunFinishesIt(t *testing.T) {
	op := inProgress(true, "a")
	at := t0.Add(time.Minute)
	if changed, err := limit.report(op, "a", api.RegistryResult{State: api.Succeeded, Result: api.ResultDryRun}, at); err != nil || !changed {
		t.Fatal(changed, err)
	}
	if op.State != api.Succeeded || op.Description != "the registry reconciled" || op.Commit != nil || !op.ExpiresAt.Equal(at.Add(limit.retention)) {
		t.Fatalf("dry run: %+v", op)
	}
	if limit.committed(op, 1, at) || op.CatalogRevision != nil {
		t.Fatal("a dry run took a catalog revision")
	}
}

func TestCommittedLeavesAnOperationStillWaitingForRegistries(t *testing.T) {
	op := inProgress(false, "a", "b")
	if _, err := limit.report(op, "a", api.RegistryResult{State: api.Succeeded}, t0); err != nil {
		t.Fatal(err)
	}
	if limit.committed(op, 3, t0) || op.State != api.InProgress || op.CatalogRevision != nil {
		t.Fatalf("an operation still waiting for b was finished: %+v", op)
	}
}

func TestOverdueNamesWhatDidNotHappen(t *testing.T) {
	op := inProgress(false, "a", "b", "c")
	if _, late := overdue(op, op.Deadline); late {
		t.Fatal("overdue at its deadline, not after it")
	}
	if _, err := limit.report(op, "b", api.RegistryResult{State: api.Succeeded}, t0); err != nil {
		t.Fatal(err)
	}
	if desc, late := overdue(op, op.Deadline.Add(time.Second)); !late || desc != "registries a, c did not report within 10m0s" {
		t.Fatalf("%v %q", late, desc)
	}
	for _, r := range []string{"a", "c"} {
		if _, err := limit.report(op, r, api.RegistryResult{State: api.Succeeded, Counts: api.RunCounts{Changes: 1}}, t0); err != nil {
			t.Fatal(err)
		}
	}
	desc, late := overdue(op, op.Deadline.Add(time.Second))
	if !late || !strings.HasPrefix(desc, "all 3 registries reconciled, but the 2 changes their runs wrote were not committed within 10m0s") {
		t.Fatalf("%v %q", late, desc)
	}
	op.State = api.Failed
	if _, late := overdue(op, op.Deadline.Add(time.Hour)); late {
		t.Fatal("a finished operation is never overdue")
	}
}
