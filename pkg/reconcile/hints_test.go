package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/failure"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// A new instance (Cloud Functions scales to zero, so most runs start
// cold) costs upstream what a warm one does: the run hands the OCI source
// the upstream digest it recorded for each entry (the manifest's), so an
// unchanged repository costs one HEAD, and an unchanged registry of 1,000
// repositories its catalog pages and 1,000 HEADs, no GET; one changed
// entry adds its manifest and its config, nothing more. Counted exactly at
// the registry, with and without the hints (WithoutHints: the code before
// them reads every manifest and config again), and in Firestore, where
// the hints cost nothing: the same reads and writes either way.
//
// Not parallel: beside the 10,000-entry registries of the targeted cost
// test under -race on two cores, their first fetches ran past the
// source's 60 s timeout.
func TestColdRunCostsOneHeadARepository(t *testing.T) {
	const n = 1000
	e := newEnv(t)
	e.end.Shallow = true
	up := newUpstream(t)
	names := svcNames(n)
	up.pushAll(t, names)
	if run := e.run(up.source(t, "team")); run.Result != api.ResultSucceeded || run.Counts.Created != n {
		t.Fatalf("first run: %s %+v %s", run.Result, run.Counts, run.Error)
	}
	up.counts()
	blind := reconcile.WithoutHints(&reconcile.Runner{Store: e.store, Logger: e.runner.Logger})

	// The catalog of 1,000 at 100 a page: ten pages with a Link header,
	// and the eleventh, empty, that the tenth's Link names.
	const pages = 11
	type cost struct {
		upstream map[string]int
		ops      store.Counts
	}
	measure := func(runner *reconcile.Runner, want api.RunResult) cost {
		t.Helper()
		run, err := runner.Reconcile(context.Background(), up.source(t, "team"))
		if err != nil || run.Result != want {
			t.Fatalf("run: %s %+v %v %s", run.Result, run.Counts, err, run.Error)
		}
		e.commit()
		return cost{up.counts(), run.Ops}
	}
	check := func(what string, got map[string]int, want map[string]int) {
		t.Helper()
		for _, k := range []string{reqCatalog, reqHead, reqGetManifest, reqGetBlob} {
			if got[k] != want[k] {
				t.Errorf("%s: %s", what, formatCounts(got))
				return
			}
		}
	}

	// Unchanged, cold: the catalog, a HEAD a repository, nothing read;
	// one Firestore read (the status), as warm.
	after := measure(e.runner, api.ResultUnchanged)
	check("a cold unchanged run", after.upstream, map[string]int{reqCatalog: pages, reqHead: n})
	if after.ops != (store.Counts{Reads: 1}) {
		t.Errorf("a cold unchanged run cost %+v in Firestore, want 1 read", after.ops)
	}
	before := measure(blind, api.ResultUnchanged)
	check("a cold unchanged run without hints", before.upstream, map[string]int{reqCatalog: pages, reqHead: n, reqGetManifest: n, reqGetBlob: n})
	if before.ops != after.ops {
		t.Errorf("the hints changed what an unchanged run costs in Firestore: %+v with, %+v without", after.ops, before.ops)
	}
	t.Logf("cold, unchanged, %d repositories: %s with hints; %s without", n, formatCounts(after.upstream), formatCounts(before.upstream))

	// One entry changed, cold: its manifest and config read, and nothing
	// else; in Firestore what a warm run pays (the status, the manifest's
	// one shard, the spec; the update and its change; the record).
	changed := names[n/2]
	up.push(t, changed, changedSpec(changed))
	after = measure(e.runner, api.ResultSucceeded)
	check("a cold run with one entry changed", after.upstream, map[string]int{reqCatalog: pages, reqHead: n, reqGetManifest: 1, reqGetBlob: 1})
	up.push(t, changed, specYAML(changed)) // back, for the run without hints
	before = measure(blind, api.ResultSucceeded)
	check("a cold run with one entry changed, without hints", before.upstream, map[string]int{reqCatalog: pages, reqHead: n, reqGetManifest: n, reqGetBlob: n})
	if before.ops != after.ops {
		t.Errorf("the hints changed what a changed run costs in Firestore: %+v with, %+v without", after.ops, before.ops)
	}
	if after.ops != emulatortest.FullRunOneMoved {
		t.Errorf("a cold run with one entry changed costs %+v in Firestore, want %+v (emulatortest.FullRunOneMoved, which the docs quote)", after.ops, emulatortest.FullRunOneMoved)
	}
	t.Logf("cold, one entry changed: %s, Firestore %+v with hints; %s without", formatCounts(after.upstream), after.ops, formatCounts(before.upstream))

	// An event for an unchanged tag, on a new instance: one HEAD; for a
	// changed one, its manifest and config too.
	event := func(name string, want func(store.RunCounts) bool) map[string]int {
		t.Helper()
		run, err := e.runner.ReconcileEntries(context.Background(), up.source(t, "team"), []string{name})
		if err != nil || run.Result != api.ResultSucceeded || run.Backstop != "" || !want(run.Counts) {
			t.Fatalf("targeted run of %s: %s %+v %q: %v", name, run.Result, run.Counts, run.Backstop, err)
		}
		e.commit()
		return up.counts()
	}
	check("an event for an unchanged tag", event(names[7], func(c store.RunCounts) bool { return c.Unchanged == 1 }), map[string]int{reqHead: 1})
	up.push(t, names[8], changedSpec(names[8]))
	check("an event for a changed tag", event(names[8], func(c store.RunCounts) bool { return c.Updated == 1 }), map[string]int{reqHead: 1, reqGetManifest: 1, reqGetBlob: 1})

	// The manifest says what the hints are: every entry with the upstream
	// digest it was read at and its spec's name.
	st := e.status("team")
	m, err := e.store.ReadManifest(context.Background(), "team", st.Manifest)
	if err != nil || m == nil {
		t.Fatalf("manifest: %v", err)
	}
	withUpstream := maps.Collect(func(yield func(string, store.ListingPart) bool) {
		for k, p := range m.Listing {
			if p.Upstream != "" && p.Spec == k && !yield(k, p) {
				return
			}
		}
	})
	if len(withUpstream) != n {
		t.Errorf("%d of %d listing entries keep their upstream digest and spec name", len(withUpstream), n)
	}
}

// Hints stand only for what a trusted manifest says is stored clean, at
// the upstream digest the tag names now; anything in doubt is read, on a
// new instance, on every run that reads:
//   - a repository pushed back to an older digest (the hint is of the
//     newer one): read, and the older version adopted again;
//   - an image whose label is broken: read again on every run that
//     reads, its spec keeping its last good version (an unchanged
//     registry is still one read: the same image gives the same error);
//   - a manifest that could not be read (its tag moved to a digest that
//     answered 404): read again by the next run even when nothing else
//     changed, until it can be;
//   - a held-back version: read again;
//   - an image without a spec label: never read again while its tag
//     stays (a hint of nothing);
//   - a manifest of the version before, without upstream digests: every
//     entry read once, and the next run has its hints;
//   - a manifest not trusted (a run began writing after it): every entry
//     read.
func TestHintsNeverStandForWhatIsInDoubt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	up := newUpstream(t)
	for _, n := range []string{"a", "b", "c", "d", "h"} {
		up.push(t, n, specYAML(n, "small", "large"))
	}
	up.pushLabels(t, "q", map[string]string{"org.example.other": "no spec here"})
	up.counts()
	run := func(want api.RunResult, wantCounts func(store.RunCounts) bool) (store.Run, map[string]int) {
		t.Helper()
		got := e.run(up.source(t, "team"))
		if got.Result != want || (wantCounts != nil && !wantCounts(got.Counts)) {
			t.Fatalf("run: %s %+v %q, want %s", got.Result, got.Counts, got.Error, want)
		}
		return got, up.counts()
	}
	reads := func(what string, c map[string]int, manifests int) {
		t.Helper()
		if c[reqHead] != 6 || c[reqGetManifest] != manifests || c[reqGetBlob] != manifests {
			t.Errorf("%s: %s; want 6 HEADs and %d manifests and configs read", what, formatCounts(c), manifests)
		}
	}
	run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.Created == 5 })
	v1 := e.specs("team")["a"].Digest

	// Pushed back: a moves to v2 and back to v1's very image.
	up.push(t, "a", changedSpec("a"))
	_, c := run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.Updated == 1 })
	reads("a pushed", c, 1)
	up.push(t, "a", specYAML("a", "small", "large"))
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.Updated == 1 })
	reads("a pushed back to its first image", c, 1)
	if got := e.specs("team")["a"].Digest; got != v1 {
		t.Errorf("a pushed back is %s, want its first version %s", got, v1)
	}

	// A broken label: read on every run that reads; its spec keeps its
	// last good version.
	good := e.specs("team")["b"].Digest
	up.pushLabels(t, "b", map[string]string{spec.LabelKey: "!!! not base64 !!!"})
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.EntryErrors == 1 })
	reads("b broken", c, 1)
	up.push(t, "c", changedSpec("c"))
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.EntryErrors == 1 && c.Updated == 1 })
	reads("c changed while b is broken", c, 2)
	if b := e.specs("team")["b"]; b.Digest != good || b.State != api.SpecActive || b.EntryError == "" {
		t.Errorf("broken b: %+v, want its last good version, active, with the entry error", b)
	}
	got, c := run(api.ResultUnchanged, nil)
	reads("nothing changed while b is broken", c, 0)
	if got.Ops != (store.Counts{Reads: 1}) {
		t.Errorf("an unchanged registry with a broken label cost %+v, want 1 read", got.Ops)
	}
	up.push(t, "b", specYAML("b", "small", "large"))
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.Repaired == 1 && c.EntryErrors == 0 })
	reads("b fixed", c, 1)

	// A manifest that could not be read: d moves to v2, whose manifest
	// answers 404 (as when the tag moves between the lookup and the
	// read): d keeps v1 with the error; read again on the next run though
	// nothing else changed, and again, until it can be.
	dv1 := e.specs("team")["d"].Digest
	up.push(t, "d", changedSpec("d"))
	notRead := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v2/d/manifests/sha256:")
	}
	up.setFail(notRead)
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.EntryErrors == 1 })
	if c[reqGetManifest] == 0 {
		t.Errorf("d's manifest was never asked for: %s", formatCounts(c))
	}
	got, c = run(api.ResultUnchanged, nil)
	if c[reqGetManifest] == 0 || c[reqGetBlob] != 0 {
		t.Errorf("the run after a manifest that could not be read did not try it again: %s", formatCounts(c))
	}
	if d := e.specs("team")["d"]; d.Digest != dv1 || d.EntryError == "" {
		t.Errorf("d while unreadable: %+v, want v1 with the entry error", d)
	}
	up.setFail(nil)
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.Updated == 1 && c.EntryErrors == 0 })
	reads("d readable again, nothing else changed", c, 1)
	t.Logf("an unchanged run while d could not be read: %+v in Firestore", got.Ops)

	// Held back: h's new version drops the plan an instance is on.
	rec := e.specs("team")["h"]
	sp, _ := rec.Spec()
	large, _ := sp.PlanByName("large")
	if _, err := e.store.CreateInstance(ctx, store.Instance{ID: "i1", SpecID: rec.ID, PlanID: large.ID}); err != nil {
		t.Fatal(err)
	}
	up.push(t, "h", specYAML("h", "small"))
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.HeldBack == 1 })
	reads("h held back", c, 1)
	up.push(t, "c", specYAML("c"))
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.HeldBack == 1 && c.Updated == 1 })
	reads("c changed while h is held back", c, 2)
	if _, err := e.store.DeleteInstance(ctx, "i1"); err != nil {
		t.Fatal(err)
	}
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.Updated == 1 && c.HeldBack == 0 })
	reads("h adopted", c, 1)

	// The version before: a manifest without upstream digests, and a
	// listing digest of its own kind. Every entry is read once (the
	// quiet q too), and then hints are there again.
	oldManifest(t, e, "team")
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.Unchanged == 5 })
	reads("the first run after the upgrade", c, 6)
	up.push(t, "a", changedSpec("a"))
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.Updated == 1 })
	reads("the run after it", c, 1)

	// A manifest not trusted: a run began writing after it (and died).
	if err := e.store.BeginWriting(ctx, "team", "crashed"); err != nil {
		t.Fatal(err)
	}
	up.push(t, "a", specYAML("a", "small", "large"))
	_, c = run(api.ResultSucceeded, func(c store.RunCounts) bool { return c.Updated == 1 })
	reads("after a run that died", c, 6)
}

// oldManifest makes the registry's manifest and listing digest those of
// the version before upstream digests: each listing entry only its part
// of the digest, and a digest no run computes now.
func oldManifest(t *testing.T, e *env, name string) {
	t.Helper()
	ctx := context.Background()
	st := e.status(name)
	for i := range st.Manifest.Shards {
		ref := e.client.Collection(store.ManifestsCollection).Doc(fmt.Sprintf("%s.%d", name, i))
		snap, err := ref.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var sh store.ManifestShard
		if err := snap.DataTo(&sh); err != nil {
			t.Fatal(err)
		}
		m, err := sh.Decode()
		if err != nil {
			t.Fatal(err)
		}
		old := map[string][]string{}
		for entry, p := range m.Listing {
			old[entry] = []string{p.Digest}
		}
		b, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Update(ctx, []firestore.Update{{Path: "listing", Value: b}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.client.Collection(store.RegistriesCollection).Doc(name).Update(ctx, []firestore.Update{{Path: "listing_digest", Value: "sum128:00000000000000000000000000000001"}}); err != nil {
		t.Fatal(err)
	}
}

// The store failing while the run answers the source's question for
// hints (its manifest read) is the run's failure, not the registry's
// (never recorded as a failed fetch): the fetch stops before reading
// anything upstream, the run ends in a retryable error, no spec is
// written, and the next run does the work.
func TestStoreFailingToAnswerForHintsFailsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	up := newUpstream(t)
	for _, n := range []string{"a", "b", "c"} {
		up.push(t, n, specYAML(n))
	}
	e.run(up.source(t, "team"))
	before := e.specs("team")

	// Refuse every document read from the second on (a code the client
	// does not retry): the status is the first, the manifest the second.
	var reads, failAt atomic.Int32
	failing := emulatortest.FirestoreVia(t, e.project, "", nil, grpc.WithStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if strings.HasSuffix(method, "/BatchGetDocuments") {
				if n := reads.Add(1); failAt.Load() > 0 && n >= failAt.Load() {
					return nil, grpcstatus.Error(codes.PermissionDenied, "injected: the store refuses")
				}
			}
			return streamer(ctx, desc, cc, method, opts...)
		}))
	runner := &reconcile.Runner{Store: store.New(failing), Logger: e.runner.Logger}
	up.push(t, "b", changedSpec("b"))
	failAt.Store(reads.Load() + 2)
	run, err := runner.Reconcile(context.Background(), up.source(t, "team"))
	if err == nil || !failure.Retryable(err) || run.Result != api.ResultError {
		t.Fatalf("run: %s %q: %v; want a retryable error", run.Result, run.Error, err)
	}
	if c := up.counts(); c[reqGetManifest] != 0 || c[reqGetBlob] != 0 {
		t.Errorf("the fetch read upstream after the store failed: %s", formatCounts(c))
	}
	failAt.Store(0)
	for name, r := range e.specs("team") {
		if !r.UpdatedAt.Equal(before[name].UpdatedAt) {
			t.Errorf("spec %s was written", name)
		}
	}
	if healed := e.run(up.source(t, "team")); healed.Counts.Updated != 1 {
		t.Fatalf("the next run: %+v", healed.Counts)
	}
}
