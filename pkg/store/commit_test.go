package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/store"
)

// One commit numbers every registry's pending changes in the order they
// were written, across batches (more than one transaction's worth), so a
// spec's later change always gets the later revision.
func TestCommitPendingFollowsWriteOrderAcrossBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(emulatortest.Firestore(t))
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
		if cs[i].At.Before(cs[i-1].At) {
			t.Fatalf("revision %d (%s %s at %s) was written before revision %d (at %s)", cs[i].Revision, cs[i].Kind, cs[i].Name, cs[i].At, cs[i-1].Revision, cs[i-1].At)
		}
	}
	if last, prev := cs[431], cs[430]; last.Kind != store.KindMarked || last.Name != "s000" || prev.Registry != "r2" {
		t.Fatalf("the last two revisions are %s %s/%s and %s %s/%s; want r2's create, then the mark of s000", prev.Kind, prev.Registry, prev.Name, last.Kind, last.Registry, last.Name)
	}
}

// A change a run of the version before the committer left pending (it
// crashed before committing its own changes) is adopted by the registry's
// recovery run and numbered by the next commit; adopting again finds
// nothing.
func TestAdoptLegacyPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := emulatortest.Firestore(t)
	st := store.New(client)
	at := time.Now().UTC().Add(-time.Hour)
	if _, err := client.Collection(store.ChangesCollection).NewDoc().Create(ctx, map[string]any{
		"kind": store.KindCreated, "spec_id": "legacy-id", "registry": "r1", "name": "legacy",
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
