package bootstrap_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/store"
)

func firestoreTags(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("firestore"), ",")
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// The operator's view of operations (store.OperationRecord, read by the
// catalog's admin endpoints and status page) must keep up with what this
// package writes: the same document fields, the same collection.
func TestOperatorViewHasEveryField(t *testing.T) {
	if bootstrap.OperationsCollection != store.OperationsCollection {
		t.Fatalf("collections differ: %q vs %q", bootstrap.OperationsCollection, store.OperationsCollection)
	}
	for _, pair := range [][2]reflect.Type{
		{reflect.TypeOf(bootstrap.Operation{}), reflect.TypeOf(store.OperationRecord{})},
		{reflect.TypeOf(bootstrap.RegistryResult{}), reflect.TypeOf(store.OperationResult{})},
	} {
		if a, b := firestoreTags(pair[0]), firestoreTags(pair[1]); !reflect.DeepEqual(a, b) {
			t.Errorf("%s fields %v, %s fields %v", pair[0], a, pair[1], b)
		}
	}
}

// What Start and Report write reads back through store.RecentOperations,
// newest first, with the Firestore cost summed, and an operation past its
// retention left out.
func TestRecentOperationsReadsWhatBootstrapWrites(t *testing.T) {
	ctx := context.Background()
	client := emulatortest.Firestore(t)
	ops := bootstrap.NewOperations(client, 10*time.Minute, time.Hour)
	now := time.Now().UTC()

	at := now.Add(-3 * time.Hour) // finished and expired by now
	ops.Now = func() time.Time { return at }
	old, _, err := ops.Start(ctx, []string{"a"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Report(ctx, old.ID, "a", bootstrap.RegistryResult{State: bootstrap.Succeeded, Result: "succeeded"}); err != nil {
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
	for name, res := range map[string]bootstrap.RegistryResult{
		"a": {State: bootstrap.Succeeded, Result: "succeeded", Counts: store.RunCounts{Created: 2}, Firestore: store.Counts{Reads: 7, Writes: 6}},
		"b": {State: bootstrap.Failed, Result: "fetch_failed", Error: "status 502", Firestore: store.Counts{Reads: 1, Deletes: 1}},
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
	if r := got[0]; r.State != bootstrap.InProgress || !r.DryRun || len(r.Results) != 0 || !reflect.DeepEqual(r.Registries, []string{"a", "b"}) {
		t.Errorf("in-progress dry run read back as %+v", r)
	}
	d := got[1]
	if d.State != bootstrap.Failed || d.Results["b"].Result != "fetch_failed" || d.Results["b"].Error != "status 502" || d.Results["a"].Counts.Created != 2 ||
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
