package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
)

// crashAfter is a Firestore client on the emulator whose gRPC connection
// lets `limit` Commit calls through (every write of the store is one
// commit: a transaction or a single write) and fails every later one, as
// if the process had died after its k-th write. limit < 0 never fails;
// commits counts the commits attempted.
type crashConn struct {
	limit   atomic.Int64
	commits atomic.Int64
}

func crashClient(t *testing.T, project string, cc *crashConn) *firestore.Client {
	t.Helper()
	return emulatortest.FirestoreVia(t, project, "", func(ctx context.Context, method string, req, reply any, conn *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/Commit") {
			n := cc.commits.Add(1)
			if l := cc.limit.Load(); l >= 0 && n > l {
				return grpcstatus.Error(codes.Internal, "injected crash: the process died")
			}
		}
		return invoker(ctx, method, req, reply, conn, opts...)
	})
}

// crashWorld is the state before the run under test: five specs, one of
// them (delta) marked by an earlier run and unreferenced, one (beta) with
// an instance. The run under test updates beta, marks gamma, deletes
// delta and creates echo.
func crashWorld(t *testing.T, client *firestore.Client) (fstest.MapFS, reconcile.Registry) {
	t.Helper()
	ctx := context.Background()
	fsys := specFiles("alpha", "beta", "gamma", "delta", "zeta")
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	st := store.New(client)
	if _, err := reconcileAndCommit(ctx, client, reg); err != nil {
		t.Fatal(err)
	}
	recs, err := st.OwnedSpecs(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Name == "beta" {
			sp, _ := r.Spec()
			if _, err := st.CreateInstance(ctx, store.Instance{ID: "inst-beta", SpecID: r.ID, PlanID: sp.Plans[0].ID}); err != nil {
				t.Fatal(err)
			}
		}
	}
	delete(fsys, "delta.yaml")
	if run, err := reconcileAndCommit(ctx, client, reg); err != nil || run.Counts.Marked != 1 {
		t.Fatalf("setup run: %+v %v", run.Counts, err)
	}
	// The change the run under test applies.
	fsys["beta.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(specYAML("beta"), "the beta service", "the new beta service", 1))}
	delete(fsys, "gamma.yaml")
	fsys["echo.yaml"] = &fstest.MapFile{Data: []byte(specYAML("echo"))}
	return fsys, reg
}

// outcome is the part of a project's state a run decides: which specs
// exist, in which state, with which content and usage; the instances;
// what the feed says about each spec last.
func outcome(t *testing.T, client *firestore.Client) string {
	t.Helper()
	st, err := invariant.Read(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for id, r := range st.Specs {
		lines = append(lines, fmt.Sprintf("spec %s %s %s %s gen=%d inst=%d plans=%v err=%q", id, r.Name, r.State, r.Digest, r.Generation, r.Instances, r.PlanInstances, r.EntryError))
	}
	for id, i := range st.Instances {
		lines = append(lines, fmt.Sprintf("instance %s %s %s", id, i.SpecID, i.PlanID))
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
	reg := st.Registries["local"]
	lines = append(lines, fmt.Sprintf("registry marked=%d result=%s", reg.Marked, reg.LastRun.Result))
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// reconcileAndCommit runs reg once on client, then the committer, as a
// bootstrap of one registry does.
func reconcileAndCommit(ctx context.Context, client *firestore.Client, reg reconcile.Registry) (store.Run, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	run, err := (&reconcile.Runner{Store: store.New(client), Logger: quiet}).Reconcile(ctx, reg)
	if err != nil {
		return run, err
	}
	_, err = (&reconcile.Committer{Store: store.New(client), Logger: quiet}).Commit(ctx)
	return run, err
}

// publishedOnce reduces what a publisher got to the first time each
// revision went out: at least once means repeats are allowed, gaps and
// reorderings are not.
func publishedOnce(got []int64) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, r := range got {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// Crashes: the work under test (a run, then the commit after it) dies
// after its k-th write, for every k it has (the injection is a gRPC
// interceptor on a real client: no store hook). A run that dies is
// followed by the next run and a commit; a committer that dies, by the
// next commit alone. Either way the recovery ends exactly where the
// uninterrupted run and commit would have, every revision is published
// at least once and in order, one more run and commit reach exactly the
// state of two uninterrupted ones, and every intermediate state passes
// the checker.
func TestCrashAfterEveryWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	runner := func(c *firestore.Client) *reconcile.Runner {
		return &reconcile.Runner{Store: store.New(c), Logger: logger}
	}
	committer := func(c *firestore.Client, pub *publisher) *reconcile.Committer {
		return &reconcile.Committer{Store: store.New(c), Logger: logger, Publisher: pub}
	}

	// The reference: the run and the commit uninterrupted, counting
	// their commits.
	refClient, refProject := emulatortest.FirestoreProject(t)
	_, reg := crashWorld(t, refClient)
	counter := &crashConn{}
	counter.limit.Store(-1)
	counting := crashClient(t, refProject, counter)
	run, err := runner(counting).Reconcile(ctx, reg)
	if err != nil || run.Result != api.ResultSucceeded {
		t.Fatalf("uninterrupted run: %s %v", run.Result, err)
	}
	if run.Counts.Updated != 1 || run.Counts.Marked != 1 || run.Counts.Deleted != 1 || run.Counts.Created != 1 {
		t.Fatalf("uninterrupted run did not do all four kinds of work: %+v", run.Counts)
	}
	runWrites := counter.commits.Load()
	refPub := &publisher{}
	if c, err := committer(counting, refPub).Commit(ctx); err != nil || c.Changes != 4 || c.Published == 0 {
		t.Fatalf("uninterrupted commit: %+v %v", c, err)
	}
	writes := counter.commits.Load()
	want1 := outcome(t, refClient)
	wantPublished := refPub.got
	invariant.Require(t, refClient, invariant.Options{Settled: true, Feed: true})
	// And the run after it: it deletes what the first marked.
	if run, err := reconcileAndCommit(ctx, refClient, reg); err != nil || run.Counts.Deleted != 1 {
		t.Fatalf("second uninterrupted run: %+v %v", run.Counts, err)
	}
	want2 := outcome(t, refClient)
	if runWrites < 5 || writes-runWrites < 2 {
		t.Fatalf("the run committed %d times, the committer %d; the test would not test much", runWrites, writes-runWrites)
	}

	for k := int64(0); k < writes; k++ {
		who := "run"
		if k >= runWrites {
			who = "committer"
		}
		t.Run(fmt.Sprintf("crash after write %d of %d (%s)", k, writes, who), func(t *testing.T) {
			t.Parallel()
			client, project := emulatortest.FirestoreProject(t)
			_, reg := crashWorld(t, client)
			cc := &crashConn{}
			cc.limit.Store(k)
			crashing := crashClient(t, project, cc)
			pub := &publisher{}
			run, err := runner(crashing).Reconcile(ctx, reg)
			if k < runWrites {
				if err == nil && run.Result == api.ResultSucceeded {
					t.Fatalf("the run survived a crash after write %d", k)
				}
			} else {
				if err != nil || run.Result != api.ResultSucceeded {
					t.Fatalf("the run failed before the crash point: %s %v", run.Result, err)
				}
				// Dying while recording what it published is not an error
				// of the commit (the changes are committed; the next
				// commit publishes them again): only the state says.
				_, _ = committer(crashing, pub).Commit(ctx)
			}
			// Right after the crash nothing is settled, but nothing is
			// broken either.
			invariant.Require(t, client, invariant.Options{})
			if k < runWrites {
				next, err := runner(client).Reconcile(ctx, reg)
				if err != nil {
					t.Fatalf("the run after the crash: %v", err)
				}
				if next.Result != api.ResultSucceeded {
					t.Fatalf("the run after the crash: %s (%s)", next.Result, next.Error)
				}
			}
			if _, err := committer(client, pub).Commit(ctx); err != nil {
				t.Fatalf("the commit after the crash: %v", err)
			}
			invariant.Require(t, client, invariant.Options{Settled: true, Feed: true})
			// A crashed run's marks do not count as an earlier run
			// (DeleteMarked's markedBefore): the recovery ends exactly
			// where one uninterrupted run and commit would have.
			if got := outcome(t, client); got != want1 {
				t.Fatalf("after a crash after write %d the recovery converged to\n%s\nwant the uninterrupted run's\n%s", k, got, want1)
			}
			if got := publishedOnce(pub.got); fmt.Sprint(got) != fmt.Sprint(wantPublished) {
				t.Fatalf("published %v (first times %v), want every revision %v at least once, in order", pub.got, got, wantPublished)
			}
			if _, err := reconcileAndCommit(ctx, client, reg); err != nil {
				t.Fatal(err)
			}
			invariant.Require(t, client, invariant.Options{Settled: true, Feed: true})
			if got := outcome(t, client); got != want2 {
				t.Fatalf("one more run after the recovery: \n%s\nwant two uninterrupted runs'\n%s", got, want2)
			}
		})
	}
}

// pendingAcrossBatches builds, on client, a project whose committed feed
// holds the two registries' first imports and which then has ten changes
// pending, each written by a run of its own (one spec write each, so no
// two share a commit time and the order they are numbered in is the same
// in every project): updates, creates, marks, a delete and an unmark,
// alternating between the registries. No commit runs after them.
func pendingAcrossBatches(t *testing.T, client *firestore.Client) {
	t.Helper()
	ctx := context.Background()
	fa, fb := specFiles("a1", "a2", "a3", "a4"), specFiles("b1", "b2", "b3", "b4")
	a, b := dirRegistry(t, "a", fa, defaultPolicy), dirRegistry(t, "b", fb, defaultPolicy)
	for _, reg := range []reconcile.Registry{a, b} {
		if _, err := reconcileAndCommit(ctx, client, reg); err != nil {
			t.Fatal(err)
		}
	}
	changed := func(fsys fstest.MapFS, name string) {
		fsys[name+".yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(specYAML(name), "the "+name+" service", "the new "+name+" service", 1))}
	}
	runner := &reconcile.Runner{Store: store.New(client), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	steps := []struct {
		reg  reconcile.Registry
		edit func()
		kind api.ChangeKind
	}{
		{a, func() { changed(fa, "a1") }, api.ChangeUpdated},
		{b, func() { fb["b5.yaml"] = &fstest.MapFile{Data: []byte(specYAML("b5"))} }, api.ChangeCreated},
		{a, func() { delete(fa, "a2.yaml") }, api.ChangeMarked},
		{b, func() { changed(fb, "b1") }, api.ChangeUpdated},
		{a, func() {}, api.ChangeDeleted}, // a2, marked by an earlier finished run
		{b, func() { delete(fb, "b2.yaml") }, api.ChangeMarked},
		{a, func() { fa["a5.yaml"] = &fstest.MapFile{Data: []byte(specYAML("a5"))} }, api.ChangeCreated},
		{b, func() { fb["b2.yaml"] = &fstest.MapFile{Data: []byte(specYAML("b2"))} }, api.ChangeUnmarked},
		{a, func() { changed(fa, "a3") }, api.ChangeUpdated},
		{b, func() { changed(fb, "b3") }, api.ChangeUpdated},
	}
	for i, s := range steps {
		// Each change at a commit time of its own, as in Firestore (see
		// ServerClockMoves): ties would let the committer hold changes
		// back to the next batch, and this test counts whole batches.
		emulatortest.ServerClockMoves(t, client)
		s.edit()
		run, err := runner.Reconcile(ctx, s.reg)
		if err != nil || run.Result != api.ResultSucceeded || run.Counts.Changes != 1 {
			t.Fatalf("pending step %d (%s of %s): %s %+v %v", i, s.kind, s.reg.Name, run.Result, run.Counts, err)
		}
	}
}

// committedFeed is the committed feed, in revision order: what each
// revision says happened to which spec.
func committedFeed(t *testing.T, client *firestore.Client) (feed []string, pending int) {
	t.Helper()
	st, err := invariant.Read(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	cs := append([]invariant.ChangeDoc(nil), st.Changes...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].Revision < cs[j].Revision })
	for _, c := range cs {
		if c.Pending() {
			pending++
			continue
		}
		feed = append(feed, fmt.Sprintf("%d %s %s/%s gen=%d", c.Revision, c.Kind, c.Registry, c.Name, c.Generation))
	}
	return feed, pending
}

// writeOrder is the feed an uninterrupted commit makes of the changes
// pending on client, numbered from revision after: in the order they were
// written (pending_at, then the create time of their documents, then the
// writer's clock), as the committer orders them.
func writeOrder(t *testing.T, client *firestore.Client, after int) []string {
	t.Helper()
	docs, err := client.Collection(store.ChangesCollection).OrderBy("pending_at", firestore.Asc).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	type written struct {
		store.Change
		created time.Time
	}
	ws := make([]written, len(docs))
	for i, d := range docs {
		if err := d.DataTo(&ws[i].Change); err != nil {
			t.Fatal(err)
		}
		ws[i].created = d.CreateTime
	}
	sort.SliceStable(ws, func(i, j int) bool {
		switch {
		case !ws[i].PendingAt.Equal(ws[j].PendingAt):
			return ws[i].PendingAt.Before(ws[j].PendingAt)
		case !ws[i].created.Equal(ws[j].created):
			return ws[i].created.Before(ws[j].created)
		}
		return ws[i].At.Before(ws[j].At)
	})
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = fmt.Sprintf("%d %s %s/%s gen=%d", after+i+1, w.Kind, w.Registry, w.Name, w.Generation)
	}
	return out
}

// A committer that dies part-way through a commit of several batches:
// ten changes pending, three to a commit transaction (WithCommitBatch;
// production numbers 400), so the commit is four batches and the write
// that records what it published. For every k, the committer dies after
// its k-th write: it leaves exactly its first k batches numbered, in
// write order, and the rest pending, every state passes the checker, and
// the next commit alone completes exactly: revisions dense, each change
// numbered once, meta/catalog at the last, the feed revision for revision
// what an uninterrupted commit makes of the same pending changes (as the
// uninterrupted commit of the reference project does), and every
// revision published at least once, in order.
func TestCrashAfterEveryWriteAcrossBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const pendingChanges, batch = 10, 3
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	committer := func(c *firestore.Client, pub *publisher) *reconcile.Committer {
		return &reconcile.Committer{Store: store.New(c).WithCommitBatch(batch), Logger: logger, Publisher: pub}
	}
	// world is a project with the changes pending: its feed so far, and
	// the feed an uninterrupted commit makes of it.
	world := func(t *testing.T, client *firestore.Client) (before, want []string) {
		t.Helper()
		pendingAcrossBatches(t, client)
		before, pending := committedFeed(t, client)
		if pending != pendingChanges {
			t.Fatalf("%d changes pending, want %d", pending, pendingChanges)
		}
		return before, append(before, writeOrder(t, client, len(before))...)
	}

	refClient, refProject := emulatortest.FirestoreProject(t)
	_, want := world(t, refClient)
	counter := &crashConn{}
	counter.limit.Store(-1)
	refPub := &publisher{}
	c, err := committer(crashClient(t, refProject, counter), refPub).Commit(ctx)
	if err != nil || c.Changes != pendingChanges {
		t.Fatalf("uninterrupted commit: %+v %v", c, err)
	}
	// One write a batch and one for the published mark.
	writes := counter.commits.Load()
	if batches := int64((pendingChanges + batch - 1) / batch); writes != batches+1 || batches < 3 {
		t.Fatalf("the commit wrote %d times for %d batches; want one per batch and the published mark", writes, batches)
	}
	invariant.Require(t, refClient, invariant.Options{Settled: true, Feed: true})
	if got, _ := committedFeed(t, refClient); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the uninterrupted commit made the feed\n%s\nwant the changes in the order they were written\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantPublished := refPub.got

	for k := int64(0); k < writes; k++ {
		t.Run(fmt.Sprintf("committer dies after write %d of %d", k, writes), func(t *testing.T) {
			t.Parallel()
			client, project := emulatortest.FirestoreProject(t)
			before, want := world(t, client)
			cc := &crashConn{}
			cc.limit.Store(k)
			pub := &publisher{}
			// Dying while recording what it published is not an error of
			// the commit (every change is numbered): only the state says.
			_, _ = committer(crashClient(t, project, cc), pub).Commit(ctx)
			invariant.Require(t, client, invariant.Options{})
			// What it numbered is its first k batches, whole and in
			// order: a prefix of the uninterrupted feed, and everything
			// else pending.
			got, left := committedFeed(t, client)
			numbered := min(k*batch, pendingChanges)
			if int64(len(got)-len(before)) != numbered || int64(left) != pendingChanges-numbered || strings.Join(got, "\n") != strings.Join(want[:min(len(got), len(want))], "\n") {
				t.Fatalf("after dying after write %d: %d pending, the feed\n%s\nwant %d numbered (whole batches of %d), a prefix of the uninterrupted commit's\n%s", k, left, strings.Join(got, "\n"), numbered, batch, strings.Join(want, "\n"))
			}
			if _, err := committer(client, pub).Commit(ctx); err != nil {
				t.Fatalf("the commit after the crash: %v", err)
			}
			invariant.Require(t, client, invariant.Options{Settled: true, Feed: true})
			if got, _ := committedFeed(t, client); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("after a crash after write %d the feed is\n%s\nwant the uninterrupted commit's\n%s", k, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if got := publishedOnce(pub.got); fmt.Sprint(got) != fmt.Sprint(wantPublished) {
				t.Fatalf("published %v (first times %v), want every revision %v at least once, in order", pub.got, got, wantPublished)
			}
		})
	}
}
