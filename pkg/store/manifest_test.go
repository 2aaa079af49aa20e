package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
)

func manifestEntries(n int) []ManifestEntry {
	out := make([]ManifestEntry, n)
	for i := range out {
		out[i] = ManifestEntry{
			SpecID: fmt.Sprintf("%08x-0000-5000-8000-%012x", i, i),
			Entry:  fmt.Sprintf("team/services/service-number-%05d", i),
			Digest: fmt.Sprintf("sha256:%x", sha256.Sum256(fmt.Appendf(nil, "%d", i))),
			State:  api.SpecActive, Clean: i%7 != 0,
		}
	}
	return out
}

// A registry of 10,000 entries fits Firestore's 1 MiB a document in two
// shards, read back whole in two reads; a manifest that shrinks deletes
// the shards it no longer needs; a run that is no longer the registry's
// writer (another began after it) records no manifest, and removes the
// one there was.
func TestManifestShardsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ops := &Ops{}
	st := New(emulatortest.Firestore(t)).WithOps(ops)
	want := manifestEntries(10000)
	shards, err := encodeManifest(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 2 {
		t.Fatalf("10,000 entries in %d shards, want 2", len(shards))
	}
	for i, b := range shards {
		if len(b) > 1<<20-4096 {
			t.Fatalf("shard %d holds %d bytes: over Firestore's document limit", i, len(b))
		}
	}
	if err := st.BeginWriting(ctx, "r", "run-1"); err != nil {
		t.Fatal(err)
	}
	ok, err := st.RecordRunWithManifest(ctx, "r", &Run{ID: "run-1", Result: api.ResultSucceeded}, true, "d", "", 0, Seen{Began: true}, want)
	if err != nil || !ok {
		t.Fatalf("record: %v %v", ok, err)
	}
	status, err := st.RegistryStatus(ctx, "r")
	if err != nil || !status.ManifestTrusted() || status.Manifest.Shards != 2 || status.Manifest.Entries != 10000 {
		t.Fatalf("status after the manifest: %+v %v", status.Manifest, err)
	}
	before := ops.Snapshot().Reads
	got, err := st.ReadManifest(ctx, "r", status.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if n := ops.Snapshot().Reads - before; n != 2 {
		t.Fatalf("reading the manifest cost %d reads, want 2 (one a shard)", n)
	}
	sort.Slice(want, func(i, j int) bool { return want[i].SpecID < want[j].SpecID })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatal("the manifest read back differs from the one written")
	}

	// Shrink: one shard left, the second deleted.
	if err := st.BeginWriting(ctx, "r", "run-2"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.RecordRunWithManifest(ctx, "r", &Run{ID: "run-2", Result: api.ResultSucceeded}, true, "d", "", 0, Seen{LastRun: "run-1", Began: true}, want[:10]); err != nil || !ok {
		t.Fatalf("record the smaller manifest: %v %v", ok, err)
	}
	if snap, err := st.client.Collection(ManifestsCollection).Doc("r.1").Get(ctx); err == nil || snap.Exists() {
		t.Fatal("the shard the smaller manifest no longer needs was kept")
	}
	status, _ = st.RegistryStatus(ctx, "r")
	if got, err := st.ReadManifest(ctx, "r", status.Manifest); err != nil || len(got) != 10 {
		t.Fatalf("the smaller manifest: %d entries, %v", len(got), err)
	}

	// A shard rewritten by someone else: not trusted, read as none.
	if _, err := st.client.Collection(ManifestsCollection).Doc("r.0").Update(ctx, []firestore.Update{{Path: "run", Value: "other"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.ReadManifest(ctx, "r", status.Manifest); err != nil || got != nil {
		t.Fatalf("a shard of another run read as %d entries, %v", len(got), err)
	}

	// Run 3 began, then run 4 began; run 3 finishing records no manifest
	// and withdraws the one there was.
	for _, id := range []string{"run-3", "run-4"} {
		if err := st.BeginWriting(ctx, "r", id); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := st.RecordRunWithManifest(ctx, "r", &Run{ID: "run-3", Result: api.ResultSucceeded}, true, "d", "", 0, Seen{LastRun: "run-2", Began: true}, want); err != nil || ok {
		t.Fatalf("a run that is no longer the writer recorded a manifest: %v %v", ok, err)
	}
	if status, _ := st.RegistryStatus(ctx, "r"); status.Manifest != nil || status.LastRun.ID != "run-3" {
		t.Fatalf("after the overtaken run: manifest %+v, last run %s", status.Manifest, status.LastRun.ID)
	}
	// Run 4 saw run-2 as the last run; run 3 recorded since: no manifest
	// either (run 3's writes may postdate what run 4 read).
	if ok, err := st.RecordRunWithManifest(ctx, "r", &Run{ID: "run-4", Result: api.ResultSucceeded}, true, "d", "", 0, Seen{LastRun: "run-2", Began: true}, want); err != nil || ok {
		t.Fatalf("a run another finished beside recorded a manifest: %v %v", ok, err)
	}
}
