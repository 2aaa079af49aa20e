package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
)

// Per-entry digests: a registry of 300 specs where 3 changed, 2 went
// away, 1 broke and 1 is new reads the status, its manifest shard, the 6
// specs whose entry changed, and its status again to record the run: 9
// reads, exactly, not the registry's size. The writes are the changes'
// only (no spec is read twice: each write is conditional on the read).
// The store ends as a run over every spec leaves it (checker, manifest
// rule included), and the run after reads only what changed again.
func TestManifestReadsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var names []string
	for i := range 300 {
		names = append(names, fmt.Sprintf("svc-%03d", i))
	}
	fsys := specFiles(names...)
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	if run := e.run(reg); run.Counts.Created != 300 {
		t.Fatalf("first run: %+v", run.Counts)
	}
	if st := e.status("local"); !st.ManifestTrusted() || st.Manifest.Entries != 300 || st.Manifest.Shards != 1 {
		t.Fatalf("after the first run the manifest is %+v (writer %s)", st.Manifest, st.Writer)
	}
	for _, n := range names[:3] {
		fsys[n+".yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(specYAML(n), "the "+n+" service", "the new "+n+" service", 1))}
	}
	delete(fsys, names[3]+".yaml")
	delete(fsys, names[4]+".yaml")
	fsys[names[5]+".yaml"] = &fstest.MapFile{Data: []byte("name: [broken")}
	fsys["svc-new.yaml"] = &fstest.MapFile{Data: []byte(specYAML("svc-new"))}

	run := e.run(reg)
	c := run.Counts
	if c.Updated != 3 || c.Marked != 2 || c.EntryErrors != 1 || c.Created != 1 || c.Unchanged != 294 {
		t.Fatalf("counts %+v", c)
	}
	// Reads: status, the manifest's one shard, the 6 specs and one query
	// counting their instances (none: a query bills one read), the status
	// in the record's transaction. Writes: the run begins writing (1), 3
	// updates and 2 marks (spec and change each), 1 create (spec and
	// change), 1 entry error, the status and the manifest shard.
	if want := (store.Counts{Reads: 10, Writes: 1 + 3*2 + 2*2 + 2 + 1 + 2}); run.Ops != want {
		t.Fatalf("firestore %+v, want %+v", run.Ops, want)
	}
	invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})

	// The broken entry is read again (it is still broken and unclean),
	// the two marked ones too (they may go now: deleted, 1 read each plus
	// the instance query); nothing else.
	fsys["svc-new.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(specYAML("svc-new"), "the svc-new service", "svc-new, v2", 1))}
	run = e.run(reg)
	if run.Counts.Updated != 1 || run.Counts.Deleted != 2 || run.Counts.Unchanged != 297 {
		t.Fatalf("the run after: %+v", run.Counts)
	}
	if want := int64(1 + 1 + 4 + 1 + 2*2 + 1); run.Ops.Reads != want {
		t.Fatalf("the run after read %d, want %d (status, shard, 4 specs and their instance count, 2 deletes' spec and instance query, record)", run.Ops.Reads, want)
	}
	invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})
}

// A run that dies between its spec writes and its manifest leaves the
// manifest untrusted (it began writing), with and without a lease: so when
// the registry goes back to what the manifest describes, the next run
// reads every spec and puts the store back, instead of trusting a
// manifest that no longer describes it and skipping the spec as
// unchanged.
func TestManifestNotTrustedAfterACrash(t *testing.T) {
	t.Parallel()
	for _, lease := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprintf("lease=%s", lease), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			client, project := emulatortest.FirestoreProject(t)
			fsys := specFiles("alpha", "beta", "gamma")
			reg := dirRegistry(t, "local", fsys, defaultPolicy)
			healthy := &reconcile.Runner{Store: store.New(client), Logger: quiet, LeaseTTL: lease}
			if _, err := healthy.Reconcile(ctx, reg); err != nil {
				t.Fatal(err)
			}
			original := specsOf(t, client)["beta"]

			// beta changes; the run writes it and dies (its second commit:
			// the first says it begins writing).
			fsys["beta.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(specYAML("beta"), "the beta service", "the new beta service", 1))}
			cc := &crashConn{}
			cc.limit.Store(2)
			// (With a lease, a short one: it is left behind, and must have
			// expired for the next run to take over.)
			dying := &reconcile.Runner{Store: store.New(crashClient(t, project, cc)), Logger: quiet, LeaseTTL: min(lease, time.Millisecond)}
			if run, err := dying.Reconcile(ctx, reg); err == nil {
				t.Fatalf("the run survived its crash: %+v", run)
			}
			if got := specsOf(t, client)["beta"]; got.Digest == original.Digest {
				t.Fatal("the dying run did not write beta before it died: the test tests nothing")
			}
			st, err := store.New(client).RegistryStatus(ctx, "local")
			if err != nil || st.ManifestTrusted() {
				t.Fatalf("after the crash the manifest is trusted (%+v, writer %s, lease %+v): %v", st.Manifest, st.Writer, st.Lease, err)
			}
			invariant.Require(t, client, invariant.Options{})

			// Upstream goes back to what the manifest says.
			fsys["beta.yaml"] = &fstest.MapFile{Data: []byte(specYAML("beta"))}
			time.Sleep(5 * time.Millisecond) // the dead run's lease lapses; not a timing assertion
			run, err := healthy.Reconcile(ctx, reg)
			if err != nil || run.Counts.Updated != 1 {
				t.Fatalf("the run after the crash: %+v %v, want beta put back", run.Counts, err)
			}
			if got := specsOf(t, client)["beta"]; got.Digest != original.Digest {
				t.Fatalf("beta stored %s, upstream %s: the manifest was trusted after the crash", got.Digest, original.Digest)
			}
			if _, err := (&reconcile.Committer{Store: store.New(client), Logger: quiet}).Commit(ctx); err != nil {
				t.Fatal(err)
			}
			invariant.Require(t, client, invariant.Options{Settled: true, Feed: true})
		})
	}
}

// specsOf is every stored spec, by name.
func specsOf(t *testing.T, client *firestore.Client) map[string]store.SpecRecord {
	t.Helper()
	recs, err := store.New(client).OwnedSpecs(context.Background(), "local")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.SpecRecord{}
	for _, r := range recs {
		out[r.Name] = r
	}
	return out
}
