package bootstrap_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/store"
)

// What Start and Report write reads back through store.RecentOperations,
// newest first, with the Firestore cost summed, and an operation past its
// retention left out.
func TestRecentOperationsReadsWhatBootstrapWrites(t *testing.T) {
	ctx := context.Background()
	client, _, end := checkedProject(t)
	end.Skip("the operation is told the committer reached revision 2 with no catalog behind it: what the operator reads is under test")
	ops := bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour)
	now := time.Now().UTC()

	at := now.Add(-3 * time.Hour) // finished and expired by now
	ops.Now = func() time.Time { return at }
	old, _, err := ops.Start(ctx, []string{"a"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Report(ctx, old.ID, "a", api.RegistryResult{State: api.Succeeded, Result: api.ResultSucceeded}); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Committed(ctx, old.ID, 0); err != nil {
		t.Fatal(err)
	}

	at = now.Add(-2 * time.Minute)
	done, _, err := ops.Start(ctx, []string{"a", "b"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for name, res := range map[string]api.RegistryResult{
		"a": {State: api.Succeeded, Result: api.ResultSucceeded, Counts: api.RunCounts{Created: 2}, Firestore: api.Counts{Reads: 7, Writes: 6}},
		"b": {State: api.Failed, Result: api.ResultFetchFailed, Error: "status 502", Firestore: api.Counts{Reads: 1, Deletes: 1}},
	} {
		if _, err := ops.Report(ctx, done.ID, name, res); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ops.Committed(ctx, done.ID, 2); err != nil {
		t.Fatal(err)
	}
	at = now.Add(-time.Minute)
	running, _, err := ops.Start(ctx, []string{"a", "b"}, true)
	if err != nil {
		t.Fatal(err)
	}

	got, err := store.New(client).RecentOperations(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != running.ID || got[1].ID != done.ID {
		ids := []string{}
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		t.Fatalf("recent operations %v, want [%s %s] (the expired %s left out)", ids, running.ID, done.ID, old.ID)
	}
	if r := got[0]; r.State != api.InProgress || !r.DryRun || len(r.Results) != 0 || !reflect.DeepEqual(r.Registries, []string{"a", "b"}) {
		t.Errorf("in-progress dry run read back as %+v", r)
	}
	d := got[1]
	if d.State != api.Failed || d.Results["b"].Result != api.ResultFetchFailed || d.Results["b"].Error != "status 502" || d.Results["a"].Counts.Created != 2 ||
		d.CatalogRevision == nil || *d.CatalogRevision != 2 || d.Commit == nil || d.Commit.CommittedAt.IsZero() {
		t.Errorf("finished operation read back as %+v", d)
	}
	if c := d.Firestore(); c != (store.Counts{Reads: 8, Writes: 6, Deletes: 1}) {
		t.Errorf("summed Firestore cost %+v", c)
	}
	if one, err := store.New(client).RecentOperations(ctx, 1); err != nil || len(one) != 1 || one[0].ID != running.ID {
		t.Errorf("limit 1: %+v %v", one, err)
	}
}
