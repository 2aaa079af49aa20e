package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
	"google.golang.org/grpc"
)

// One commit numbers every registry's pending changes in the order they
// were written, across batches (more than one transaction's worth), so a
// spec's later change always gets the later revision.
func TestCommitPendingFollowsWriteOrderAcrossBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(checked(t))
	var offers []store.Offer
	for i := range 430 {
		offers = append(offers, offer(t, "r1", fmt.Sprintf("s%03d", i), "p"))
	}
	batches, err := store.CreateBatches(offers)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if _, err := st.CreateSpecs(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// Then another registry, then the first again: a mark of the first
	// spec created, whose change lands in the second batch.
	if _, err := st.UpsertSpec(ctx, offer(t, "r2", "other", "p")); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.MarkSpec(ctx, "r1", offers[0].Spec.ID, "run-2"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	cs := commit(t, st)
	if len(cs) != 432 {
		t.Fatalf("committed %d changes, want 432", len(cs))
	}
	for i := 1; i < len(cs); i++ {
		if cs[i].WrittenAt.Before(cs[i-1].WrittenAt) {
			t.Fatalf("revision %d (%s %s written at %s) was written before revision %d (at %s)", cs[i].Revision, cs[i].Kind, cs[i].Name, cs[i].WrittenAt, cs[i-1].Revision, cs[i-1].WrittenAt)
		}
	}
	if last, prev := cs[431], cs[430]; last.Kind != api.ChangeMarked || last.Name != "s000" || prev.Registry != "r2" {
		t.Fatalf("the last two revisions are %s %s/%s and %s %s/%s; want r2's create, then the mark of s000", prev.Kind, prev.Registry, prev.Name, last.Kind, last.Registry, last.Name)
	}
}

// A batch never ends inside changes of several commits that tie on
// pending_at, as the emulator's millisecond timestamps make them tie: the
// query orders a tie by document id, and a batch cut through one would
// number a change committed later before one committed earlier. Four
// pending changes, each its own commit: "alone", then three of one spec
// (created, marked, unmarked) that tie on pending_at, their ids in the
// reverse of their order and their writers' clocks skewed the same way,
// numbered three to a transaction. The query reads alone, x3, y2 and,
// past the batch, z1: without the rule the first transaction numbers
// alone, y2, x3 and the second z1, the first write of the three, last.
// (Firestore's own ties, the changes of one commit, are left as the
// query cuts them: different specs, their order harmless.)
func TestCommitBatchNeverEndsInsideATieOfCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := emulatortest.Firestore(t) // made-up changes: no end check
	st := store.New(client)
	tie := time.Now().UTC().Truncate(time.Millisecond)
	for _, c := range []struct {
		id, spec string
		kind     api.ChangeKind
		pending  time.Time
		at       time.Time
	}{
		{"alone", "other", api.ChangeCreated, tie.Add(-time.Second), tie},
		{"z1", "one", api.ChangeCreated, tie, tie.Add(3 * time.Hour)},
		{"y2", "one", api.ChangeMarked, tie, tie.Add(2 * time.Hour)},
		{"x3", "one", api.ChangeUnmarked, tie, tie.Add(time.Hour)},
	} {
		if _, err := client.Collection(store.ChangesCollection).Doc(c.id).Create(ctx, map[string]any{
			"kind": c.kind, "spec_id": c.spec, "registry": "r1", "name": c.id, "at": c.at, "pending_at": c.pending,
		}); err != nil {
			t.Fatal(err)
		}
	}
	cs := commit(t, st.WithCommitBatch(3))
	var got []string
	for _, c := range cs {
		got = append(got, fmt.Sprintf("%d %s", c.Revision, c.Name))
	}
	if fmt.Sprint(got) != "[1 alone 2 z1 3 y2 4 x3]" {
		t.Fatalf("committed %v; want alone, then z1, y2, x3 in the order they were committed", got)
	}
}

// Revisions follow the order the spec writes committed, not the clocks of
// the function instances that wrote them: a write stamped an hour late,
// committed first, still gets the first revision, and a spec's delete and
// the create of its id by another registry right after come out in that
// order whatever the clocks say (a watcher applying them in revision
// order ends with the spec, as the store has it).
func TestCommitPendingFollowsCommitOrderNotClocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := checked(t)
	st := store.New(client)
	late := st.WithClock(func() time.Time { return time.Now().Add(time.Hour) })
	if _, err := late.UpsertSpec(ctx, offer(t, "r1", "first", "p")); err != nil {
		t.Fatal(err)
	}
	emulatortest.ServerClockMoves(t, client)
	if _, err := st.UpsertSpec(ctx, offer(t, "r1", "second", "p")); err != nil {
		t.Fatal(err)
	}
	cs := commit(t, st)
	if len(cs) != 2 || cs[0].Name != "first" || cs[1].Name != "second" {
		t.Fatalf("committed %v, want first then second", names(cs))
	}
	if !cs[0].At.After(cs[1].At) {
		t.Fatalf("the skewed clock did not show: at %s, %s", cs[0].At, cs[1].At)
	}

	// One explicit id, deleted by r1 on a clock an hour late, then
	// created by r2 on a true one.
	shared := withID(offer(t, "r1", "shared", "p"), "shared-id")
	if _, err := late.UpsertSpec(ctx, shared); err != nil {
		t.Fatal(err)
	}
	if ok, err := late.MarkSpec(ctx, "r1", "shared-id", "run-1"); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	commit(t, st)
	if out, _, err := late.DeleteMarked(ctx, "r1", "shared-id", "run-2", time.Now().Add(2*time.Hour)); err != nil || out != store.Deleted {
		t.Fatalf("delete: %s %v", out, err)
	}
	emulatortest.ServerClockMoves(t, client)
	taken := withID(offer(t, "r2", "shared", "p"), "shared-id")
	if res, err := st.UpsertSpec(ctx, taken); err != nil || res.Outcome != store.Created {
		t.Fatalf("r2 takes the id: %+v %v", res, err)
	}
	cs = commit(t, st)
	if len(cs) != 2 || cs[0].Kind != api.ChangeDeleted || cs[1].Kind != api.ChangeCreated || cs[1].Registry != "r2" {
		t.Fatalf("committed %v, want r1's delete, then r2's create", names(cs))
	}
}

// withID gives an offer the explicit spec id a spec file may carry; its
// plans' ids are derived from that id, as parsing such a file derives
// them.
func withID(o store.Offer, id string) store.Offer {
	o.Spec.ID = id
	for i := range o.Spec.Plans {
		o.Spec.Plans[i].ID = ""
	}
	spec.AssignIDs(o.Spec, o.Registry)
	o.Digest = spec.Digest(o.Spec)
	return o
}

func names(cs []store.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%d %s %s/%s", c.Revision, c.Kind, c.Registry, c.Name))
	}
	return out
}

// A change a run of the version before the committer left pending (it
// crashed before committing its own changes) is adopted by the registry's
// recovery run and numbered by the next commit; adopting again finds
// nothing.
func TestAdoptLegacyPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := checked(t)
	st := store.New(client)
	at := time.Now().UTC().Add(-time.Hour)
	if _, err := client.Collection(store.ChangesCollection).NewDoc().Create(ctx, map[string]any{
		"kind": api.ChangeCreated, "spec_id": "legacy-id", "registry": "r1", "name": "legacy",
		"spec": `{"id":"legacy-id"}`, "generation": 1, "at": at, "seq": 7, "pending_registry": "r1",
	}); err != nil {
		t.Fatal(err)
	}
	if c, err := st.CommitPending(ctx, time.Hour); err != nil || c.Changes != 0 {
		t.Fatalf("a legacy pending change was committed before it was adopted: %+v %v", c, err)
	}
	if n, err := st.AdoptLegacyPending(ctx, "other"); err != nil || n != 0 {
		t.Fatalf("another registry adopted %d: %v", n, err)
	}
	if n, err := st.AdoptLegacyPending(ctx, "r1"); err != nil || n != 1 {
		t.Fatalf("adopted %d: %v, want 1", n, err)
	}
	if n, err := st.AdoptLegacyPending(ctx, "r1"); err != nil || n != 0 {
		t.Fatalf("adopted %d again: %v", n, err)
	}
	cs := commit(t, st)
	if len(cs) != 1 || cs[0].SpecID != "legacy-id" || cs[0].Revision != 1 || cs[0].LegacyPendingRegistry != "" || !cs[0].At.Equal(at.Truncate(time.Microsecond)) {
		t.Fatalf("committed %+v", cs)
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
