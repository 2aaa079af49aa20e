package reconcile_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/grpc"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
)

// pushAll pushes a spec image for each repository, sixteen at a time.
func (o *ociServer) pushAll(t *testing.T, repos []string) {
	t.Helper()
	var wg sync.WaitGroup
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for r := range work {
				o.pushSpec(t, r, specYAML(strings.ReplaceAll(r, "/", "-")))
			}
		})
	}
	for _, r := range repos {
		work <- r
	}
	close(work)
	wg.Wait()
}

// untag removes repo's latest tag: the repository offers nothing now.
func (o *ociServer) untag(t *testing.T, repo string) {
	t.Helper()
	ref, err := name.NewTag(o.host+"/"+repo+":latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(ref); err != nil {
		t.Fatalf("delete %s: %v", ref, err)
	}
}

func svcNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("svc-%05d", i)
	}
	return out
}

// commits counts the commit requests runs make.
type commits struct {
	mu   sync.Mutex
	reqs []queue.CommitRequest
}

func (c *commits) RequestCommit(_ context.Context, r queue.CommitRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, r)
	return nil
}

func (c *commits) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reqs)
}

// targeted runs names of reg, as a worker does for an event, then commits.
func (e *env) targeted(reg reconcile.Registry, names ...string) store.Run {
	e.t.Helper()
	run, err := e.runner.ReconcileEntries(context.Background(), reg, names)
	if err != nil {
		e.t.Fatalf("reconcile %s entries %v: %v", reg.Name, names, err)
	}
	e.commit()
	return run
}

// What an event costs in Firestore does not grow with the registry: a
// targeted run of one entry of a registry of 100 and of 10,000 entries
// reads and writes exactly the same, counted operation by operation, and
// so does the commit after it: for an entry that changed, one that is
// new, and one that did not change.
func TestTargetedRunCostIsTheEntrysNotTheRegistrys(t *testing.T) {
	t.Parallel()
	type cost struct{ changed, changedCommit, added, unchanged store.Counts }
	measure := func(t *testing.T, n int) cost {
		e := newEnv(t)
		// Listing subcollections on the emulator takes time in proportion
		// to the database: the large project is checked shallow (there are
		// none).
		e.end.Shallow = true
		oci := newGGCR(t)
		names := svcNames(n)
		oci.pushAll(t, names)
		reg := oci.registry(t, "team", 2*n)
		if run := e.run(reg); run.Counts.Created != n {
			t.Fatalf("first run: %+v %s", run.Counts, run.Error)
		}
		var c cost
		event := func(name string, want func(store.RunCounts) bool) store.Counts {
			t.Helper()
			run, err := e.runner.ReconcileEntries(context.Background(), reg, []string{name})
			if err != nil || run.Result != api.ResultSucceeded || run.Backstop != "" || !want(run.Counts) {
				t.Fatalf("targeted run of %s: %s %+v backstop %q: %v", name, run.Result, run.Counts, run.Backstop, err)
			}
			return run.Ops
		}
		changed := names[n/2]
		oci.pushSpec(t, changed, changedSpec(changed))
		c.changed = event(changed, func(rc store.RunCounts) bool { return rc.Updated == 1 })
		commit := e.commit()
		if commit.Changes != 1 {
			t.Fatalf("the commit numbered %d changes, want 1", commit.Changes)
		}
		c.changedCommit = commit.Ops
		oci.pushSpec(t, "svc-new", specYAML("svc-new"))
		c.added = event("svc-new", func(rc store.RunCounts) bool { return rc.Created == 1 })
		c.unchanged = event(names[1], func(rc store.RunCounts) bool { return rc.Unchanged == 1 && rc.Changes == 0 })
		e.commit()
		invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Shallow: true})
		return c
	}
	small, large := measure(t, 100), measure(t, 10000)
	t.Logf("one entry: changed %+v, its commit %+v, new %+v, unchanged %+v (100 entries); %+v (10,000)", small.changed, small.changedCommit, small.added, small.unchanged, large)
	want := cost{
		// The lease (1 read, 1 write), the entry's manifest shard (1), its
		// spec (1) and the query counting its instances (1: none), the spec
		// and its change (2 writes), the record (1 read; the status with
		// the lease released and the shard: 2).
		changed: emulatortest.EventRunChanged,
		// The pending changes (one), meta/catalog; both written.
		changedCommit: emulatortest.EventCommit,
		// The lease, the shard, the offered id (missing), the offered name
		// (a query, no result), the record; the spec and its change.
		added: emulatortest.EventRunAdded,
		// The lease, the shard, the record (no shard to rewrite).
		unchanged: emulatortest.EventRunUnchanged,
	}
	if small != want {
		t.Errorf("targeted runs of one entry: %+v, want %+v", small, want)
	}
	if large != small {
		t.Errorf("the registry's size changed what an event costs: %+v at 100 entries, %+v at 10,000", small, large)
	}
}

// changedSpec is specYAML(name) with a new description: new content.
func changedSpec(name string) string {
	return strings.Replace(specYAML(name), "the "+name+" service", "the new "+name+" service", 1)
}

// A targeted run does a full run's steps over the entries it was told
// about, and nothing else: a changed entry is updated, one gone upstream
// marked (not deleted), a broken one keeps its last good version with its
// error recorded, a new one created; an entry it was not told about stays
// as it was although it changed upstream. It is recorded as the last
// targeted run, not the last run, with the entries it covered; the
// manifest is trusted after it, and the listing digest worked out for
// what it saw, so the full run after it does only the rest: it updates
// the entry nobody named, does not delete the mark yet (its grace is a
// full run's), and the one after that deletes it.
func TestTargetedRunDoesAFullRunsStepsOverItsEntries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oci := newGGCR(t)
	oci.pushAll(t, []string{"a", "b", "c", "d", "e"})
	reg := oci.registry(t, "team", 100)
	first := e.run(reg)
	before := e.specs("team")

	oci.pushSpec(t, "a", changedSpec("a"))
	oci.untag(t, "b")
	oci.push(t, "c", "not base64!")
	oci.pushSpec(t, "d", changedSpec("d"))
	oci.pushSpec(t, "f", specYAML("f"))
	cs := &commits{}
	e.runner.Commits = cs
	run := e.targeted(reg, "a", "b", "c", "f")
	wantResult(t, run, api.ResultSucceeded)
	if c := run.Counts; c.Updated != 1 || c.Marked != 1 || c.EntryErrors != 1 || c.Created != 1 || c.Deleted != 0 || c.Changes != 3 {
		t.Fatalf("counts %+v", c)
	}
	if cs.count() != 1 {
		t.Errorf("%d commit requests, want the run's one", cs.count())
	}
	after := e.specs("team")
	switch {
	case after["a"].Digest == before["a"].Digest || after["a"].Generation != 2:
		t.Error("a was not updated")
	case after["b"].State != api.SpecMarked:
		t.Error("b, gone upstream, was not marked")
	case after["c"].Digest != before["c"].Digest || after["c"].State != api.SpecActive || after["c"].EntryError == "":
		t.Errorf("c, broken, lost its last good version or its error: %+v", after["c"])
	case after["d"].Digest != before["d"].Digest || after["d"].UpdatedAt != before["d"].UpdatedAt:
		t.Error("d, which no event named, was written")
	case after["e"].UpdatedAt != before["e"].UpdatedAt:
		t.Error("e was written")
	case after["f"].State != api.SpecActive:
		t.Error("f was not created")
	}
	st := e.status("team")
	if st.LastRun.ID != first.ID || st.LastTargeted == nil || st.LastTargeted.ID != run.ID || !st.ManifestTrusted() || st.Lease != nil || st.Marked != 1 {
		t.Fatalf("status after the targeted run: last run %s, targeted %+v, manifest %+v (writer %s), lease %+v, marked %d", st.LastRun.ID, st.LastTargeted, st.Manifest, st.Writer, st.Lease, st.Marked)
	}
	if got := fmt.Sprint(st.LastTargeted.Entries); got != "[a b c f]" {
		t.Errorf("recorded entries %s", got)
	}
	var covered []string
	for _, c := range st.Covered {
		covered = append(covered, c.Entry)
		if !c.At.Equal(run.StartedAt.Truncate(time.Microsecond)) { // Firestore keeps microseconds
			t.Errorf("%s covered from %s, want the run's start %s", c.Entry, c.At, run.StartedAt)
		}
	}
	if got := fmt.Sprint(covered); got != "[a b c f]" {
		t.Errorf("covered %s", got)
	}
	if st.ListingDigest == "" || st.ListingDigest == first.ID {
		t.Errorf("listing digest %q: the run should have worked it out", st.ListingDigest)
	}
	invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})

	// The full run after: d only; b's mark waits for its grace.
	full := e.run(reg)
	wantResult(t, full, api.ResultSucceeded)
	if c := full.Counts; c.Updated != 1 || c.Deleted != 0 || c.Marked != 0 || c.Created != 0 || c.EntryErrors != 1 {
		t.Fatalf("the full run after the targeted one: %+v", c)
	}
	if e.specs("team")["b"].State != api.SpecMarked {
		t.Fatal("b's mark did not survive the first full run after it")
	}
	if full := e.run(reg); full.Counts.Deleted != 1 {
		t.Fatalf("the second full run after the mark: %+v, want b deleted", full.Counts)
	}
}

// The digest a targeted run works out is exact: when it saw every change
// upstream, the full run after it finds the listing unchanged and stops
// after one read. A replayed event changes nothing and writes no spec.
// An entry a targeted run marked is not deleted by the full run that
// finds the listing unchanged: that run records itself, which starts the
// mark's grace, and the run after it deletes the spec.
func TestTargetedRunKeepsTheListingDigest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oci := newGGCR(t)
	oci.pushAll(t, []string{"a", "b", "c"})
	reg := oci.registry(t, "team", 100)
	e.run(reg)
	oci.pushSpec(t, "a", changedSpec("a"))
	oci.pushSpec(t, "d", specYAML("d"))
	if run := e.targeted(reg, "a", "d"); run.Counts.Updated != 1 || run.Counts.Created != 1 {
		t.Fatalf("targeted run: %+v", run.Counts)
	}
	full := e.run(reg)
	wantResult(t, full, api.ResultUnchanged)
	if full.Ops != (store.Counts{Reads: 1}) {
		t.Errorf("the full run after the events cost %+v, want the status read alone", full.Ops)
	}
	replay := e.targeted(reg, "a", "d")
	wantResult(t, replay, api.ResultSucceeded)
	if c := replay.Counts; c.Changes != 0 || c.Unchanged != 2 {
		t.Errorf("a replayed event: %+v", c)
	}
	// The lease, and the record (which releases it): no spec, no shard.
	if replay.Ops.Writes != 2 {
		t.Errorf("a replayed event wrote %d times, want 2 (lease, record)", replay.Ops.Writes)
	}
	if again := e.run(reg); again.Result != api.ResultUnchanged {
		t.Errorf("after the replay the full run is %s", again.Result)
	}

	oci.untag(t, "b")
	if run := e.targeted(reg, "b"); run.Counts.Marked != 1 {
		t.Fatalf("b gone: %+v", run.Counts)
	}
	grace := e.run(reg)
	if grace.Result != api.ResultSucceeded || grace.Counts.Deleted != 0 || e.specs("team")["b"].State != api.SpecMarked {
		t.Fatalf("the full run after the mark: %s %+v, want b kept marked and the run recorded", grace.Result, grace.Counts)
	}
	if st := e.status("team"); !st.LastSuccessAt.Equal(grace.FinishedAt.Truncate(time.Microsecond)) {
		t.Fatalf("the grace did not start: last success %s, the run finished %s", st.LastSuccessAt, grace.FinishedAt)
	}
	if next := e.run(reg); next.Counts.Deleted != 1 {
		t.Fatalf("the run after the grace: %+v, want b deleted", next.Counts)
	}
}

// Without a manifest to trust the named entries are reconciled by a full
// run (the backstop), which says so; so is a source that cannot fetch
// single entries (a directory, an HTTP index).
func TestTargetedRunBackstops(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oci := newGGCR(t)
	oci.pushAll(t, []string{"a", "b"})
	reg := oci.registry(t, "team", 100)
	run := e.targeted(reg, "a")
	if run.Backstop == "" || run.Counts.Created != 2 || len(run.Entries) != 0 {
		t.Fatalf("the first run of a registry, for an event: backstop %q, counts %+v", run.Backstop, run.Counts)
	}
	if st := e.status("team"); st.LastRun.ID != run.ID || st.LastTargeted != nil || !st.ManifestTrusted() {
		t.Fatalf("the backstop is not recorded as a full run: %+v", st)
	}
	dir := dirRegistry(t, "local", specFiles("xx", "yy"), defaultPolicy)
	if run := e.targeted(dir, "xx"); run.Backstop == "" || run.Counts.Created != 2 {
		t.Fatalf("a dir source for an event: backstop %q, counts %+v", run.Backstop, run.Counts)
	}
	// An event's full run that finds the registry unchanged records when
	// it checked (the events before it are done), and gives back the
	// writer its lease named: the scheduled run after it still stops
	// after one read.
	run = e.targeted(dir)
	st := e.status("local")
	if run.Result != api.ResultUnchanged || !st.CheckedAt.Equal(run.StartedAt.Truncate(time.Microsecond)) || st.Lease != nil || st.Interrupted() {
		t.Fatalf("an event's unchanged full run: %s, checked at %s (started %s), lease %+v, interrupted %v", run.Result, st.CheckedAt, run.StartedAt, st.Lease, st.Interrupted())
	}
	if run := e.run(dir); run.Result != api.ResultUnchanged || run.Ops != (store.Counts{Reads: 1}) {
		t.Fatalf("the scheduled run after it: %s %+v", run.Result, run.Ops)
	}
}

// An event for nothing the registry selects (its repository list, allow,
// deny) runs nothing: no lease, no write, no read.
func TestTargetedRunOfNothingSelected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oci := newGGCR(t)
	oci.pushAll(t, []string{"a", "internal/x"})
	src, err := registry.NewOCI(registry.OCIConfig{Host: oci.host, Insecure: true, Filter: mustFilter(t, nil, []string{"internal/.*"})})
	if err != nil {
		t.Fatal(err)
	}
	reg := reconcile.Registry{Name: "team", Source: src, Policy: defaultPolicy}
	e.run(reg)
	before := e.status("team")
	run := e.targeted(reg, "internal/x", "not/there/")
	if run.Result != api.ResultUnchanged || run.Ops != (store.Counts{}) || len(run.Entries) != 0 {
		t.Fatalf("an event for nothing selected: %s %+v entries %v", run.Result, run.Ops, run.Entries)
	}
	if after := e.status("team"); !reflect.DeepEqual(after, before) {
		t.Fatalf("the status changed:\n%+v\n%+v", before, after)
	}
}

// An event while the registry is down marks nothing and changes no
// spec; the manifest stays trusted, the status says so, and the next run
// catches up.
func TestTargetedRunWhileTheRegistryIsDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oci := newGGCR(t)
	oci.pushAll(t, []string{"a", "b"})
	reg := oci.registry(t, "team", 100)
	e.run(reg)
	before := e.specs("team")
	oci.untag(t, "a")
	oci.set(func(f *faults) { f.down = true })
	run := e.targeted(reg, "a", "b")
	wantResult(t, run, api.ResultFetchFailed)
	if run.Counts != (store.RunCounts{}) {
		t.Fatalf("a failed fetch changed specs: %+v", run.Counts)
	}
	for n, r := range e.specs("team") {
		if r.UpdatedAt != before[n].UpdatedAt || r.State != api.SpecActive {
			t.Fatalf("spec %s was written while the registry was down", n)
		}
	}
	st := e.status("team")
	if st.LastTargeted == nil || st.LastTargeted.Result != api.ResultFetchFailed || !st.ManifestTrusted() || st.Lease != nil || len(st.Covered) != 0 {
		t.Fatalf("status after the outage: %+v", st)
	}
	oci.set(func(f *faults) { f.down = false })
	if run := e.run(reg); run.Counts.Marked != 1 {
		t.Fatalf("the next run did not catch up: %+v", run.Counts)
	}
}

// The mass-deletion guard of a targeted run counts the registry's active
// specs, not the entries named: two of ten entries gone are marked, four
// of five are not (and the digest is left to the next full run).
func TestTargetedRunShareGuard(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		registry, gone int
		guarded        bool
	}{{10, 2, false}, {5, 4, true}} {
		t.Run(fmt.Sprintf("%d of %d", tc.gone, tc.registry), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			oci := newGGCR(t)
			names := svcNames(tc.registry)
			oci.pushAll(t, names)
			reg := oci.registry(t, "team", 100)
			e.run(reg)
			for _, n := range names[:tc.gone] {
				oci.untag(t, n)
			}
			run := e.targeted(reg, names[:tc.gone]...)
			switch {
			case tc.guarded && (run.Result != api.ResultGuarded || run.Counts.Marked != 0):
				t.Fatalf("%s, %d marked: the guard did not hold", run.Result, run.Counts.Marked)
			case !tc.guarded && (run.Result != api.ResultSucceeded || run.Counts.Marked != tc.gone):
				t.Fatalf("%s, %d marked (guard %q): the guard counted the named entries only", run.Result, run.Counts.Marked, run.Guard)
			}
			if st := e.status("team"); (st.ListingDigest == "") != tc.guarded {
				t.Errorf("digest %q after a run guarded %v", st.ListingDigest, tc.guarded)
			}
		})
	}
}

func mustFilter(t *testing.T, allow, deny []string) *registry.Filter {
	t.Helper()
	f, err := registry.NewFilter(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// finalState is what a project's store says of every spec, and the
// feed's last word on each: what a full run decides.
func finalState(t *testing.T, e *env) string {
	t.Helper()
	st, err := invariant.Read(context.Background(), e.client)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for id, r := range st.Specs {
		lines = append(lines, fmt.Sprintf("spec %s %s entry=%s %s %s gen=%d err=%q held=%v", id, r.Name, r.Entry, r.State, r.Digest, r.Generation, r.EntryError, r.HeldBack != nil))
	}
	last := map[string]store.Change{}
	for _, c := range st.Changes {
		if c.Revision > last[c.SpecID].Revision {
			last[c.SpecID] = c.Change
		}
	}
	for id, c := range last {
		lines = append(lines, fmt.Sprintf("feed %s %s gen=%d", id, c.Kind, c.Generation))
	}
	for name, r := range st.Registries {
		lines = append(lines, fmt.Sprintf("registry %s marked=%d", name, r.Marked))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// The full run is the backstop: after events ran their targeted runs
// (an update, an entry gone, one broken, a new one, one offering the
// name, and so the id, another entry holds, one the registry does not select, a replay),
// and a change no event announced, a full run ends in exactly the store
// and feed a full run alone makes of the same upstream.
func TestEventsThenAFullRunIsAFullRunAlone(t *testing.T) {
	t.Parallel()
	oci := newGGCR(t)
	oci.pushAll(t, []string{"a", "b", "c", "d", "yy"})
	src, err := registry.NewOCI(registry.OCIConfig{Host: oci.host, Insecure: true, Filter: mustFilter(t, nil, []string{"internal/.*"})})
	if err != nil {
		t.Fatal(err)
	}
	reg := reconcile.Registry{Name: "team", Source: src, Policy: defaultPolicy}
	events, alone := newEnv(t), newEnv(t)
	events.run(reg)
	alone.run(reg)

	oci.pushSpec(t, "a", changedSpec("a"))
	oci.untag(t, "b")
	oci.push(t, "c", "not base64!")
	oci.pushSpec(t, "d", changedSpec("d")) // no event says so
	oci.pushSpec(t, "f", specYAML("f"))
	oci.pushSpec(t, "xx", changedSpec("yy")) // offers yy's name (and so its id)
	oci.pushSpec(t, "internal/z", specYAML("z"))

	events.targeted(reg, "a")
	events.targeted(reg, "b", "c")
	if run := events.targeted(reg, "f", "xx", "internal/z"); run.Counts.Created != 1 || run.Counts.EntryErrors != 1 || fmt.Sprint(run.Entries) != "[f xx]" {
		t.Fatalf("the event for f, xx and internal/z: %+v, entries %v", run.Counts, run.Entries)
	}
	if st := events.status("team"); st.ListingDigest != "" {
		t.Fatal("xx offers an id another entry holds, and the digest was kept: the full run would skip it")
	}
	events.targeted(reg, "a")
	events.run(reg)
	alone.run(reg)
	if got, want := finalState(t, events), finalState(t, alone); got != want {
		t.Fatalf("events and then a full run:\n%s\na full run alone:\n%s", got, want)
	}
	invariant.Require(t, events.client, invariant.Options{Settled: true, Feed: true})
}

// crashWorldOCI is the state before the targeted run under test: a
// registry of four entries on its own upstream, reconciled, then upstream
// a changed, b gone and e new. The run under test is told about a, b and
// e.
func crashWorldOCI(t *testing.T, e *env) (reconcile.Registry, *ociServer) {
	t.Helper()
	up := newGGCR(t)
	up.pushAll(t, []string{"a", "b", "c", "d"})
	reg := up.registry(t, "local", 100)
	if run := e.run(reg); run.Counts.Created != 4 {
		t.Fatalf("setup run: %+v", run.Counts)
	}
	up.pushSpec(t, "a", changedSpec("a"))
	up.untag(t, "b")
	up.pushSpec(t, "e", specYAML("e"))
	return reg, up
}

// Crashes of a targeted run: it dies after its k-th write, for every k
// of the run and the commit after it. Every state in between passes the
// checker (its manifest rule too: the run took the lease, so until it
// records, no manifest is trusted), and the redelivered event (a full
// run when the crash left the manifest untrusted, a targeted one
// otherwise), then a commit, end exactly where the uninterrupted run and
// commit do. Two more full runs (the first starts the grace of b's mark,
// the second deletes it; after a crash the backstop may have started it)
// end where they do after the uninterrupted run.
func TestCrashAfterEveryWriteOfATargetedRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	names := []string{"a", "b", "e"}
	// Each project has its own upstream: refs name its host.
	normal := func(t *testing.T, e *env, up *ociServer) string {
		return strings.ReplaceAll(outcome(t, e.client), up.host, "upstream")
	}

	ref := newEnv(t)
	reg, up := crashWorldOCI(t, ref)
	counter := &crashConn{}
	counter.limit.Store(-1)
	counting := &reconcile.Runner{Store: store.New(crashClient(t, ref.project, counter)), Logger: quiet}
	run, err := counting.ReconcileEntries(ctx, reg, names)
	if err != nil || run.Result != api.ResultSucceeded || run.Counts.Updated != 1 || run.Counts.Marked != 1 || run.Counts.Created != 1 {
		t.Fatalf("uninterrupted targeted run: %s %+v %v", run.Result, run.Counts, err)
	}
	runWrites := counter.commits.Load()
	if c, err := (&reconcile.Committer{Store: store.New(crashClient(t, ref.project, counter)), Logger: quiet}).Commit(ctx); err != nil || c.Changes != 3 {
		t.Fatalf("uninterrupted commit: %+v %v", c, err)
	}
	writes := counter.commits.Load()
	want1 := normal(t, ref, up)
	invariant.Require(t, ref.client, invariant.Options{Settled: true, Feed: true})
	ref.run(reg)
	ref.run(reg)
	want2 := normal(t, ref, up)
	if runWrites < 4 {
		t.Fatalf("the targeted run committed %d times; the test would not test much", runWrites)
	}

	for k := int64(0); k < writes; k++ {
		who := "targeted run"
		if k >= runWrites {
			who = "committer"
		}
		t.Run(fmt.Sprintf("crash after write %d of %d (%s)", k, writes, who), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			reg, up := crashWorldOCI(t, e)
			cc := &crashConn{}
			cc.limit.Store(k)
			// A short lease: the dead run's must lapse for the redelivery.
			dying := &reconcile.Runner{Store: store.New(crashClient(t, e.project, cc)), Logger: quiet, LeaseTTL: time.Millisecond}
			run, err := dying.ReconcileEntries(ctx, reg, names)
			if k < runWrites {
				if err == nil && run.Result == api.ResultSucceeded {
					t.Fatalf("the run survived a crash after write %d", k)
				}
			} else {
				if err != nil || run.Result != api.ResultSucceeded {
					t.Fatalf("the run failed before the crash point: %s %v", run.Result, err)
				}
				_, _ = (&reconcile.Committer{Store: store.New(crashClient(t, e.project, cc)), Logger: quiet}).Commit(ctx)
			}
			invariant.Require(t, e.client, invariant.Options{})
			if k < runWrites {
				time.Sleep(5 * time.Millisecond) // the dead run's lease lapses; not a timing assertion
				next, err := e.runner.ReconcileEntries(ctx, reg, names)
				if err != nil || next.Result != api.ResultSucceeded {
					t.Fatalf("the redelivered event: %s %v (%s)", next.Result, err, next.Error)
				}
				if st := e.status("local"); !st.ManifestTrusted() {
					t.Fatalf("after the recovery the manifest is not trusted: %+v", st.Manifest)
				}
			}
			e.commit()
			invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})
			if got := normal(t, e, up); got != want1 {
				t.Fatalf("after a crash after write %d the recovery converged to\n%s\nwant the uninterrupted run's\n%s", k, got, want1)
			}
			e.run(reg)
			e.run(reg)
			if got := normal(t, e, up); got != want2 {
				t.Fatalf("two more full runs after the recovery:\n%s\nwant\n%s", got, want2)
			}
		})
	}
}

// A full run that fetched before a targeted run wrote, and takes the
// lease after it, fetches again: carried on, it would write the older
// state it fetched over the newer one the targeted run wrote, and the
// event, covered by the targeted run, would never run again.
func TestFullRunOvertakenByAnEventFetchesAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	oci := newGGCR(t)
	oci.pushAll(t, []string{"a", "b"})
	reg := oci.registry(t, "team", 100)
	e.run(reg)

	// The full run stops at its first transaction (the lease) until let go.
	atLease, letGo := make(chan struct{}), make(chan struct{})
	var once sync.Once
	held := emulatortest.FirestoreVia(t, e.project, "", func(ctx context.Context, method string, req, reply any, conn *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/BeginTransaction") {
			once.Do(func() { close(atLease); <-letGo })
		}
		return invoker(ctx, method, req, reply, conn, opts...)
	})
	full := &reconcile.Runner{Store: store.New(held), Logger: quiet, LeaseTTL: time.Minute}
	oci.pushSpec(t, "a", changedSpec("a")) // v2, what the full run fetches
	type result struct {
		run store.Run
		err error
	}
	done := make(chan result)
	go func() {
		run, err := full.Reconcile(ctx, reg)
		done <- result{run, err}
	}()
	<-atLease
	v3 := strings.Replace(specYAML("a"), "the a service", "the a service, v3", 1)
	oci.pushSpec(t, "a", v3)
	if run := e.targeted(reg, "a"); run.Counts.Updated != 1 {
		t.Fatalf("the event's run: %+v", run.Counts)
	}
	wantDigest := e.specs("team")["a"].Digest
	close(letGo)
	// Fetching again, it finds what the event's run left: the listing
	// is unchanged.
	r := <-done
	if r.err != nil || r.run.Result != api.ResultUnchanged {
		t.Fatalf("the overtaken full run: %s %v", r.run.Result, r.err)
	}
	e.commit()
	if got := e.specs("team")["a"]; got.Digest != wantDigest || got.Generation != 2 {
		t.Fatalf("a is %s generation %d after the overtaken full run; the event's run wrote %s (generation 2)", got.Digest, got.Generation, wantDigest)
	}
	// It wrote nothing and recorded nothing: the writer its lease named
	// went back with it, so it is not taken for a run that died.
	if st := e.status("team"); st.Interrupted() || !st.ManifestTrusted() || st.Lease != nil {
		t.Fatalf("after the overtaken run: interrupted %v, manifest trusted %v, lease %+v", st.Interrupted(), st.ManifestTrusted(), st.Lease)
	}
	if run := e.run(reg); run.Result != api.ResultUnchanged || run.Ops != (store.Counts{Reads: 1}) {
		t.Fatalf("the next full run: %s %+v, want unchanged after one read", run.Result, run.Ops)
	}
}
