package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

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

func manifestOf(entries []ManifestEntry) Manifest {
	m := Manifest{Entries: entries, Listing: map[string]ListingPart{}}
	for i, e := range entries {
		m.Listing[e.Entry] = ListingPart{Digest: fmt.Sprintf("%022d", i)}
	}
	return m
}

func sortedEntries(es []ManifestEntry) []ManifestEntry {
	out := append([]ManifestEntry(nil), es...)
	sort.Slice(out, func(i, j int) bool { return out[i].SpecID < out[j].SpecID })
	return out
}

// A registry of 10,000 entries fits Firestore's 1 MiB a document in four
// shards by entry name (each filled to two thirds at most, so runs of
// named entries can add to it), read back whole in four reads, or one
// entry's shard in one; a manifest that shrinks deletes the shards it no
// longer needs; a run that is no longer the registry's writer (another
// began after it) records no manifest, and removes the one there was.
func TestManifestShardsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ops := &Ops{}
	st := New(emulatortest.Firestore(t)).WithOps(ops)
	want := manifestOf(manifestEntries(10000))
	shards, err := encodeManifest(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 4 {
		t.Fatalf("10,000 entries in %d shards, want 4", len(shards))
	}
	for i, b := range shards {
		if b.size() > manifestFill() || b.size() > 1<<20-4096 {
			t.Fatalf("shard %d holds %d bytes: over the fill (%d) or Firestore's document limit", i, b.size(), manifestFill())
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
	if err != nil || !status.ManifestTrusted() || status.Manifest.Shards != 4 || status.Manifest.Entries != 10000 ||
		status.Manifest.Layout != api.ManifestByEntry || status.Manifest.Active != 10000 {
		t.Fatalf("status after the manifest: %+v %v", status.Manifest, err)
	}
	before := ops.Snapshot().Reads
	got, err := st.ReadManifest(ctx, "r", status.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if n := ops.Snapshot().Reads - before; n != 4 {
		t.Fatalf("reading the manifest cost %d reads, want 4 (one a shard)", n)
	}
	if fmt.Sprint(sortedEntries(got.Entries)) != fmt.Sprint(sortedEntries(want.Entries)) || !maps.Equal(got.Listing, want.Listing) {
		t.Fatal("the manifest read back differs from the one written")
	}

	// One entry's shard: one read, and everything of that entry in it.
	one := want.Entries[1234]
	before = ops.Snapshot().Reads
	parts, err := st.ReadManifestShards(ctx, "r", status.Manifest, []string{one.Entry})
	if err != nil || len(parts) != 1 {
		t.Fatalf("the shard of %s: %d parts, %v", one.Entry, len(parts), err)
	}
	if n := ops.Snapshot().Reads - before; n != 1 {
		t.Fatalf("reading one entry's shard cost %d reads, want 1", n)
	}
	p := parts[ManifestShardOf(one.Entry, 4)]
	if p == nil || !slices.Contains(p.Entries, one) || p.Listing[one.Entry] != want.Listing[one.Entry] || !p.Roomy() {
		t.Fatalf("the entry's shard does not hold it (or has no room): %v", p != nil)
	}

	// Shrink: one shard left, the others deleted.
	if err := st.BeginWriting(ctx, "r", "run-2"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.RecordRunWithManifest(ctx, "r", &Run{ID: "run-2", Result: api.ResultSucceeded}, true, "d", "", 0, Seen{LastRun: "run-1", Began: true}, manifestOf(want.Entries[:10])); err != nil || !ok {
		t.Fatalf("record the smaller manifest: %v %v", ok, err)
	}
	for i := 1; i < 4; i++ {
		if snap, err := st.client.Collection(ManifestsCollection).Doc(fmt.Sprintf("r.%d", i)).Get(ctx); err == nil || snap.Exists() {
			t.Fatalf("shard %d, which the smaller manifest no longer needs, was kept", i)
		}
	}
	status, _ = st.RegistryStatus(ctx, "r")
	if got, err := st.ReadManifest(ctx, "r", status.Manifest); err != nil || got == nil || len(got.Entries) != 10 {
		t.Fatalf("the smaller manifest: %+v, %v", got, err)
	}

	// A shard rewritten by someone else: not trusted, read as none.
	if _, err := st.client.Collection(ManifestsCollection).Doc("r.0").Update(ctx, []firestore.Update{{Path: "run", Value: "other"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.ReadManifest(ctx, "r", status.Manifest); err != nil || got != nil {
		t.Fatalf("a shard of another run read as %+v, %v", got, err)
	}
	if got, err := st.ReadManifestShards(ctx, "r", status.Manifest, []string{want.Entries[0].Entry}); err != nil || got != nil {
		t.Fatalf("a shard of another run read as %+v, %v", got, err)
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

// A targeted run rewrites only the shards it changed and names itself in
// the header (and in those shards), so the manifest is trusted again;
// the others stay the full run's. If it lost its lease, or a full run
// recorded meanwhile, it withdraws the manifest and the listing digest
// instead, and names itself the writer, so no manifest recorded beside
// it is trusted. An old layout is never read by shard.
func TestTargetedRecordTrust(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := New(emulatortest.Firestore(t))
	full := manifestOf(manifestEntries(3000))
	record := func(name string) *RegistryStatus {
		t.Helper()
		if err := st.BeginWriting(ctx, name, "full"); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.RecordRunWithManifest(ctx, name, &Run{ID: "full", Result: api.ResultSucceeded}, true, "sum128:00", "", 0, Seen{Began: true}, full); err != nil || !ok {
			t.Fatalf("record: %v %v", ok, err)
		}
		before, err := st.TakeLease(ctx, name, Lease{Holder: "targeted"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !before.ManifestTrusted() || before.Manifest.Shards < 2 {
			t.Fatalf("before the targeted run: %+v", before.Manifest)
		}
		return before
	}
	entry := full.Entries[7]
	i := ManifestShardOf(entry.Entry, 2)

	before := record("ok")
	parts, err := st.ReadManifestShards(ctx, "ok", before.Manifest, []string{entry.Entry})
	if err != nil || parts[i] == nil {
		t.Fatalf("parts %v %v", parts, err)
	}
	changed := parts[i].Manifest
	changed.Entries = slices.DeleteFunc(slices.Clone(changed.Entries), func(e ManifestEntry) bool { return e.SpecID == entry.SpecID })
	entry.State, entry.Clean = api.SpecMarked, false
	changed.Entries = append(changed.Entries, entry)
	delete(changed.Listing, entry.Entry)
	run := &Run{ID: "targeted", Result: api.ResultSucceeded, StartedAt: time.Now().UTC()}
	ok, err := st.RecordTargetedRun(ctx, "ok", run, TargetedRecord{Saw: before, Manifest: true, Read: parts, Parts: map[int]Manifest{i: changed},
		Digest: "sum128:01", Marked: 1, Covered: []string{entry.Entry}})
	if err != nil || !ok {
		t.Fatalf("targeted record: %v %v", ok, err)
	}
	after, _ := st.RegistryStatus(ctx, "ok")
	h := after.Manifest
	if !after.ManifestTrusted() || after.Lease != nil || h.Run != "targeted" || h.ShardRun(i) != "targeted" || h.ShardRun(1-i) != "full" ||
		h.Entries != 3000 || h.Active != 2999 || after.ListingDigest != "sum128:01" || after.Marked != 1 || after.LastRun.ID != "full" ||
		after.LastTargeted == nil || after.LastTargeted.ID != "targeted" || len(after.Covered) != 1 || after.Covered[0].Entry != entry.Entry || after.Interrupted() {
		t.Fatalf("after the targeted record: %+v, manifest %+v", after, h)
	}
	m, err := st.ReadManifest(ctx, "ok", h)
	if err != nil || m == nil || !slices.Contains(m.Entries, entry) || len(m.Entries) != 3000 {
		t.Fatalf("the manifest after: %v", err)
	}

	// The lease lost to another run meanwhile.
	before = record("lost")
	time.Sleep(time.Millisecond)
	if _, err := st.TakeLease(ctx, "lost", Lease{Holder: "other"}, time.Minute); err == nil {
		t.Fatal("a held lease was taken")
	}
	if err := st.ReleaseLease(ctx, "lost", "targeted"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TakeLease(ctx, "lost", Lease{Holder: "other"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	ok, err = st.RecordTargetedRun(ctx, "lost", &Run{ID: "targeted", Result: api.ResultSucceeded}, TargetedRecord{Saw: before, Manifest: true, Digest: "sum128:01"})
	if err != nil || ok {
		t.Fatalf("a run that lost its lease recorded a manifest: %v %v", ok, err)
	}
	after, _ = st.RegistryStatus(ctx, "lost")
	if after.Manifest != nil || after.ListingDigest != "" || after.Writer != "targeted" || after.Lease == nil || after.Lease.Holder != "other" {
		t.Fatalf("after the overtaken targeted run: %+v", after)
	}

	// An old layout (the version before) is not read by shard.
	old := &ManifestHeader{Run: "full", Shards: 1, Entries: 1}
	if parts, err := st.ReadManifestShards(ctx, "ok", old, []string{entry.Entry}); err != nil || parts != nil {
		t.Fatalf("an old layout read by shard: %v %v", parts, err)
	}
}

// A listing part keeps an entry's upstream digest and spec name beside its
// part of the digest, as [digest, upstream, spec] ([digest, upstream, ""]
// for an entry that gave nothing); one without an upstream digest is
// [digest], as the version before wrote every part, which still reads
// (without upstream digests: those entries are read again), and whose
// reader takes the first element of the new ones. 10,000 entries of an
// OCI registry, each with its upstream digest and spec name, fit eight
// shards.
func TestManifestListingParts(t *testing.T) {
	t.Parallel()
	m := manifestOf(manifestEntries(3))
	m.Listing[m.Entries[0].Entry] = ListingPart{Digest: "d0", Upstream: "oci1@sha256:00", Spec: "service-0"}
	m.Listing[m.Entries[1].Entry] = ListingPart{Digest: "d1", Upstream: "oci1@sha256:01"}
	shards, err := encodeManifest(m)
	if err != nil || len(shards) != 1 {
		t.Fatalf("%d shards: %v", len(shards), err)
	}
	var raw map[string][]string
	if err := json.Unmarshal(shards[0].listing, &raw); err != nil {
		t.Fatal(err)
	}
	if got := raw[m.Entries[0].Entry]; !slices.Equal(got, []string{"d0", "oci1@sha256:00", "service-0"}) {
		t.Errorf("a hinted part encodes as %q", got)
	}
	if got := raw[m.Entries[1].Entry]; !slices.Equal(got, []string{"d1", "oci1@sha256:01", ""}) {
		t.Errorf("a quiet part encodes as %q", got)
	}
	if got := raw[m.Entries[2].Entry]; len(got) != 1 {
		t.Errorf("a part without upstream encodes as %q", got)
	}
	sh := ManifestShard{Entries: shards[0].entries, Listing: shards[0].listing}
	back, err := sh.Decode()
	if err != nil || !maps.Equal(back.Listing, m.Listing) {
		t.Fatalf("decoded %+v, want %+v: %v", back.Listing, m.Listing, err)
	}

	// The version before: [digest] only.
	sh.Listing = []byte(`{"a":["d-a"],"b":["d-b"]}`)
	old, err := sh.Decode()
	if err != nil || old.Listing["a"] != (ListingPart{Digest: "d-a"}) || len(old.Listing) != 2 {
		t.Fatalf("an old listing decodes as %+v: %v", old.Listing, err)
	}
	sh.Listing = []byte(`{"a":["d-a", 7, "x"]}`)
	if _, err := sh.Decode(); err == nil {
		t.Error("a listing part whose upstream digest is no string decoded")
	}

	big := manifestOf(manifestEntries(10000))
	for i, e := range big.Entries {
		p := big.Listing[e.Entry]
		p.Upstream = fmt.Sprintf("oci1@sha256:%x", sha256.Sum256(fmt.Appendf(nil, "upstream %d", i)))
		p.Spec = fmt.Sprintf("service-number-%05d", i)
		big.Listing[e.Entry] = p
	}
	if shards, err = encodeManifest(big); err != nil || len(shards) != 8 {
		t.Errorf("10,000 entries with upstream digests in %d shards, want 8: %v", len(shards), err)
	}
}

// encodeManifest encodes each entry once and joins the shards from the
// pieces: each shard must be byte for byte what encodeShard gives its
// part (equal parts encode to equal bytes, whoever encodes them), and the
// shard count the fewest that keep each within manifestFill. Names JSON
// escapes (HTML characters, U+2028, bytes that are not UTF-8) and listing
// parts of entries without a spec are among them.
func TestEncodeManifestIsEncodeShardOfEachPart(t *testing.T) {
	t.Parallel()
	odd := manifestOf([]ManifestEntry{
		{SpecID: "b", Entry: "a<b>&c", Digest: "d1", State: api.SpecActive, Clean: true},
		{SpecID: "a", Entry: "a<b>&c", Digest: "d2", State: api.SpecMarked},
		{SpecID: "c", Entry: "line\u2028sep", Digest: "d3", State: api.SpecActive},
		{SpecID: "d", Entry: "bad\xffutf8", Digest: "d4", State: api.SpecActive, Clean: true},
	})
	odd.Listing["quiet/entry"] = ListingPart{Digest: "dq", Upstream: "oci1@sha256:00"}
	odd.Listing["a<b>&c"] = ListingPart{Digest: "dh", Upstream: "oci1@sha256:01", Spec: "s<1>"}
	hinted := manifestOf(manifestEntries(10000))
	for i, e := range hinted.Entries {
		hinted.Listing[e.Entry] = ListingPart{Digest: hinted.Listing[e.Entry].Digest, Upstream: fmt.Sprintf("oci1@sha256:%064x", i), Spec: fmt.Sprintf("service-%05d", i)}
	}
	// A shard's worth to the byte (one shard), and a byte more (two).
	tight := sort.Search(10000, func(n int) bool {
		b, err := encodeShard(Manifest{Entries: manifestEntries(n)})
		return err == nil && b.size() > manifestFill()
	})
	full := manifestEntries(tight - 1)
	if b, err := encodeShard(Manifest{Entries: full}); err == nil {
		full[0].Digest += strings.Repeat("0", manifestFill()-b.size())
	}
	over := slices.Clone(full)
	over[0].Digest += "0"
	for name, m := range map[string]Manifest{
		"a shard exactly":     {Entries: full},
		"a byte over a shard": {Entries: over},
		"empty":               {},
		"no listing":          {Entries: manifestEntries(3)},
		"odd names":           odd,
		"10,000 entries":      manifestOf(manifestEntries(10000)),
		"with hints":          hinted,
	} {
		byParts := func(n int) []encodedShard {
			parts := make([]Manifest, n)
			for _, e := range m.Entries {
				i := ManifestShardOf(e.Entry, n)
				parts[i].Entries = append(parts[i].Entries, e)
			}
			for entry, p := range m.Listing {
				i := ManifestShardOf(entry, n)
				if parts[i].Listing == nil {
					parts[i].Listing = map[string]ListingPart{}
				}
				parts[i].Listing[entry] = p
			}
			out := make([]encodedShard, n)
			for i, p := range parts {
				var err error
				if out[i], err = encodeShard(p); err != nil {
					t.Fatal(err)
				}
			}
			return out
		}
		got, err := encodeManifest(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := byParts(len(got))
		for i := range want {
			if got[i].size() > manifestFill() {
				t.Errorf("%s: shard %d of %d holds %d bytes, over the fill (%d)", name, i, len(got), got[i].size(), manifestFill())
			}
			if string(got[i].entries) != string(want[i].entries) || string(got[i].listing) != string(want[i].listing) ||
				(got[i].listing == nil) != (want[i].listing == nil) {
				t.Errorf("%s: shard %d of %d encodes as\n%.300s %.300s\nnot as its part does\n%.300s %.300s", name, i, len(got), got[i].entries, got[i].listing, want[i].entries, want[i].listing)
			}
		}
		if n := len(got); n > 1 && !slices.ContainsFunc(byParts(n/2), func(s encodedShard) bool { return s.size() > manifestFill() }) {
			t.Errorf("%s: %d shards, but %d would do", name, n, n/2)
		}
	}
}
