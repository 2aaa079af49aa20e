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
	e.commit()
	newer := offerSpec(t, "other", "pg", "", 0) // same name, another registry: another id
	e.upsert(newer)
	e.commit()
	c := e.newCache(0)
	r, _ := e.get(c)
	if !bytes.Contains(r.Body(), []byte(old.Spec.ID)) || bytes.Contains(r.Body(), []byte(newer.Spec.ID)) {
		t.Fatalf("the established spec must hold the name: %s", r.Body())
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
		e.commit()
		r := e.refreshed(c, s.what, 2, "changes")
		if !bytes.Contains(r.Body(), []byte(`"name":"pg","id":"`+s.shows+`"`)) {
			t.Fatalf("%s: %s does not hold the name:\n%s", s.what, s.shows, r.Body())
		}
		e.wantFullRender(s.what, r)
	}
}

// TestCacheOneIDAcrossRegistries: registry A deletes a spec with an
// explicit id and registry B creates one with that id right after, A's
// function instance on a clock an hour late. The committer numbers the
// two in the order they committed (delete, then create), whatever the
// clocks say, so the cache applies both and ends with B's spec, as the
// store has it.
func TestCacheOneIDAcrossRegistries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Minute)
	const id = "shared-service"
	e.seedMany(3) // enough specs that two changes are applied, not rendered
	a := offerSpec(t, testReg, "queue", id, 0)
	e.upsert(a)
	e.commit()
	e.markOnly(testReg, id, "run-1")
	rev := e.commit()
	c := e.newCache(0)
	e.get(c)
	late := *e
	late.st = e.st.WithClock(func() time.Time { return time.Now().Add(time.Hour) })
	late.deleteMarked(testReg, id, "run-2")
	b := offerSpec(t, "other", "queue-b", id, 0)
	if got := e.upsert(b); got != store.Created {
		t.Fatalf("B creates the freed id: %s", got)
	}
	if got := e.commit(); got != rev+2 {
		t.Fatalf("revision %d, want %d", got, rev+2)
	}
	if r := e.refreshed(c, "after A's delete and B's create", 3, "changes"); !bytes.Contains(r.Body(), []byte(`"name":"queue-b"`)) {
		t.Fatalf("B's spec is gone from the cache:\n%s", r.Body())
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
	e.commit()
	e.markOnly(testReg, id, "run-1")
	e.commit()
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
	if !bytes.Contains(before.Body(), []byte(`"name":"queue-b"`)) || bytes.Contains(before.Body(), []byte(`"name":"brief"`)) {
		t.Fatalf("the render does not show the specs as written:\n%s", before.Body())
	}
	// The four changes (A's delete, B's create, A's create and mark of
	// brief) are numbered now, after the render.
	e.commit()
	r, reads := e.get(c)
	if reads != 1+4 || c.LastRefresh() != "changes" {
		t.Fatalf("after the commit: %d reads (%s), want 5", reads, c.LastRefresh())
	}
	if !bytes.Equal(r.Body(), before.Body()) {
		t.Fatalf("changes the render already saw changed the catalog:\n%s\nwas\n%s", r.Body(), before.Body())
	}
	e.wantFullRender("after the commit", r)
}

// TestCacheNeverGoesBack: a full render saw specs created and marked
// (all of it pending): none of them is in the catalog. The commit
// numbers the 500 changes in two batches (400, then 100) in the order
// they were written: the first holds the 250 creates and 150 of the
// marks, so a refresh between the batches sees 100 specs created and not
// yet marked. The cache must not show those specs for the revisions
// between: the render already showed them gone, and a state the cache
// served is never replaced by an older one.
func TestCacheNeverGoesBack(t *testing.T) {
	t.Parallel()
	client, project := emulatortest.FirestoreProject(t)
	e := storeEnv(t, client)
	e.seedMany(450) // enough specs that 400 changes are applied, not rendered
	var briefs []store.Offer
	for i := range 250 {
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
	if bytes.Contains(before.Body(), []byte(`"name":"brief-`)) || serviceCount(t, before.Body()) != 450 {
		t.Fatalf("the render shows %d services, briefs %v; want the 450 seeded only", serviceCount(t, before.Body()), bytes.Contains(before.Body(), []byte(`"name":"brief-`)))
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
		_, err := writer.CommitPending(e.ctx, time.Hour)
		committed <- err
	}()
	select {
	case <-firstDone:
	case err := <-committed:
		t.Fatalf("the commit ended before its second batch: %v", err)
	}
	mid, reads := e.get(c)
	if mid.Revision != before.Revision+400 || c.LastRefresh() != "changes" || reads != 401 {
		t.Fatalf("between the batches: revision %d (%s, %d reads), want %d by changes, 401 reads", mid.Revision, c.LastRefresh(), reads, before.Revision+400)
	}
	if !bytes.Equal(mid.Body(), before.Body()) {
		t.Fatalf("changes the render already saw changed the catalog: %d services (briefs back: %v)", serviceCount(t, mid.Body()), bytes.Contains(mid.Body(), []byte(`"name":"brief-`)))
	}
	close(goOn)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	after, _ := e.get(c)
	e.wantFullRender("after both batches", after)
	if !bytes.Equal(after.Body(), before.Body()) {
		t.Fatal("the catalog moved although every change was in the render")
	}
}
