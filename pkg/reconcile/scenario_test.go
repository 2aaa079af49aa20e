package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }

var defaultPolicy = reconcile.Policy{MaxMarkShare: 0.5}

func activeNames(specs map[string]store.SpecRecord) []string {
	var out []string
	for n, r := range specs {
		if r.State == api.SpecActive {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func wantResult(t *testing.T, run store.Run, result api.RunResult) {
	t.Helper()
	if run.Result != result {
		t.Fatalf("run result %q (error %q, guard %q), want %q", run.Result, run.Error, run.Guard, result)
	}
}

// Guarantee 1 (an outage changes nothing) and the bug of the classic
// bootstrap, which emptied the store before refilling it: a registry that is
// down on the second run marks nothing, deletes nothing, and says so in its
// status.
func TestScenarioRegistryDownOnSecondRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oci := newGGCR(t)
	for _, n := range []string{"postgres", "redis", "rabbitmq"} {
		oci.pushSpec(t, "specs/"+n, specYAML(n))
	}
	reg := oci.registry(t, "team", 100)

	first := e.run(reg)
	wantResult(t, first, api.ResultSucceeded)
	if first.Counts.Created != 3 {
		t.Fatalf("first run created %d, want 3", first.Counts.Created)
	}
	before := e.specs("team")
	rev := e.revision()

	oci.set(func(f *faults) { f.down = true })
	second := e.run(reg)
	wantResult(t, second, api.ResultFetchFailed)
	if second.Counts != (store.RunCounts{}) || second.Ops.Deletes != 0 {
		t.Fatalf("a failed fetch changed specs: counts %+v ops %+v", second.Counts, second.Ops)
	}
	after := e.specs("team")
	if got := activeNames(after); strings.Join(got, ",") != "postgres,rabbitmq,redis" {
		t.Fatalf("after the outage the catalog holds %v, want all three active", got)
	}
	for n, r := range after {
		if r.Digest != before[n].Digest || r.UpdatedAt != before[n].UpdatedAt {
			t.Fatalf("spec %s was written during an outage", n)
		}
	}
	st := e.status("team")
	if st.LastRun.Result != api.ResultFetchFailed || !strings.Contains(st.LastRun.Error, "503") {
		t.Fatalf("status does not record the outage: %+v", st.LastRun)
	}
	if e.revision() != rev {
		t.Fatal("catalog revision moved although nothing visible changed")
	}

	// Back up: the listing equals the last good one, but the last run
	// failed, so the run is a full one and the status heals.
	oci.set(func(f *faults) { f.down = false })
	third := e.run(reg)
	wantResult(t, third, api.ResultSucceeded)
	if third.Counts.Unchanged != 3 || third.Ops.Writes != 1 {
		t.Fatalf("recovery run: counts %+v ops %+v, want 3 unchanged and only the status written", third.Counts, third.Ops)
	}
}

// A registry whose catalog fails on its second page must not be read as a
// registry with only the first page's repositories.
func TestScenarioCatalogSecondPageFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oci := newDistribution(t)
	names := []string{"a-db", "b-cache", "c-queue", "d-web", "e-store"}
	for _, n := range names {
		oci.pushSpec(t, "specs/"+n, specYAML(n))
	}
	reg := oci.registry(t, "paged", 2)
	first := e.run(reg)
	wantResult(t, first, api.ResultSucceeded)
	if first.Counts.Created != len(names) {
		t.Fatalf("created %d over paginated catalog, want %d (pagination not followed?)", first.Counts.Created, len(names))
	}

	// Every page after the first fails, retries included: the client's own
	// retry of a 5xx must not turn a broken page into a short listing.
	oci.set(func(f *faults) { f.failLaterPages = true })
	second := e.run(reg)
	wantResult(t, second, api.ResultFetchFailed)
	if !strings.Contains(second.Error, "500") {
		t.Fatalf("error %q does not say what failed", second.Error)
	}
	if got := activeNames(e.specs("paged")); len(got) != len(names) {
		t.Fatalf("a failed catalog page left %v active, want all %d", got, len(names))
	}
	if second.Counts.Marked != 0 {
		t.Fatalf("marked %d specs after a failed page", second.Counts.Marked)
	}
}

// Guarantees 4 and 9 (a spec that comes back keeps its id; ids are forever): a
// spec that vanishes is marked (hidden) with its id kept; when it returns it
// is unmarked with the same id. After a second absent run it is deleted;
// coming back then recreates the same id.
func TestScenarioVanishThenReturn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fsys := specFiles("postgres", "redis", "rabbitmq")
	reg := dirRegistry(t, "local", fsys, defaultPolicy)

	e.run(reg)
	id := e.specs("local")["redis"].ID
	if id != spec.DeriveSpecID("local", "redis") {
		t.Fatalf("redis id %s is not the derived one", id)
	}
	rev := e.revision()

	saved := fsys["redis.yaml"]
	delete(fsys, "redis.yaml")
	run := e.run(reg)
	wantResult(t, run, api.ResultSucceeded)
	got := e.specs("local")["redis"]
	if run.Counts.Marked != 1 || got.State != api.SpecMarked || got.ID != id {
		t.Fatalf("vanished spec: counts %+v, record %+v; want marked with id %s", run.Counts, got, id)
	}
	if e.revision() == rev {
		t.Fatal("marking is visible but the revision did not move")
	}

	fsys["redis.yaml"] = saved
	run = e.run(reg)
	got = e.specs("local")["redis"]
	if run.Counts.Unmarked != 1 || got.State != api.SpecActive || got.ID != id {
		t.Fatalf("returned spec: counts %+v, record state %s id %s; want unmarked with id %s", run.Counts, got.State, got.ID, id)
	}

	// Gone for two runs: marked, then deleted (nothing references it).
	delete(fsys, "redis.yaml")
	e.run(reg)
	run = e.run(reg)
	if run.Counts.Deleted != 1 {
		t.Fatalf("second absent run deleted %d, want 1 (counts %+v)", run.Counts.Deleted, run.Counts)
	}
	if _, ok := e.specs("local")["redis"]; ok {
		t.Fatal("redis still stored after deletion")
	}
	fsys["redis.yaml"] = saved
	run = e.run(reg)
	if run.Counts.Created != 1 || e.specs("local")["redis"].ID != id {
		t.Fatal("a returning spec must get the same derived id")
	}
}

// Guarantee 3 (nothing in use is deleted): a marked spec an instance uses
// survives every run until the instance goes; then the next run deletes it.
func TestScenarioPinnedMarkedSpecSurvives(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	fsys := specFiles("postgres", "redis", "rabbitmq")
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	e.run(reg)
	rec := e.specs("local")["redis"]
	sp, err := rec.Spec()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateInstance(ctx, store.Instance{ID: "inst-1", SpecID: rec.ID, PlanID: sp.Plans[0].ID}); err != nil {
		t.Fatal(err)
	}

	delete(fsys, "redis.yaml")
	if run := e.run(reg); run.Counts.Marked != 1 {
		t.Fatalf("marked %d, want 1", run.Counts.Marked)
	}
	for i := 0; i < 3; i++ {
		run := e.run(reg)
		if run.Counts.Deleted != 0 || run.Counts.Kept != 1 {
			t.Fatalf("run %d with an instance: counts %+v, want kept 1 deleted 0", i, run.Counts)
		}
		if i > 0 && run.Ops.Writes != 0 {
			t.Fatalf("a repeat run that only re-confirms a kept spec wrote %d documents: %+v", run.Ops.Writes, run)
		}
	}
	if got := e.specs("local")["redis"]; got.State != api.SpecMarked || got.Instances != 1 {
		t.Fatalf("pinned spec %+v, want marked with 1 instance", got)
	}
	st := e.status("local")
	if len(st.LastRun.Kept) != 1 || st.LastRun.Kept[0].Instances != 1 || st.LastRun.Kept[0].Name != "redis" {
		t.Fatalf("status does not say which spec is kept and by how many: %+v", st.LastRun.Kept)
	}
	// A marked spec takes no new instances.
	_, err = e.store.CreateInstance(ctx, store.Instance{ID: "inst-2", SpecID: rec.ID, PlanID: sp.Plans[0].ID})
	if !failure.Is(err, failure.Invalid) {
		t.Fatalf("provisioning a marked spec: %v, want an invalid-request failure", err)
	}

	if _, err := e.store.DeleteInstance(ctx, "inst-1"); err != nil {
		t.Fatal(err)
	}
	run := e.run(reg)
	if run.Counts.Deleted != 1 {
		t.Fatalf("after the instance went: counts %+v, want deleted 1", run.Counts)
	}
	if _, ok := e.specs("local")["redis"]; ok {
		t.Fatal("unpinned marked spec not deleted")
	}
}

// Guarantee 2 (a broken entry keeps its last good version): one image with a
// bad label among many: the others are served, the bad one is reported by
// repository and field; a spec whose label breaks later keeps its last good
// version, unmarked.
func TestScenarioBadLabelAmongMany(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oci := newGGCR(t)
	for i := 0; i < 6; i++ {
		n := fmt.Sprintf("svc-%d", i)
		oci.pushSpec(t, "specs/"+n, specYAML(n))
	}
	oci.pushSpec(t, "specs/broken", "name: broken\ndescription: no plans here\n")
	reg := oci.registry(t, "team", 100)
	run := e.run(reg)
	if run.Counts.Created != 6 || run.Counts.EntryErrors != 1 {
		t.Fatalf("counts %+v, want 6 created and 1 entry error", run.Counts)
	}
	if len(run.Errors) != 1 || run.Errors[0].Entry != "specs/broken" || !strings.Contains(run.Errors[0].Message, "plans") {
		t.Fatalf("entry errors %+v, want specs/broken naming the plans field", run.Errors)
	}

	good := e.specs("team")["svc-3"]
	oci.push(t, "specs/svc-3", "bm90IGJhc2U2NCB5YW1sOiBbXQ==") // base64 of a document that is no spec
	run = e.run(reg)
	if run.Counts.Marked != 0 || run.Counts.EntryErrors != 2 {
		t.Fatalf("counts %+v, want nothing marked and 2 entry errors", run.Counts)
	}
	after := e.specs("team")["svc-3"]
	if after.State != api.SpecActive || after.Digest != good.Digest || after.EntryError == "" {
		t.Fatalf("broken spec record %+v: want last good version, active, with the error recorded", after)
	}
	oci.pushSpec(t, "specs/svc-3", specYAML("svc-3"))
	run = e.run(reg)
	if run.Counts.Repaired != 1 || e.specs("team")["svc-3"].EntryError != "" {
		t.Fatalf("fixed label: counts %+v, error %q; want repaired", run.Counts, e.specs("team")["svc-3"].EntryError)
	}
}

// The mass-deletion guard: an empty listing never marks; marking more than
// the share does not either; a registry that allows it does.
func TestScenarioEmptyListingGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fsys := specFiles("a", "b", "c", "d")
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	e.run(reg)
	rev := e.revision()

	for k := range fsys {
		delete(fsys, k)
	}
	run := e.run(reg)
	wantResult(t, run, api.ResultGuarded)
	if run.Counts.Marked != 0 || len(activeNames(e.specs("local"))) != 4 {
		t.Fatalf("guarded run marked %d; active %v", run.Counts.Marked, activeNames(e.specs("local")))
	}
	if st := e.status("local"); !strings.Contains(st.LastRun.Guard, "empty") {
		t.Fatalf("status guard %q does not say why", st.LastRun.Guard)
	}
	if e.revision() != rev {
		t.Fatal("guarded run moved the revision")
	}
	// Guarded runs do not become the baseline: the same empty listing is
	// evaluated (and guarded) again rather than skipped as unchanged.
	wantResult(t, e.run(reg), api.ResultGuarded)

	// Three of four gone is more than half: guarded too.
	fsys["a.yaml"] = &fstest.MapFile{Data: []byte(specYAML("a"))}
	run = e.run(reg)
	wantResult(t, run, api.ResultGuarded)
	if !strings.Contains(run.Guard, "3 of 4") {
		t.Fatalf("guard %q", run.Guard)
	}

	allowed := reg
	allowed.Policy.AllowMassDeletion = true
	run = e.run(allowed)
	wantResult(t, run, api.ResultSucceeded)
	if run.Counts.Marked != 3 {
		t.Fatalf("allowed run marked %d, want 3", run.Counts.Marked)
	}
}

// Guarantee 5 (an unchanged world costs almost nothing): an unchanged listing
// costs one read and no writes, and the revision moves only on visible change.
func TestScenarioUnchangedListingCostsOneRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fsys := specFiles("a", "b", "c")
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	e.run(reg)
	rev := e.revision()
	run := e.run(reg)
	wantResult(t, run, api.ResultUnchanged)
	if run.Ops != (store.Counts{Reads: 1}) {
		t.Fatalf("unchanged run used %+v, want exactly 1 read", run.Ops)
	}
	// It counts what it left unchanged, though it compared no spec.
	if run.Counts.Unchanged != 3 {
		t.Fatalf("unchanged run counts %d unchanged specs, want 3", run.Counts.Unchanged)
	}
	if e.revision() != rev {
		t.Fatal("unchanged run moved the revision")
	}
	// A changed spec: one spec write, revision moves.
	fsys["b.yaml"] = &fstest.MapFile{Data: []byte(specYAML("b", "small", "large"))}
	run = e.run(reg)
	if run.Counts.Updated != 1 || run.Counts.Unchanged != 2 {
		t.Fatalf("counts %+v, want 1 updated 2 unchanged", run.Counts)
	}
	if e.revision() <= rev {
		t.Fatal("a visible change did not move the revision")
	}
	// Same content, reformatted: the listing digest is over parsed specs,
	// so this is still the one-read path.
	rev = e.revision()
	fsys["c.yaml"] = &fstest.MapFile{Data: []byte("# reformatted\n" + specYAML("c"))}
	run = e.run(reg)
	wantResult(t, run, api.ResultUnchanged)
	if run.Counts.Unchanged != 3 {
		t.Fatalf("unchanged run after an update counts %d unchanged, want 3", run.Counts.Unchanged)
	}
	if run.Ops != (store.Counts{Reads: 1}) || e.revision() != rev {
		t.Fatalf("cosmetic change: ops %+v; want 1 read and the same revision", run.Ops)
	}
}

// Guarantee 7 (one at a time), store side: two reconciles of one registry at
// once lose nothing and duplicate nothing.
func TestScenarioConcurrentReconciles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	names := []string{"a", "b", "c", "d", "e", "f"}
	fsys := specFiles(names...)
	reg := dirRegistry(t, "local", fsys, defaultPolicy)

	var wg sync.WaitGroup
	runs := make([]store.Run, 2)
	errs := make([]error, 2)
	for i := range runs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			runs[i], errs[i] = e.runner.Reconcile(context.Background(), reg)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent run %d: %v", i, err)
		}
	}
	if created := runs[0].Counts.Created + runs[1].Counts.Created; created != len(names) {
		t.Fatalf("the two runs created %d specs in total, want exactly %d", created, len(names))
	}
	docs, err := e.client.Collection(store.SpecsCollection).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(names) {
		t.Fatalf("%d spec documents, want %d", len(docs), len(names))
	}
	if got := activeNames(e.specs("local")); len(got) != len(names) {
		t.Fatalf("active %v, want all", got)
	}
	// The commit the runs asked for: the test ends with the checker, on
	// a feed that numbers each create once.
	if c := e.commit(); c.Changes != len(names) {
		t.Fatalf("the commit after the runs numbered %d changes, want %d", c.Changes, len(names))
	}
}

// A spec id offered by two registries: the owner keeps it and both
// statuses say so; when the other stops offering it the note goes away.
func TestScenarioIDConflictBetweenRegistries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	shared := "id: 7d1c6d3e-0000-4000-8000-000000000001\n" + specYAML("shared")
	ownerFS := fstest.MapFS{"shared.yaml": {Data: []byte(shared)}, "x.yaml": {Data: []byte(specYAML("x"))}}
	otherFS := fstest.MapFS{"shared.yaml": {Data: []byte(strings.Replace(shared, "the shared service", "another shared", 1))}, "ypsilon.yaml": {Data: []byte(specYAML("ypsilon"))}}
	owner := dirRegistry(t, "owner", ownerFS, defaultPolicy)
	other := dirRegistry(t, "other", otherFS, defaultPolicy)
	e.run(owner)
	run := e.run(other)
	if run.Counts.Conflicts != 1 || run.Counts.Created != 1 {
		t.Fatalf("other registry counts %+v, want 1 conflict, 1 created; errors %+v", run.Counts, run.Errors)
	}
	rec, err := e.store.GetSpec(context.Background(), "7d1c6d3e-0000-4000-8000-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Registry != "owner" || strings.Contains(rec.SpecJSON, "another shared") {
		t.Fatalf("the conflicting registry took over the spec: %+v", rec)
	}
	if st := e.status("other"); len(st.LastRun.Conflicts) != 1 || st.LastRun.Conflicts[0].Owner != "owner" {
		t.Fatalf("other's status: %+v", st.LastRun.Conflicts)
	}
	if st := e.status("owner"); len(st.ContestedBy["other"]) != 1 {
		t.Fatalf("owner's status does not name the contender: %+v", st.ContestedBy)
	}
	// A run with conflicts is never skipped as unchanged: it re-checks.
	if run := e.run(other); run.Result == api.ResultUnchanged {
		t.Fatal("a registry with conflicts was skipped as unchanged")
	}
	delete(otherFS, "shared.yaml")
	e.run(other)
	if st := e.status("owner"); len(st.ContestedBy) != 0 {
		t.Fatalf("stale conflict note on owner: %+v", st.ContestedBy)
	}
}

// Entry errors are recorded sorted and capped, with the full count.
func TestScenarioEntryErrorsSortedAndCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fsys := specFiles("good")
	for i := 0; i < reconcile.MaxRecordedErrors+5; i++ {
		fsys[fmt.Sprintf("bad-%03d.yaml", i)] = &fstest.MapFile{Data: []byte("name: x\n")}
	}
	run := e.run(dirRegistry(t, "local", fsys, defaultPolicy))
	if run.ErrorsTotal != reconcile.MaxRecordedErrors+5 || len(run.Errors) != reconcile.MaxRecordedErrors {
		t.Fatalf("errors total %d recorded %d", run.ErrorsTotal, len(run.Errors))
	}
	if !sort.SliceIsSorted(run.Errors, func(i, j int) bool { return run.Errors[i].Entry < run.Errors[j].Entry }) {
		t.Fatal("entry errors not sorted")
	}
	st := e.status("local")
	if len(st.LastRun.Errors) != reconcile.MaxRecordedErrors || st.LastRun.Errors[0].Entry != "bad-000" {
		t.Fatalf("recorded errors: %d, first %+v", len(st.LastRun.Errors), st.LastRun.Errors[0])
	}
}

// Guarantee 3 (nothing in use is deleted) under concurrency: a provision
// racing the mark-and-delete of its spec either commits first (and pins the
// spec, which survives) or fails cleanly (and the spec goes); never an
// instance of a deleted spec.
func TestScenarioProvisionRacesDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	const rounds = 6
	var names []string
	for i := 0; i < rounds; i++ {
		names = append(names, fmt.Sprintf("racy-%d", i))
	}
	reg := dirRegistry(t, "local", specFiles(names...), defaultPolicy)
	e.run(reg)
	specs := e.specs("local")
	// The marks and deletes below are a run's steps 5 and 3, called
	// directly: like a run, say first that the specs are being written,
	// so the registry's manifest is no longer trusted.
	if err := e.store.BeginWriting(ctx, "local", "run-1"); err != nil {
		t.Fatal(err)
	}
	pinned, deleted := 0, 0
	for i, n := range names {
		rec := specs[n]
		sp, err := rec.Spec()
		if err != nil {
			t.Fatal(err)
		}
		instID := fmt.Sprintf("inst-%d", i)
		var wg sync.WaitGroup
		var provErr, markErr, delErr error
		var outcome store.DeleteOutcome
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, provErr = e.store.CreateInstance(ctx, store.Instance{ID: instID, SpecID: rec.ID, PlanID: sp.Plans[0].ID})
		}()
		go func() {
			defer wg.Done()
			if _, markErr = e.store.MarkSpec(ctx, "local", rec.ID, "run-1"); markErr == nil {
				outcome, _, delErr = e.store.DeleteMarked(ctx, "local", rec.ID, "run-2", time.Now())
			}
		}()
		wg.Wait()
		if markErr != nil || delErr != nil {
			t.Fatalf("%s: mark %v, delete %v", n, markErr, delErr)
		}
		_, instErr := e.store.GetInstance(ctx, instID)
		_, specErr := e.store.GetSpec(ctx, rec.ID)
		switch {
		case provErr == nil:
			// The provision won: the instance exists and pins the spec.
			if instErr != nil || specErr != nil || outcome != store.Referenced {
				t.Fatalf("%s: provision committed but instance %v, spec %v, delete outcome %s", n, instErr, specErr, outcome)
			}
			pinned++
		default:
			// The mark won: the provision failed cleanly, nothing half-written.
			if !failure.Is(provErr, failure.Invalid) && !failure.Is(provErr, failure.NotFound) {
				t.Fatalf("%s: provision failed uncleanly: %v", n, provErr)
			}
			if !failure.Is(instErr, failure.NotFound) {
				t.Fatalf("%s: a failed provision left an instance record", n)
			}
			if outcome == store.Deleted && !failure.Is(specErr, failure.NotFound) {
				t.Fatalf("%s: delete reported but spec still there", n)
			}
			deleted++
		}
	}
	t.Logf("%d rounds: provision first %d, mark first %d", rounds, pinned, deleted)
	invariant.Require(t, e.client, invariant.Options{})
	// The registry still offers every spec: its next run brings back
	// what the races marked or deleted (the same ids) and records it, and
	// the test ends settled.
	if run := e.run(reg); run.Counts.Unmarked != pinned || run.Counts.Created != deleted {
		t.Fatalf("the run after the races unmarked %d and created %d, want %d and %d", run.Counts.Unmarked, run.Counts.Created, pinned, deleted)
	}
}

// Guarantee 10 (no half-upgrades) end to end: a new version dropping a plan an
// instance uses is held back (the old one keeps serving, the status names the
// blocker); once the instance goes, the next run adopts it although the
// listing did not change.
func TestScenarioHalfUpgradeHeldBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	fsys := fstest.MapFS{"db.yaml": {Data: []byte(specYAML("db", "small", "large"))}}
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	e.run(reg)
	rec := e.specs("local")["db"]
	sp, _ := rec.Spec()
	large, _ := sp.PlanByName("large")
	if _, err := e.store.CreateInstance(ctx, store.Instance{ID: "i1", SpecID: rec.ID, PlanID: large.ID}); err != nil {
		t.Fatal(err)
	}
	fsys["db.yaml"] = &fstest.MapFile{Data: []byte(specYAML("db", "small"))}
	run := e.run(reg)
	if run.Counts.HeldBack != 1 || run.Counts.Updated != 0 || len(run.HeldBack) != 1 || !strings.Contains(run.HeldBack[0].Blockers[0], large.ID) {
		t.Fatalf("stranding version: counts %+v held %+v", run.Counts, run.HeldBack)
	}
	if got := e.specs("local")["db"]; got.Digest != rec.Digest {
		t.Fatal("the held-back version was written")
	}
	if st := e.status("local"); len(st.LastRun.HeldBack) != 1 {
		t.Fatalf("status does not say what is held back: %+v", st.LastRun)
	}
	// Still blocked: the unchanged listing is re-checked, not skipped.
	if run := e.run(reg); run.Result == api.ResultUnchanged || run.Counts.HeldBack != 1 {
		t.Fatalf("repeat run: %+v", run)
	}
	if _, err := e.store.DeleteInstance(ctx, "i1"); err != nil {
		t.Fatal(err)
	}
	run = e.run(reg)
	if run.Counts.Updated != 1 || run.Counts.HeldBack != 0 {
		t.Fatalf("after the instance went: %+v", run.Counts)
	}
	if got := e.specs("local")["db"]; got.Digest == rec.Digest {
		t.Fatal("released version not adopted")
	}
}

// A provision naming an OCI platform the spec does not support is refused;
// one on a supported platform pins that platform.
func TestScenarioPlatformPinned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	withPlatforms := specYAML("web") + "platforms:\n  - {os: linux, architecture: amd64}\n  - {os: linux, architecture: arm64}\n"
	fsys := fstest.MapFS{"web.yaml": {Data: []byte(withPlatforms)}}
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	e.run(reg)
	rec := e.specs("local")["web"]
	sp, _ := rec.Spec()
	if _, err := e.store.CreateInstance(ctx, store.Instance{ID: "bad", SpecID: rec.ID, PlanID: sp.Plans[0].ID, Platform: "windows/amd64"}); !failure.Is(err, failure.Invalid) {
		t.Fatalf("unsupported platform: %v", err)
	}
	if _, err := e.store.CreateInstance(ctx, store.Instance{ID: "arm", SpecID: rec.ID, PlanID: sp.Plans[0].ID, Platform: "linux/arm64"}); err != nil {
		t.Fatal(err)
	}
	fsys["web.yaml"] = &fstest.MapFile{Data: []byte(specYAML("web") + "platforms:\n  - {os: linux, architecture: amd64}\n")}
	run := e.run(reg)
	if run.Counts.HeldBack != 1 || !strings.Contains(strings.Join(run.HeldBack[0].Blockers, ";"), "linux/arm64") {
		t.Fatalf("dropping a used platform: %+v %+v", run.Counts, run.HeldBack)
	}
}
