package reconcile_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// changes returns every committed change, in revision order, as
// "kind:name", and checks that revisions are dense and end at the catalog
// revision.
func (e *env) changes() []string {
	e.t.Helper()
	cs, err := e.store.ChangesAfter(context.Background(), 0, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for i, c := range cs {
		if c.Revision != int64(i+1) {
			e.t.Fatalf("revision %d at position %d: the feed has a gap or a duplicate", c.Revision, i)
		}
		out = append(out, string(c.Kind)+":"+c.Name)
	}
	if rev := e.revision(); rev != int64(len(cs)) {
		e.t.Fatalf("catalog revision %d, %d committed changes", rev, len(cs))
	}
	return out
}

// inRuns reports whether got is the groups one after another, each group
// in any order: a run writes its specs concurrently, so the order of its
// upserts' changes is not fixed (each spec changes at most once a run).
func inRuns(got []string, groups ...[]string) bool {
	for _, g := range groups {
		if len(got) < len(g) {
			return false
		}
		a, b := slices.Clone(got[:len(g)]), slices.Clone(g)
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			return false
		}
		got = got[len(g):]
	}
	return len(got) == 0
}

// publisher records what it is given; fail makes the next call fail.
type publisher struct {
	mu   sync.Mutex
	got  []int64
	fail bool
}

func (p *publisher) PublishChanges(_ context.Context, cs []store.Change) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail {
		p.fail = false
		return errors.New("topic unavailable")
	}
	for _, c := range cs {
		p.got = append(p.got, c.Revision)
	}
	return nil
}

// Every visible change of a run is one committed change, in order; an
// unchanged run commits none; a failed publish is made up by the next run
// that commits.
func TestFeedRecordsEveryVisibleChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pub := &publisher{}
	e.committer.Publisher = pub
	fsys := specFiles("alpha", "beta", "gamma")
	reg := dirRegistry(t, "local", fsys, defaultPolicy)

	run, err := e.runner.Reconcile(context.Background(), reg)
	if err != nil || run.Counts.Changes != 3 {
		t.Fatalf("first run: changes %d, %v", run.Counts.Changes, err)
	}
	if got := e.changes(); len(got) != 0 {
		t.Fatalf("a run numbered its own changes: %v", got)
	}
	if c := e.commit(); c.Changes != 3 || c.Revision != 3 || c.Published != 3 {
		t.Fatalf("the commit after the first run: %+v", c)
	}
	e.run(reg)
	if got := e.changes(); len(got) != 3 {
		t.Fatalf("an unchanged run changed the feed: %v", got)
	}
	pub.fail = true
	fsys["alpha.yaml"] = &fstest.MapFile{Data: []byte(specYAML("alpha", "default", "large"))}
	delete(fsys, "beta.yaml")
	e.run(reg) // updated alpha, marked beta; publishing fails
	if !slices.Equal(pub.got, []int64{1, 2, 3}) {
		t.Fatalf("published %v before the failure", pub.got)
	}
	fsys["beta.yaml"] = &fstest.MapFile{Data: []byte(specYAML("beta"))}
	e.run(reg) // unmarked beta
	if got := e.changes(); !inRuns(got, []string{"created:alpha", "created:beta", "created:gamma"}, []string{"updated:alpha"}, []string{"marked:beta"}, []string{"unmarked:beta"}) {
		t.Fatalf("feed %v", got)
	}
	if !slices.Equal(pub.got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("published %v: the failed publish was not made up", pub.got)
	}
	delete(fsys, "gamma.yaml")
	e.run(reg) // marks gamma
	e.run(reg) // deletes it (unreferenced, marked earlier)
	if got := e.changes(); !slices.Equal(got[len(got)-2:], []string{"marked:gamma", "deleted:gamma"}) {
		t.Fatalf("feed ends %v", got[len(got)-2:])
	}
}

// A run that died after its spec writes leaves pending changes; the next
// run commits them, so the feed never misses a change that is visible.
func TestFeedCommitsWhatAnInterruptedRunLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	fsys := specFiles("alpha")
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	e.run(reg)
	// beta appears upstream; a run writes it and dies before committing.
	fsys["beta.yaml"] = &fstest.MapFile{Data: []byte(specYAML("beta"))}
	listing, err := reg.Source.Fetch(ctx, registry.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range reconcile.Candidates("local", listing.Entries) {
		if c.Spec.Name != "beta" {
			continue
		}
		if _, err := e.store.UpsertSpec(ctx, store.Offer{Registry: "local", Entry: c.Entry, Ref: c.Ref, Spec: c.Spec, Digest: c.Digest, Run: "crashed"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.changes(); len(got) != 1 {
		t.Fatalf("a pending change is served: %v", got)
	}
	run, err := e.runner.Reconcile(ctx, reg)
	if err != nil || run.Counts.Created != 0 || run.Counts.Changes != 0 {
		t.Fatalf("next run: %+v %v", run.Counts, err)
	}
	if c := e.commit(); c.Changes != 1 {
		t.Fatalf("the next commit numbered %d changes, want the one the dead run left", c.Changes)
	}
	if got := e.changes(); !slices.Equal(got, []string{"created:alpha", "created:beta"}) {
		t.Fatalf("feed %v", got)
	}
}

// A lease left behind by a run that died means the recorded listing does
// not describe the store: the next run does not take the unchanged path.
func TestLeftLeaseDefeatsTheShortCut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.runner.LeaseTTL = time.Minute
	reg := dirRegistry(t, "local", specFiles("alpha"), defaultPolicy)
	e.run(reg)
	if run := e.run(reg); run.Result != api.ResultUnchanged {
		t.Fatalf("second run %s, want unchanged", run.Result)
	}
	// The dead run's lease, already expired.
	if err := e.store.AcquireLease(ctx, "local", "dead-run", time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	if run := e.run(reg); run.Result != api.ResultSucceeded {
		t.Fatalf("after a dead run: %s, want a full run", run.Result)
	}
	if st := e.status("local"); st.Lease != nil {
		t.Fatalf("lease not released: %+v", st.Lease)
	}
	if run := e.run(reg); run.Result != api.ResultUnchanged {
		t.Fatalf("after the full run: %s, want unchanged", run.Result)
	}
}

// pinPlan runs reg, then provisions instance i1 on the named plan of the
// named spec; it returns the spec as stored and the plan.
func (e *env) pinPlan(reg reconcile.Registry, name, plan string) (store.SpecRecord, spec.Plan) {
	e.t.Helper()
	e.run(reg)
	rec := e.specs(reg.Name)[name]
	sp, err := rec.Spec()
	if err != nil {
		e.t.Fatal(err)
	}
	p, ok := sp.PlanByName(plan)
	if !ok {
		e.t.Fatalf("spec %s has no plan %s", name, plan)
	}
	if _, err := e.store.CreateInstance(context.Background(), store.Instance{ID: "i1", SpecID: rec.ID, PlanID: p.ID}); err != nil {
		e.t.Fatal(err)
	}
	return rec, p
}

// A held-back version is in the feed once with the served spec, the
// generation (maintenance_info) does not move until the version is
// adopted, and a marked spec whose new version is held back comes back.
func TestFeedHeldBackAndAdoption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	fsys := fstest.MapFS{
		"db.yaml":    {Data: []byte(specYAML("db", "small", "large"))},
		"other.yaml": {Data: []byte(specYAML("other"))},
	}
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	rec, large := e.pinPlan(reg, "db", "large")
	sp, _ := rec.Spec()
	small, _ := sp.PlanByName("small")
	// An instance on a plan the new version keeps does not block it.
	if _, err := e.store.CreateInstance(ctx, store.Instance{ID: "i2", SpecID: rec.ID, PlanID: small.ID}); err != nil {
		t.Fatal(err)
	}
	// Gone upstream: marked, kept (referenced).
	delete(fsys, "db.yaml")
	e.run(reg)
	if got := e.specs("local")["db"]; got.State != api.SpecMarked {
		t.Fatalf("state %s, want marked", got.State)
	}
	// Back, but without the plan in use: held back, and unmarked.
	fsys["db.yaml"] = &fstest.MapFile{Data: []byte(specYAML("db", "small"))}
	run := e.run(reg)
	got := e.specs("local")["db"]
	if run.Counts.HeldBack != 1 || run.Counts.Unmarked != 1 || got.State != api.SpecActive || got.Digest != rec.Digest || got.Generation != 1 {
		t.Fatalf("held back while marked: counts %+v, stored %s %s gen %d", run.Counts, got.State, got.Digest, got.Generation)
	}
	if got.HeldBack == nil || !strings.Contains(strings.Join(got.HeldBack.Blockers, ";"), large.ID) || !slices.Equal(got.HeldBack.Instances, []string{"i1"}) {
		t.Fatalf("the spec does not say what blocks the new version: %+v", got.HeldBack)
	}
	if st := e.status("local"); len(st.LastRun.HeldBack) != 1 || !slices.Equal(st.LastRun.HeldBack[0].Instances, []string{"i1"}) {
		t.Fatalf("the status does not name the blocking instance: %+v", st.LastRun.HeldBack)
	}
	e.run(reg) // still held back: no new change
	if feed := e.changes(); !inRuns(feed, []string{"created:db", "created:other"}, []string{"marked:db"}, []string{"unmarked:db"}) {
		t.Fatalf("feed %v", feed)
	}
	cs, _ := e.store.ChangesAfter(ctx, 3, 10)
	if cs[0].HeldBack == nil || cs[0].SpecJSON != rec.SpecJSON {
		t.Fatalf("the unmark does not carry the served version and the hold: %+v", cs[0])
	}
	if _, err := e.store.DeleteInstance(ctx, "i1"); err != nil {
		t.Fatal(err)
	}
	run = e.run(reg)
	got = e.specs("local")["db"]
	if run.Counts.Updated != 1 || got.Generation != 2 || got.HeldBack != nil {
		t.Fatalf("released: counts %+v generation %d held %+v", run.Counts, got.Generation, got.HeldBack)
	}
	if feed := e.changes(); feed[len(feed)-1] != "updated:db" {
		t.Fatalf("adoption not in the feed: %v", feed)
	}
}

// A held-back version on an active spec is one held_back change; when
// upstream goes back to the served version the hold is cleared without a
// catalog change.
func TestFeedHeldBackThenReverted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fsys := fstest.MapFS{"db.yaml": {Data: []byte(specYAML("db", "small", "large"))}}
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	e.pinPlan(reg, "db", "large")
	fsys["db.yaml"] = &fstest.MapFile{Data: []byte(specYAML("db", "small"))}
	e.run(reg)
	e.run(reg)
	fsys["db.yaml"] = &fstest.MapFile{Data: []byte(specYAML("db", "small", "large"))}
	if run := e.run(reg); run.Counts.Repaired != 1 {
		t.Fatalf("revert: %+v", run.Counts)
	}
	if got := e.specs("local")["db"]; got.HeldBack != nil || got.Generation != 1 {
		t.Fatalf("after revert: held %+v generation %d", got.HeldBack, got.Generation)
	}
	if feed := e.changes(); !slices.Equal(feed, []string{"created:db", "held_back:db"}) {
		t.Fatalf("feed %v", feed)
	}
}
