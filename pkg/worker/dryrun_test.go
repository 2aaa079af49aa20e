package worker_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"testing/fstest"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/worker"
)

func specFile(name string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(fmt.Sprintf("name: %s\ndescription: d\nplans:\n  - name: p\n    description: p\n", name))}
}

// snapshot is every document outside operations/ (and the meta pointer to
// the current operation), as data.
func snapshot(t *testing.T, c *firestore.Client) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, coll := range []string{store.SpecsCollection, store.InstancesCollection, store.RegistriesCollection, store.MetaCollection} {
		docs, err := c.Collection(coll).Documents(context.Background()).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if coll == store.MetaCollection && d.Ref.ID == "bootstrap" {
				continue
			}
			out[d.Ref.Path] = d.Data()
		}
	}
	return out
}

// A dry run reports what a real run would do and writes nothing but the
// operation record.
func TestDryRunWritesOnlyTheOperation(t *testing.T) {
	ctx := context.Background()
	client := checked(t)
	st := store.New(client)
	fsys := fstest.MapFS{"a.yaml": specFile("a"), "b.yaml": specFile("b"), "c.yaml": specFile("c")}
	src, err := registry.NewDir(registry.DirConfig{FS: fsys, Root: "test"})
	if err != nil {
		t.Fatal(err)
	}
	reg := reconcile.Registry{Name: "local", Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}}
	runner := &reconcile.Runner{Store: st, Logger: quiet, LeaseTTL: time.Minute}
	if _, err := runner.Reconcile(ctx, reg); err != nil {
		t.Fatal(err)
	}
	delete(fsys, "c.yaml")
	fsys["d.yaml"] = specFile("d")
	fsys["a.yaml"] = &fstest.MapFile{Data: []byte("name: a\ndescription: changed\nplans:\n  - name: p\n    description: p\n")}

	before := snapshot(t, client)
	ops := bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour)
	commits := &queuedCommits{}
	w := &worker.Worker{Operations: ops, Runner: runner, Logger: quiet, Commits: commits,
		Committer: &reconcile.Committer{Store: st, Logger: quiet},
		Lookup:    func(n string) (reconcile.Registry, bool) { return reg, n == "local" }}
	op, _, err := ops.Start(ctx, []string{"local"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(ctx, queue.Message{Operation: op.ID, Registry: "local"}); err != nil {
		t.Fatal(err)
	}
	// Its report rides the commit topic, as every report does; it is
	// the only message, and recording it finishes the operation without
	// a commit.
	reqs := deliverCommits(t, w)
	if len(reqs) != 1 || reqs[0].Report == nil || reqs[0].Operation != op.ID {
		t.Fatalf("a dry run sent %+v, want its report only", reqs)
	}
	got, err := ops.Get(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := got.Results["local"]
	if got.State != api.Succeeded || !got.DryRun || r.Result != api.ResultDryRun || got.Commit != nil || got.CatalogRevision != nil {
		t.Fatalf("dry run operation %+v", got)
	}
	want := api.RunCounts{Created: 1, Updated: 1, Unchanged: 1, Marked: 1}
	if r.Counts != want {
		t.Fatalf("dry run counts %+v, want %+v", r.Counts, want)
	}
	if r.Firestore.Writes != 0 || r.Firestore.Deletes != 0 {
		t.Fatalf("dry run wrote: %+v", r.Firestore)
	}
	after := snapshot(t, client)
	if !reflect.DeepEqual(before, after) {
		var changed []string
		for k := range after {
			if !reflect.DeepEqual(before[k], after[k]) {
				changed = append(changed, k)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				changed = append(changed, k)
			}
		}
		sort.Strings(changed)
		t.Fatalf("a dry run changed documents: %v", changed)
	}
	// The real run afterwards does what the dry run said.
	run, err := runner.Reconcile(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	if run.Counts.Created != 1 || run.Counts.Updated != 1 || run.Counts.Marked != 1 {
		t.Fatalf("real run %+v differs from the dry run's forecast", run.Counts)
	}
	// And the commit after the real runs, as their requests would ask.
	if _, err := w.Committer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
