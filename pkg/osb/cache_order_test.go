package osb_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/store"
)

// TestCacheNameConflicts: two specs claim one service name; the oldest
// keeps it. When it leaves, the other appears, from what the cache
// already holds; when it comes back (unmarked), it takes the name back.
func TestCacheNameConflicts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Minute)
	old := offerSpec(t, testReg, "pg", "", 0)
	e.upsert(old)
	e.commitAll(testReg)
	newer := offerSpec(t, "other", "pg", "", 0) // same name, another registry: another id
	e.upsert(newer)
	e.commitAll("other")
	c := e.newCache(0)
	r, _ := e.get(c)
	if !bytes.Contains(r.Body, []byte(old.Spec.ID)) || bytes.Contains(r.Body, []byte(newer.Spec.ID)) {
		t.Fatalf("the established spec must hold the name: %s", r.Body)
	}
	steps := []struct {
		what  string
		do    func()
		shows string // the id that holds "pg" afterwards
	}{
		{"the holder is marked", func() {
			e.markOnly(testReg, old.Spec.ID, "run-m")
		}, newer.Spec.ID},
		{"the newer spec changes", func() { e.upsert(offerSpec(t, "other", "pg", "", 1)) }, newer.Spec.ID},
		{"the holder is unmarked", func() { e.upsert(old) }, old.Spec.ID},
		// Same id, another name: the name is free for the newer spec.
		{"the holder is renamed", func() {
			if got := e.upsert(offerSpec(t, testReg, "postgres", old.Spec.ID, 0)); got != store.Updated {
				t.Fatalf("rename: %s", got)
			}
		}, newer.Spec.ID},
	}
	for _, s := range steps {
		s.do()
		e.commitAll(testReg, "other")
		r := e.refreshed(c, s.what, 2, "changes")
		if !bytes.Contains(r.Body, []byte(`"name":"pg","id":"`+s.shows+`"`)) {
			t.Fatalf("%s: %s does not hold the name:\n%s", s.what, s.shows, r.Body)
		}
		e.wantFullRender(s.what, r)
	}
}

// TestCacheOneIDAcrossRegistries: registry A deletes a spec with an
// explicit id, registry B creates one with that id, and B's run commits
// first: the create gets the lower revision, the delete the higher one.
// Applied in revision order the spec would vanish; the cache applies a
// change only if it was written after the state it holds, so it ends with
// B's spec, as the store does.
func TestCacheOneIDAcrossRegistries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Minute)
	const id = "shared-service"
	a := offerSpec(t, testReg, "queue", id, 0)
	e.upsert(a)
	e.upsert(offerSpec(t, testReg, "keeper", "", 0))
	e.commitAll(testReg)
	e.markOnly(testReg, id, "run-1")
	e.commitAll(testReg)
	c := e.newCache(0)
	e.get(c)
	e.deleteMarked(testReg, id, "run-2")
	b := offerSpec(t, "other", "queue-b", id, 0)
	if got := e.upsert(b); got != store.Created {
		t.Fatalf("B creates the freed id: %s", got)
	}
	e.commitAll("other") // B's create: revision R+1
	r, _ := e.get(c)
	e.wantFullRender("after B's create", r)
	e.commitAll(testReg) // A's delete, written before: revision R+2
	if r := e.refreshed(c, "after A's delete", 2, "changes"); !bytes.Contains(r.Body, []byte(`"name":"queue-b"`)) {
		t.Fatalf("B's spec is gone from the cache:\n%s", r.Body)
	}
}

// TestCacheRenderSawPendingChanges: a full render reads specs whose
// changes are still pending; when they are committed later, applying
// them again changes nothing, and a spec the render saw leave does not
// come back for the revisions between (no flicker).
func TestCacheRenderSawPendingChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Minute)
	const id = "moving-service"
	e.seedMany(5) // enough specs that three changes are applied, not rendered
	e.upsert(offerSpec(t, testReg, "queue", id, 0))
	e.commitAll(testReg)
	e.markOnly(testReg, id, "run-1")
	e.commitAll(testReg)
	// Pending: A deletes the spec and B creates it anew; A creates a
	// spec and marks it.
	e.deleteMarked(testReg, id, "run-2")
	e.upsert(offerSpec(t, "other", "queue-b", id, 0))
	brief := offerSpec(t, testReg, "brief", "", 0)
	e.upsert(brief)
	e.markOnly(testReg, brief.Spec.ID, "run-2")
	// A cold instance renders now: queue-b in, brief out, all of it
	// pending.
	c := e.newCache(0)
	before, _ := e.get(c)
	if !bytes.Contains(before.Body, []byte(`"name":"queue-b"`)) || bytes.Contains(before.Body, []byte(`"name":"brief"`)) {
		t.Fatalf("the render does not show the specs as written:\n%s", before.Body)
	}
	// A's changes first (delete, create brief, mark brief), then B's.
	e.commitAll(testReg)
	r, reads := e.get(c)
	if reads != 1+3 || c.LastRefresh() != "changes" {
		t.Fatalf("after A's commit: %d reads (%s), want 4", reads, c.LastRefresh())
	}
	if !bytes.Equal(r.Body, before.Body) {
		t.Fatalf("changes the render already saw changed the catalog:\n%s\nwas\n%s", r.Body, before.Body)
	}
	e.commitAll("other")
	r, _ = e.get(c)
	e.wantFullRender("after every commit", r)
	if !bytes.Equal(r.Body, before.Body) {
		t.Fatalf("the catalog moved although every change was in the render")
	}
}

// TestCacheNeverGoesBack: a full render saw specs created and marked
// (all of it pending): none of them is in the catalog. The run's commit
// numbers its 300 changes in two batches (200, then 100), so a refresh
// between them sees some of the creates without their marks (a batch is
// whichever 200 pending changes the query returns, so some specs have
// their create in the first batch and their mark in the second: with 150
// specs, all but certainly). The cache must not show those specs for the
// revisions between: the render already showed them gone, and a state
// the cache served is never replaced by an older one.
func TestCacheNeverGoesBack(t *testing.T) {
	t.Parallel()
	client, project := emulatortest.FirestoreProject(t)
	e := &env{t: t, ctx: context.Background(), client: client, st: store.New(client), clock: newClock()}
	e.seedMany(200) // enough specs that 200 changes are applied, not rendered
	var briefs []store.Offer
	for i := range 150 {
		briefs = append(briefs, offerSpec(t, testReg, fmt.Sprintf("brief-%03d", i), "", 0))
	}
	batches, err := store.CreateBatches(briefs)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if _, err := e.st.CreateSpecs(e.ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range briefs {
		e.markOnly(testReg, b.Spec.ID, "run-1")
	}
	c := e.newCache(0)
	before, _ := e.get(c)
	if bytes.Contains(before.Body, []byte(`"name":"brief-`)) || serviceCount(t, before.Body) != 200 {
		t.Fatalf("the render shows %d services, briefs %v; want the 200 seeded only", serviceCount(t, before.Body), bytes.Contains(before.Body, []byte(`"name":"brief-`)))
	}
	// The committer stops after its first batch until told to go on.
	firstDone, goOn := make(chan struct{}), make(chan struct{})
	var commits atomic.Int32
	writer := store.New(emulatortest.FirestoreVia(t, project, "", func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if strings.HasSuffix(method, "/Commit") && err == nil && commits.Add(1) == 1 {
			close(firstDone)
			<-goOn
		}
		return err
	}))
	committed := make(chan error, 1)
	go func() {
		_, err := writer.CommitChanges(e.ctx, testReg, time.Hour)
		committed <- err
	}()
	select {
	case <-firstDone:
	case err := <-committed:
		t.Fatalf("the commit ended before its second batch: %v", err)
	}
	mid, reads := e.get(c)
	if mid.Revision != before.Revision+200 || c.LastRefresh() != "changes" || reads != 201 {
		t.Fatalf("between the batches: revision %d (%s, %d reads), want %d by changes, 201 reads", mid.Revision, c.LastRefresh(), reads, before.Revision+200)
	}
	if !bytes.Equal(mid.Body, before.Body) {
		t.Fatalf("changes the render already saw changed the catalog: %d services (briefs back: %v)", serviceCount(t, mid.Body), bytes.Contains(mid.Body, []byte(`"name":"brief-`)))
	}
	close(goOn)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	after, _ := e.get(c)
	e.wantFullRender("after both batches", after)
	if !bytes.Equal(after.Body, before.Body) {
		t.Fatal("the catalog moved although every change was in the render")
	}
}
