package store_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

func offer(t *testing.T, registry, name string, plans ...string) store.Offer {
	t.Helper()
	s := &spec.Spec{Name: name, Description: "d"}
	for _, p := range plans {
		s.Plans = append(s.Plans, spec.Plan{Name: p, Description: "p"})
	}
	if err := spec.Validate(s); err != nil {
		t.Fatal(err)
	}
	spec.AssignIDs(s, registry)
	return store.Offer{Registry: registry, Entry: name, Ref: "ref", Spec: s, Digest: spec.Digest(s), Run: "run"}
}

func TestUpsertOutcomes(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	o := offer(t, "r1", "db", "small")
	steps := []struct {
		name string
		o    store.Offer
		want store.UpsertOutcome
	}{
		{"new", o, store.Created},
		{"same", o, store.Unchanged},
		{"changed", offer(t, "r1", "db", "small", "large"), store.Updated},
	}
	for _, s := range steps {
		res, err := st.UpsertSpec(ctx, s.o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != s.want {
			t.Fatalf("%s: outcome %s, want %s", s.name, res.Outcome, s.want)
		}
	}
	// Another registry offering the same id does not take it over.
	other := offer(t, "r1", "db", "small")
	other.Registry = "r2"
	res, err := st.UpsertSpec(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != store.Conflict || res.Owner != "r1" {
		t.Fatalf("conflict: %+v", res)
	}
	rec, err := st.GetSpec(ctx, o.Spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Registry != "r1" || len(mustSpec(t, rec).Plans) != 2 {
		t.Fatalf("record after conflict: %+v", rec)
	}
}

func mustSpec(t *testing.T, rec *store.SpecRecord) *spec.Spec {
	t.Helper()
	s, err := rec.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMarkAndUnmark(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	o := offer(t, "r1", "db", "small")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.MarkSpec(ctx, "r2", o.Spec.ID, "run"); err != nil || ok {
		t.Fatalf("a registry marked a spec it does not own: %v %v", ok, err)
	}
	if ok, err := st.MarkSpec(ctx, "r1", o.Spec.ID, "run"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	if ok, _ := st.MarkSpec(ctx, "r1", o.Spec.ID, "run"); ok {
		t.Fatal("marking twice reported a second mark")
	}
	// Marked in this run: not deletable by the same run.
	if out, _, err := st.DeleteMarked(ctx, "r1", o.Spec.ID, "run", time.Now()); err != nil || out != store.Skipped {
		t.Fatalf("same-run delete: %s %v", out, err)
	}
	// Marked after the registry's last successful run finished: by a run
	// that did not finish, which is no earlier run.
	rec, _ := st.GetSpec(ctx, o.Spec.ID)
	if out, _, err := st.DeleteMarked(ctx, "r1", o.Spec.ID, "next-run", rec.MarkedAt.Add(-time.Second)); err != nil || out != store.Skipped {
		t.Fatalf("delete of a spec marked by an unfinished run: %s %v", out, err)
	}
	res, err := st.UpsertSpec(ctx, o)
	if err != nil || res.Outcome != store.Unmarked {
		t.Fatalf("re-offer: %+v %v", res, err)
	}
	rec, _ = st.GetSpec(ctx, o.Spec.ID)
	if rec.State != api.SpecActive || rec.MarkedRun != "" || !rec.MarkedAt.IsZero() {
		t.Fatalf("unmarked record keeps mark fields: %+v", rec)
	}
}

func TestInstances(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	o := offer(t, "r1", "db", "small", "large")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	plan := o.Spec.Plans[1].ID
	inst := store.Instance{ID: "i1", SpecID: o.Spec.ID, PlanID: plan, Context: map[string]any{"platform": "kubernetes"}}
	res, err := st.CreateInstance(ctx, inst)
	if err != nil || res.Existed {
		t.Fatalf("create: %+v %v", res, err)
	}
	res, err = st.CreateInstance(ctx, inst)
	if err != nil || !res.Existed {
		t.Fatalf("identical create must report the existing record: %+v %v", res, err)
	}
	conflicting := inst
	conflicting.PlanID = o.Spec.Plans[0].ID
	if _, err := st.CreateInstance(ctx, conflicting); !failure.Is(err, failure.Conflict) {
		t.Fatalf("conflicting create: %v", err)
	}
	for _, bad := range []store.Instance{
		{ID: "i2", SpecID: "no-such-spec", PlanID: plan},
		{ID: "i3", SpecID: o.Spec.ID, PlanID: "no-such-plan"},
	} {
		if _, err := st.CreateInstance(ctx, bad); !failure.Is(err, failure.NotFound) {
			t.Fatalf("create %+v: %v, want not found", bad, err)
		}
	}
	if _, err := st.CreateInstance(ctx, store.Instance{ID: "i4"}); !failure.Is(err, failure.Invalid) {
		t.Fatalf("incomplete instance: %v", err)
	}
	rec, _ := st.GetSpec(ctx, o.Spec.ID)
	if rec.Instances != 1 {
		t.Fatalf("instance count %d, want 1 (repeats and failures must not count)", rec.Instances)
	}
	got, err := st.GetInstance(ctx, "i1")
	if err != nil || got.PlanID != plan || got.Context["platform"] != "kubernetes" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := st.DeleteInstance(ctx, "i1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteInstance(ctx, "i1"); !failure.Is(err, failure.NotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := st.GetInstance(ctx, "i1"); !failure.Is(err, failure.NotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	rec, _ = st.GetSpec(ctx, o.Spec.ID)
	if rec.Instances != 0 {
		t.Fatalf("instance count %d after delete", rec.Instances)
	}
}

func TestConcurrentInstancesCountExactly(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	o := offer(t, "r1", "db", "small")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = st.CreateInstance(ctx, store.Instance{ID: string(rune('a' + i)), SpecID: o.Spec.ID, PlanID: o.Spec.Plans[0].ID})
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rec, _ := st.GetSpec(ctx, o.Spec.ID)
	if rec.Instances != n {
		t.Fatalf("instance count %d, want %d", rec.Instances, n)
	}
}

// Spec writes leave pending changes that no reader sees; committing them
// numbers them densely in write order and moves the catalog revision.
func TestChangesArePendingUntilCommitted(t *testing.T) {
	ctx := context.Background()
	ops := &store.Ops{}
	st := store.New(checked(t)).WithOps(ops)
	if rev, err := st.Revision(ctx); err != nil || rev != 0 {
		t.Fatalf("initial revision %d %v", rev, err)
	}
	a, b := offer(t, "r1", "alpha", "small"), offer(t, "r1", "beta", "small")
	for _, o := range []store.Offer{a, b} {
		if _, err := st.UpsertSpec(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if got := ops.Snapshot().Writes; got != 4 {
		t.Fatalf("two creates wrote %d documents, want 4 (each spec and its change)", got)
	}
	if cs, err := st.ChangesAfter(ctx, 0, 10); err != nil || len(cs) != 0 {
		t.Fatalf("pending changes are visible: %v %v", cs, err)
	}
	if ok, err := st.MarkSpec(ctx, "r1", a.Spec.ID, "run-2"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	committed := commit(t, st)
	var kinds []string
	for i, c := range committed {
		if c.Revision != int64(i+1) || c.Pending() || !c.PendingAt.IsZero() || c.ExpiresAt.IsZero() {
			t.Fatalf("change %d committed as %+v", i, c)
		}
		kinds = append(kinds, string(c.Kind)+":"+c.Name)
	}
	if want := []string{"created:alpha", "created:beta", "marked:alpha"}; !slices.Equal(kinds, want) {
		t.Fatalf("committed %v, want %v", kinds, want)
	}
	if committed[0].SpecJSON == "" || committed[0].Generation != 1 || committed[2].InCatalog() {
		t.Fatalf("content: created %+v, marked %+v", committed[0], committed[2])
	}
	if rev, _ := st.Revision(ctx); rev != 3 {
		t.Fatalf("revision %d after three changes", rev)
	}
	if again, err := st.CommitPending(ctx, time.Hour); err != nil || again != (store.Committed{Revision: 3}) {
		t.Fatalf("second commit: %+v %v", again, err)
	}
	after, err := st.ChangesAfter(ctx, 1, 10)
	if err != nil || len(after) != 2 || after[0].Revision != 2 || after[1].Revision != 3 {
		t.Fatalf("changes after 1: %+v %v", after, err)
	}
}

// Commits running at the same time (a redelivered commit request beside
// the first) never share or skip a revision.
func TestConcurrentCommitsAreDense(t *testing.T) {
	ctx := context.Background()
	client, _, end := checkedProject(t)
	// The commits number everything written: the project ends settled.
	end.Settled, end.Feed = true, true
	st := store.New(client)
	regs := []string{"r1", "r2", "r3"}
	for _, r := range regs {
		for _, n := range []string{"a", "b", "c"} {
			if _, err := st.UpsertSpec(ctx, offer(t, r, r+"-"+n, "p")); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(regs))
	for range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.CommitPending(ctx, time.Hour)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all, err := st.ChangesAfter(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 9 {
		t.Fatalf("%d committed changes, want 9", len(all))
	}
	for i, c := range all {
		if c.Revision != int64(i+1) {
			t.Fatalf("revisions not dense: position %d has %d", i, c.Revision)
		}
	}
	if rev, _ := st.Revision(ctx); rev != 9 {
		t.Fatalf("catalog revision %d, want 9", rev)
	}
}

func TestPublishedMarkAndPrune(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	for _, n := range []string{"a", "b"} {
		if _, err := st.UpsertSpec(ctx, offer(t, "r1", n, "p")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CommitPending(ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	un, err := st.Unpublished(ctx, 10)
	if err != nil || len(un) != 2 {
		t.Fatalf("unpublished %v %v", un, err)
	}
	if err := st.MarkPublished(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkPublished(ctx, 1); err != nil { // never moves back
		t.Fatal(err)
	}
	if un, err := st.Unpublished(ctx, 10); err != nil || len(un) != 0 {
		t.Fatalf("after publishing: %v %v", un, err)
	}
	n, err := st.PruneChanges(ctx, time.Now().Add(time.Minute), 100)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d %v, want 2", n, err)
	}
	if cs, _ := st.ChangesAfter(ctx, 0, 10); len(cs) != 0 {
		t.Fatalf("pruned changes still served: %v", cs)
	}
	if rev, _ := st.Revision(ctx); rev != 2 {
		t.Fatalf("pruning moved the revision to %d", rev)
	}
}

// A held-back version is a change once; a marked spec that is held back
// is offered again, so it is unmarked; adopting clears the hold.
func TestHoldBack(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	o := offer(t, "r1", "db", "small")
	if _, err := st.UpsertSpec(ctx, o); err != nil {
		t.Fatal(err)
	}
	h := store.HeldBackSpec{SpecID: o.Spec.ID, Name: "db", Digest: "sha256:next", Blockers: []string{"plan x is used by 1 instances"}}
	for i, want := range []store.HoldOutcome{store.HeldNew, store.HeldSame} {
		if got, err := st.HoldBack(ctx, "r1", h, "run"); err != nil || got != want {
			t.Fatalf("hold %d: %s %v, want %s", i, got, err, want)
		}
	}
	if got, _ := st.HoldBack(ctx, "other", h, "run"); got != store.HeldSkipped {
		t.Fatalf("another registry held back a spec it does not own: %s", got)
	}
	if ok, err := st.MarkSpec(ctx, "r1", o.Spec.ID, "run"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	if got, _ := st.HoldBack(ctx, "r1", h, "run"); got != store.HeldUnmarked {
		t.Fatalf("held back while marked: %s", got)
	}
	rec, _ := st.GetSpec(ctx, o.Spec.ID)
	if rec.State != api.SpecActive || rec.HeldBack == nil || rec.HeldBack.Digest != h.Digest || rec.Generation != 1 {
		t.Fatalf("after hold while marked: %+v", rec)
	}
	cs := commit(t, st)
	var kinds []api.ChangeKind
	for _, c := range cs {
		kinds = append(kinds, c.Kind)
	}
	if want := []api.ChangeKind{api.ChangeCreated, api.ChangeHeldBack, api.ChangeMarked, api.ChangeUnmarked}; !slices.Equal(kinds, want) {
		t.Fatalf("changes %v, want %v", kinds, want)
	}
	if last := cs[len(cs)-1]; !last.InCatalog() || last.HeldBack == nil {
		t.Fatalf("the unmark by hold-back does not carry the served spec and the hold: %+v", last)
	}
	next := offer(t, "r1", "db", "small", "large")
	if res, err := st.UpsertSpec(ctx, next); err != nil || res.Outcome != store.Updated {
		t.Fatalf("adopt: %v %v", res, err)
	}
	rec, _ = st.GetSpec(ctx, o.Spec.ID)
	if rec.HeldBack != nil || rec.Generation != 2 {
		t.Fatalf("adopted version: held_back %+v generation %d", rec.HeldBack, rec.Generation)
	}
}

func TestRegistryStatusRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	empty, err := st.RegistryStatus(ctx, "never-run")
	if err != nil || empty.Name != "never-run" || empty.ListingDigest != "" {
		t.Fatalf("unknown registry status %+v %v", empty, err)
	}
	run := store.Run{ID: "r", Result: api.ResultFetchFailed, Error: "boom"}
	if err := st.RecordRun(ctx, "a", run, false, "", "", 0); err != nil {
		t.Fatal(err)
	}
	run2 := store.Run{ID: "r2", Result: api.ResultSucceeded, Counts: store.RunCounts{Created: 2}}
	if err := st.RecordRun(ctx, "a", run2, true, "sha256:x", "etag", 1); err != nil {
		t.Fatal(err)
	}
	if err := st.SetContested(ctx, "a", "b", []string{"id1"}); err != nil {
		t.Fatal(err)
	}
	got, err := st.RegistryStatus(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.LastRun.Error != "" || got.LastRun.Counts.Created != 2 || got.ListingDigest != "sha256:x" || got.Marked != 1 {
		t.Fatalf("status %+v: the second run must replace the first whole", got)
	}
	if len(got.ContestedBy["b"]) != 1 {
		t.Fatalf("contested_by %+v", got.ContestedBy)
	}
	// A later run of a keeps what b wrote; b withdrawing removes it.
	if err := st.RecordRun(ctx, "a", run2, true, "sha256:x", "etag", 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.RegistryStatus(ctx, "a"); len(got.ContestedBy["b"]) != 1 {
		t.Fatal("a's own run erased another registry's note")
	}
	if err := st.SetContested(ctx, "a", "b", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.RegistryStatus(ctx, "a"); len(got.ContestedBy) != 0 {
		t.Fatalf("withdrawn note remains: %+v", got.ContestedBy)
	}
	all, err := st.RegistryStatuses(ctx)
	if err != nil || len(all) != 1 || all[0].Name != "a" {
		t.Fatalf("statuses %+v %v", all, err)
	}
}

// Two commits at once (a commit request redelivered past its ack deadline
// while the first delivery still runs: the emulator does that, see
// pkg/queue's ordering tests): the one that read the pending changes
// first finds them numbered by the other when it writes,
// its precondition fails, it reads again and finds nothing left. Every
// change is numbered once and the revisions stay dense.
func TestCommitRaceNumbersEachChangeOnce(t *testing.T) {
	ctx := context.Background()
	client, project, end := checkedProject(t)
	// The commits number everything written: the project ends settled.
	end.Settled, end.Feed = true, true
	other := store.New(client)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := other.UpsertSpec(ctx, offer(t, "r1", n, "p")); err != nil {
			t.Fatal(err)
		}
	}
	// The racing commit runs when the slow one begins its transaction:
	// after it read the pending changes, before it writes them.
	var once sync.Once
	var raced store.Committed
	var raceErr error
	slow := store.New(emulatortest.FirestoreVia(t, project, "", func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/BeginTransaction") {
			once.Do(func() { raced, raceErr = other.CommitPending(ctx, time.Hour) })
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	got, err := slow.CommitPending(ctx, time.Hour)
	if err != nil || raceErr != nil {
		t.Fatalf("slow commit: %v; racing commit: %v", err, raceErr)
	}
	if raced.Changes != 3 || got.Changes != 0 || got.Revision != 3 {
		t.Fatalf("the racing commit numbered %d, the slow one %d (ending at revision %d); want 3, 0 and 3", raced.Changes, got.Changes, got.Revision)
	}
	all, err := other.ChangesAfter(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range all {
		if c.Revision != int64(i+1) {
			t.Fatalf("revisions not dense: position %d has %d", i, c.Revision)
		}
	}
	if rev, _ := other.Revision(ctx); rev != 3 || len(all) != 3 {
		t.Fatalf("catalog revision %d with %d changes, want 3 and 3", rev, len(all))
	}
}

// commit numbers every pending change and returns the ones it numbered,
// in revision order, checking what CommitPending says it did.
func commit(t *testing.T, st *store.Store) []store.Change {
	t.Helper()
	ctx := context.Background()
	before, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.CommitPending(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := st.ChangesAfter(ctx, before, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != c.Changes || c.Revision != before+int64(c.Changes) {
		t.Fatalf("commit says %d changes up to revision %d; %d were committed after revision %d", c.Changes, c.Revision, len(cs), before)
	}
	return cs
}
