package osb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// newCache is a cache on e's store with its own window and e's clock, so
// a test reads the reads of its calls alone.
func (e *env) newCache(window time.Duration) *osb.Cache {
	return &osb.Cache{Store: e.st, Window: window, Now: e.clock.Now}
}

func (e *env) get(c *osb.Cache) (*osb.Rendered, int64) {
	e.t.Helper()
	r, reads, err := c.Get(e.ctx)
	if err != nil {
		e.t.Fatalf("Cache.Get: %v", err)
	}
	return r, reads
}

func serviceCount(t testing.TB, body []byte) int {
	t.Helper()
	var c struct {
		Services []json.RawMessage `json:"services"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	return len(c.Services)
}

// fullRender is the catalog as the broker rendered it before the cache
// applied changes (renderAsBefore on e's store, now). An incremental
// refresh must give these bytes exactly once every change is committed.
func (e *env) fullRender() []byte {
	e.t.Helper()
	r, err := renderAsBefore(e.ctx, e.st)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Body
}

// renderAsBefore is the cache's refresh before issue 13, the baseline of
// the tests and benchmarks: the revision, every active spec read now,
// oldest first, through catalog.RenderOfferings, encoded, tagged.
func renderAsBefore(ctx context.Context, st *store.Store) (*osb.Rendered, error) {
	rev, err := st.Revision(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := st.ActiveSpecs(ctx)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if !recs[i].CreatedAt.Equal(recs[j].CreatedAt) {
			return recs[i].CreatedAt.Before(recs[j].CreatedAt)
		}
		return recs[i].ID < recs[j].ID
	})
	var offs []catalog.Offering
	for i := range recs {
		s, err := recs[i].Spec()
		if err != nil {
			continue
		}
		offs = append(offs, catalog.Offering{Spec: s, Generation: recs[i].Generation})
	}
	cat, _ := catalog.RenderOfferings(offs) // left-out specs are the point of some tests
	body, err := json.Marshal(cat)
	if err != nil {
		return nil, err
	}
	return &osb.Rendered{Revision: rev, Body: body, ETag: catalog.ETag(rev, string(body))}, nil
}

// wantFullRender checks a served catalog against fullRender and the
// store's revision, with its ETag.
func (e *env) wantFullRender(what string, r *osb.Rendered) {
	e.t.Helper()
	want := e.fullRender()
	if !bytes.Equal(r.Body, want) {
		e.t.Fatalf("%s: the cache serves\n%s\na full render is\n%s", what, r.Body, want)
	}
	rev, err := e.st.Revision(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.Revision != rev || r.ETag != catalog.ETag(rev, string(r.Body)) {
		e.t.Fatalf("%s: revision %d, ETag %s; want %d and %s", what, r.Revision, r.ETag, rev, catalog.ETag(rev, string(r.Body)))
	}
}

// refreshed is a request after the window: it checks what the refresh
// cost and how, and that it serves a full render's body.
func (e *env) refreshed(c *osb.Cache, what string, reads int64, how string) *osb.Rendered {
	e.t.Helper()
	r, got := e.get(c)
	if got != reads || c.LastRefresh() != how {
		e.t.Fatalf("%s: %d reads (%s), want %d (%s)", what, got, c.LastRefresh(), reads, how)
	}
	e.wantFullRender(what, r)
	return r
}

// markOnly marks a spec of reg as a run's step 5 does, without committing.
func (e *env) markOnly(reg, id, runID string) {
	e.t.Helper()
	if ok, err := e.st.MarkSpec(e.ctx, reg, id, runID); err != nil || !ok {
		e.t.Fatalf("mark %s: %v %v", id, ok, err)
	}
}

// deleteMarked deletes a marked spec of reg as a later run's step 3 does.
func (e *env) deleteMarked(reg, id, runID string) {
	e.t.Helper()
	if out, _, err := e.st.DeleteMarked(e.ctx, reg, id, runID, time.Now().Add(time.Hour)); err != nil || out != store.Deleted {
		e.t.Fatalf("delete %s: %s %v", id, out, err)
	}
}

// offerSpec builds the offer a registry's run would upsert: reg's spec
// name at version v (its description), with an explicit id when id is
// not "".
func offerSpec(t testing.TB, reg, name, id string, v int) store.Offer {
	t.Helper()
	y := strings.Replace(specYAML(name), "description: The "+name+" service", fmt.Sprintf("description: The %s service, version %d", name, v), 1)
	if id != "" {
		y = "id: " + id + "\n" + y
	}
	s, err := spec.Parse([]byte(y))
	if err != nil {
		t.Fatalf("parse spec: %v", err)
	}
	spec.AssignIDs(s, reg)
	return store.Offer{Registry: reg, Entry: name, Ref: "registry.test/" + name + ":latest", Spec: s, Digest: spec.Digest(s), Run: "run"}
}

func (e *env) upsert(o store.Offer) store.UpsertOutcome {
	e.t.Helper()
	res, err := e.st.UpsertSpec(e.ctx, o)
	if err != nil {
		e.t.Fatalf("upsert %s/%s: %v", o.Registry, o.Spec.Name, err)
	}
	return res.Outcome
}

func (e *env) commitAll(regs ...string) int64 {
	e.t.Helper()
	for _, reg := range regs {
		if _, err := e.st.CommitChanges(e.ctx, reg, time.Hour); err != nil {
			e.t.Fatalf("commit %s: %v", reg, err)
		}
	}
	rev, err := e.st.Revision(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

// seedMany creates n specs of testReg in batches, as a first import
// does, and commits them.
func (e *env) seedMany(n int) []store.Offer {
	e.t.Helper()
	offers := make([]store.Offer, n)
	for i := range offers {
		offers[i] = offerSpec(e.t, testReg, fmt.Sprintf("svc-%05d", i), "", 0)
	}
	batches, err := store.CreateBatches(offers)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, b := range batches {
		if _, err := e.st.CreateSpecs(e.ctx, b); err != nil {
			e.t.Fatal(err)
		}
	}
	e.commitAll(testReg)
	return offers
}

// TestCacheReads pins the cost model README promises for the catalog: a
// warm instance answers from memory inside the window, re-checks with one
// read after it, and pays for the changes only when the revision moved.
func TestCacheReads(t *testing.T) {
	e := newEnv(t, time.Minute)
	specs := []*spec.Spec{parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")), parseSpec(t, specYAML("c"))}
	e.seed(specs...)
	const window = 5 * time.Second
	c := e.newCache(window)

	cold, reads := e.get(c)
	if want := int64(1 + len(specs)); reads != want || c.LastRefresh() != "full: cold" {
		t.Fatalf("cold: %d reads (%s), want %d (revision + %d specs, a full render)", reads, c.LastRefresh(), want, len(specs))
	}
	if n := serviceCount(t, cold.Body); n != len(specs) {
		t.Fatalf("cold: %d services, want %d", n, len(specs))
	}

	// Steps add up to the last instant of the window.
	for _, d := range []time.Duration{0, time.Second, window - time.Second - time.Nanosecond} {
		e.clock.Advance(d)
		r, reads := e.get(c)
		if reads != 0 || r != cold {
			t.Fatalf("inside the window: %d reads, same catalog %v; want 0 and the same", reads, r == cold)
		}
	}

	// The window has passed, the revision has not moved: one read of
	// meta/catalog, same catalog.
	e.clock.Advance(time.Nanosecond)
	r, reads := e.get(c)
	if reads != 1 || r != cold || c.LastRefresh() != "unchanged" {
		t.Fatalf("after the window, same revision: %d reads (%s), same catalog %v; want 1 read and the same", reads, c.LastRefresh(), r == cold)
	}
	// That check opened a new window.
	e.clock.Advance(window / 2)
	if _, reads := e.get(c); reads != 0 {
		t.Fatalf("after a re-check: %d reads, want 0", reads)
	}

	// A change inside the window is not seen until it ends: that is the
	// staleness the window buys its reads with.
	d := parseSpec(t, specYAML("d"))
	e.seed(d)
	if r, reads := e.get(c); reads != 0 || r.ETag != cold.ETag {
		t.Fatalf("change inside the window: %d reads, ETag %s; want 0 and the old tag", reads, r.ETag)
	}

	// After it, the one change is read, not the specs: revision + 1.
	e.clock.Advance(window)
	r, reads = e.get(c)
	if reads != 2 || c.LastRefresh() != "changes" {
		t.Fatalf("after a bump: %d reads (%s), want 2 (revision + the one change)", reads, c.LastRefresh())
	}
	if r.ETag == cold.ETag || serviceCount(t, r.Body) != len(specs)+1 {
		t.Fatalf("after a bump: ETag %s, %d services; want a new tag and %d", r.ETag, serviceCount(t, r.Body), len(specs)+1)
	}
	e.wantFullRender("after a create", r)

	// A mark is one change too: the spec leaves, nothing else is read.
	e.mark(specs[0].ID, "run-1")
	e.clock.Advance(window)
	r, reads = e.get(c)
	if reads != 2 || serviceCount(t, r.Body) != len(specs) {
		t.Fatalf("after marking one: %d reads, %d services; want 2 and %d", reads, serviceCount(t, r.Body), len(specs))
	}
	e.wantFullRender("after a mark", r)
}

// TestCacheReadsEmpty: with no spec at all the query still bills one
// read (Firestore charges a query that returns nothing as one read).
func TestCacheReadsEmpty(t *testing.T) {
	e := newEnv(t, time.Minute)
	c := e.newCache(time.Second)
	r, reads := e.get(c)
	if reads != 2 {
		t.Fatalf("empty store: %d reads, want 2 (revision + an empty query)", reads)
	}
	if string(r.Body) != `{"services":[]}` {
		t.Fatalf("empty catalog body %s, want an empty services list", r.Body)
	}
}

// TestCacheWindowZero: without a window every call re-checks the
// revision, and an unchanged revision still costs one read only.
func TestCacheWindowZero(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.seed(parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")))
	c := e.newCache(0)
	first, reads := e.get(c)
	if reads != 3 {
		t.Fatalf("cold: %d reads, want 3", reads)
	}
	for i := range 3 {
		r, reads := e.get(c)
		if reads != 1 || r != first {
			t.Fatalf("call %d: %d reads, same catalog %v; want 1 and the same", i, reads, r == first)
		}
	}
}

// TestCacheRefreshReadsChanges is the goal of issue 13's incremental
// refresh, at two catalog sizes: a refresh after k changes reads the
// revision and the k changes, nothing that grows with the catalog, up to
// k = the specs the instance holds; one change more and it renders in
// full, 1 + the active specs. The body is a full render's every time.
func TestCacheRefreshReadsChanges(t *testing.T) {
	t.Parallel()
	for _, n := range []int{20, 300} {
		t.Run(fmt.Sprintf("services=%d", n), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, time.Minute)
			offers := e.seedMany(n)
			c := e.newCache(0)
			if _, reads := e.get(c); reads != int64(1+n) {
				t.Fatalf("cold: %d reads, want %d", reads, 1+n)
			}
			version := 0
			// update changes the first k specs (a new version each).
			update := func(k int) {
				version++
				for i := range k {
					o := offers[i]
					if got := e.upsert(offerSpec(t, testReg, o.Spec.Name, "", version)); got != store.Updated {
						t.Fatalf("update %s: %s", o.Spec.Name, got)
					}
				}
			}
			for _, k := range []int{1, 7, n} {
				update(k)
				e.commitAll(testReg)
				// The revision and the changes.
				e.refreshed(c, fmt.Sprintf("after %d changes", k), int64(1+k), "changes")
			}
			// A mark, a create and an unmark: 3 changes, 3 + 1 reads.
			e.markOnly(testReg, offers[1].Spec.ID, "run-m")
			e.upsert(offerSpec(t, testReg, "newcomer", "", 0))
			e.upsert(offerSpec(t, testReg, offers[1].Spec.Name, "", version))
			e.commitAll(testReg)
			e.refreshed(c, "after a mark, a create and an unmark", 4, "changes")
			// More changes than the n+1 specs held (each updated, one of
			// them marked): a full render of the n left.
			update(n)
			e.upsert(offerSpec(t, testReg, "newcomer", "", 1))
			e.markOnly(testReg, offers[2].Spec.ID, "run-m2")
			e.commitAll(testReg)
			e.refreshed(c, fmt.Sprintf("after %d changes on %d specs", n+2, n+1), int64(1+n), "full: bound")
		})
	}
}

// warmOn is a cache (window 0) that rendered n seeded specs.
func warmOn(t *testing.T, n int) (*env, []store.Offer, *osb.Cache) {
	e := newEnv(t, time.Minute)
	offers := e.seedMany(n)
	c := e.newCache(0)
	e.get(c)
	return e, offers, c
}

// TestCacheFallsBackWhenChangesAreGone: changes after the revision the
// cache holds that are no longer retained (the feed's 410) cost what was
// asked for, then a full render.
func TestCacheFallsBackWhenChangesAreGone(t *testing.T) {
	t.Parallel()
	e, offers, c := warmOn(t, 5)
	prune := func() {
		t.Helper()
		if _, err := e.st.PruneChanges(e.ctx, time.Now().Add(2*time.Hour), 1000); err != nil {
			t.Fatal(err)
		}
	}
	// Every change after the cache's revision pruned: the query answers
	// nothing (one read), then the revision and 5 specs of the render.
	e.upsert(offerSpec(t, testReg, offers[0].Spec.Name, "", 1))
	e.upsert(offerSpec(t, testReg, offers[1].Spec.Name, "", 1))
	e.commitAll(testReg)
	prune()
	e.refreshed(c, "all changes pruned", 1+1+5, "full: gone")
	// The first two of three pruned: the one left is read, then the render.
	e.upsert(offerSpec(t, testReg, offers[0].Spec.Name, "", 2))
	e.upsert(offerSpec(t, testReg, offers[1].Spec.Name, "", 2))
	e.commitAll(testReg)
	prune()
	e.upsert(offerSpec(t, testReg, offers[2].Spec.Name, "", 2))
	e.commitAll(testReg)
	e.refreshed(c, "the first changes pruned", 1+1+5, "full: gone")
	// And it goes on from there with changes again.
	e.upsert(offerSpec(t, testReg, offers[3].Spec.Name, "", 2))
	e.commitAll(testReg)
	e.refreshed(c, "after the fallback", 2, "changes")
}

// TestCacheFallsBackOnChangesFromOlderCode: a change that puts a spec in
// the catalog without its created_at (written before changes carried it)
// cannot be placed in the render order, so the refresh renders in full.
func TestCacheFallsBackOnChangesFromOlderCode(t *testing.T) {
	t.Parallel()
	e, offers, c := warmOn(t, 4)
	e.upsert(offerSpec(t, testReg, offers[0].Spec.Name, "", 1))
	rev := e.commitAll(testReg)
	// Make the change what older code wrote: no spec_created_at.
	docs, err := e.client.Collection(store.ChangesCollection).Where("revision", "==", rev).Documents(e.ctx).GetAll()
	if err != nil || len(docs) != 1 {
		t.Fatalf("change %d: %d docs, %v", rev, len(docs), err)
	}
	if _, err := docs[0].Ref.Update(e.ctx, []firestore.Update{{Path: "spec_created_at", Value: firestore.Delete}}); err != nil {
		t.Fatal(err)
	}
	e.refreshed(c, "a change without created_at", 1+1+4, "full: old change")
	// A mark carries no spec, so it needs no created_at either way.
	e.markOnly(testReg, offers[1].Spec.ID, "run-m")
	e.commitAll(testReg)
	e.refreshed(c, "after the fallback", 2, "changes")
}

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

// TestCacheConcurrentColdGets: callers arriving together at a cold cache
// share one render instead of each querying every spec.
func TestCacheConcurrentColdGets(t *testing.T) {
	e := newEnv(t, time.Minute)
	specs := []*spec.Spec{parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")), parseSpec(t, specYAML("c"))}
	e.seed(specs...)
	c := e.newCache(time.Minute)
	const callers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	tags := map[string]bool{}
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			r, reads, err := c.Get(e.ctx)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			total += reads
			tags[r.ETag] = true
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if want := int64(1 + len(specs)); total != want || len(tags) != 1 {
		t.Fatalf("%d callers: %d reads in all, %d tags; want %d and 1", callers, total, len(tags), want)
	}
}

// TestCacheConcurrentRefreshes: many requests (inside the window, past
// it, fresh) while registries write and commit, for the race detector;
// afterwards the cache serves exactly a full render.
func TestCacheConcurrentRefreshes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Minute)
	offers := e.seedMany(10)
	c := &osb.Cache{Store: e.st, Window: 2 * time.Millisecond} // the real clock
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				get := c.Get
				if i%3 == 0 {
					get = c.GetFresh
				}
				r, _, err := get(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				if r.ETag != catalog.ETag(r.Revision, string(r.Body)) {
					errs <- fmt.Errorf("ETag %s does not match revision %d and its body", r.ETag, r.Revision)
					return
				}
			}
		})
	}
	for v := 1; v <= 8; v++ {
		for i := range 3 {
			e.upsert(offerSpec(t, testReg, offers[(v+i)%len(offers)].Spec.Name, "", v))
		}
		if v%3 == 0 {
			if ok, err := e.st.MarkSpec(e.ctx, testReg, offers[v].Spec.ID, fmt.Sprintf("run-%d", v)); err != nil || !ok {
				t.Errorf("mark: %v %v", ok, err)
			}
		}
		e.commitAll(testReg)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r, _, err := c.GetFresh(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.wantFullRender("after concurrent refreshes", r)
}

// TestCatalogReadsHeader: the handler reports each request's reads, which
// is what the benchmarks (and an operator with curl) measure.
func TestCatalogReadsHeader(t *testing.T) {
	e := newEnv(t, 5*time.Second)
	e.seed(parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")))
	_, cold := e.catalog()
	if got := readsOf(t, cold); got != 3 {
		t.Fatalf("cold request: %d reads, want 3", got)
	}
	_, warm := e.catalog()
	if got := readsOf(t, warm); got != 0 {
		t.Fatalf("warm request: %d reads, want 0", got)
	}
	e.clock.Advance(e.window)
	req := e.request(http.MethodGet, "/v2/catalog", "")
	req.Header.Set("If-None-Match", cold.header.Get("ETag"))
	r := e.send(req)
	if r.status != http.StatusNotModified || readsOf(t, r) != 1 {
		t.Fatalf("re-check answered %d with %s reads, want 304 after 1", r.status, r.header.Get("X-Specsync-Firestore-Reads"))
	}
}

func readsOf(t *testing.T, r response) int64 {
	t.Helper()
	n, err := strconv.ParseInt(r.header.Get("X-Specsync-Firestore-Reads"), 10, 64)
	if err != nil {
		t.Fatalf("X-Specsync-Firestore-Reads: %v", err)
	}
	return n
}

// TestCatalogNoCache: a request with Cache-Control: no-cache (or, without
// Cache-Control, Pragma: no-cache) is answered after one revision read
// whatever the window, then the usual path: the changes since, or the
// body held when the revision has not moved. Without it, the window
// holds.
func TestCatalogNoCache(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.seed(parseSpec(t, specYAML("a")), parseSpec(t, specYAML("b")))
	cold, _ := e.catalog()
	get := func(header ...string) (served, response) {
		t.Helper()
		req := e.request(http.MethodGet, "/v2/catalog", "")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		r := e.send(req)
		if r.status != http.StatusOK && r.status != http.StatusNotModified {
			t.Fatalf("GET /v2/catalog %v: %d %s", header, r.status, r.body)
		}
		var c served
		if r.status == http.StatusOK {
			if err := json.Unmarshal(r.body, &c); err != nil {
				t.Fatal(err)
			}
		}
		return c, r
	}
	e.seed(parseSpec(t, specYAML("c")))
	if c, r := get(); len(c.Services) != len(cold.Services) || readsOf(t, r) != 0 {
		t.Fatalf("without no-cache, inside the window: %d services, %d reads; want the old %d and 0", len(c.Services), readsOf(t, r), len(cold.Services))
	}
	c, r := get("Cache-Control", "no-cache")
	if len(c.Services) != 3 || readsOf(t, r) != 2 {
		t.Fatalf("no-cache after a change: %v, %d reads; want 3 services after 2 reads (revision, change)", c.names(), readsOf(t, r))
	}
	tag := r.header.Get("ETag")
	// Revision unchanged: one read, and a matching tag is still 304.
	if _, r := get("Cache-Control", "no-cache", "If-None-Match", tag); r.status != http.StatusNotModified || readsOf(t, r) != 1 {
		t.Fatalf("no-cache, unchanged: %d after %d reads, want 304 after 1", r.status, readsOf(t, r))
	}
	// What a no-cache request read is what everyone is served now.
	if c, r := get(); len(c.Services) != 3 || readsOf(t, r) != 0 {
		t.Fatalf("after a fresh read: %d services, %d reads; want 3 and 0", len(c.Services), readsOf(t, r))
	}
	e.mark(parseSpec(t, specYAML("a")).ID, "run-1")
	if c, r := get("Pragma", "no-cache"); len(c.Services) != 2 || readsOf(t, r) != 2 {
		t.Fatalf("Pragma: no-cache after a mark: %v, %d reads; want 2 services after 2 reads", c.names(), readsOf(t, r))
	}
	if _, r := get("Cache-Control", "max-age=0"); readsOf(t, r) != 1 {
		t.Fatalf("max-age=0: %d reads, want 1", readsOf(t, r))
	}
	if _, r := get("Cache-Control", "max-age=600", "Pragma", "no-cache"); readsOf(t, r) != 0 {
		t.Fatalf("Pragma with Cache-Control: %d reads, want 0 (RFC 9111: Pragma is ignored then)", readsOf(t, r))
	}
}

// gate forwards TCP to the Firestore emulator; closed, it holds what the
// emulator answers until opened, so a test can keep a read in flight
// after the emulator served it.
type gate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
	held   int // chunks held since closed
}

func newGate(t *testing.T) (*gate, string) {
	t.Helper()
	target := os.Getenv("FIRESTORE_EMULATOR_HOST")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	var conns []net.Conn
	var connsMu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		g.open()
		connsMu.Lock()
		defer connsMu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			connsMu.Lock()
			conns = append(conns, c, up)
			connsMu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go g.pipe(c, up)
		}
	}()
	return g, ln.Addr().String()
}

func (g *gate) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			g.mu.Lock()
			if g.closed {
				g.held++
			}
			for g.closed {
				g.cond.Wait()
			}
			g.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (g *gate) close() { g.mu.Lock(); g.closed, g.held = true, 0; g.mu.Unlock() }
func (g *gate) open()  { g.mu.Lock(); g.closed = false; g.cond.Broadcast(); g.mu.Unlock() }
func (g *gate) heldChunks() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// waitFor polls cond (test synchronisation, not a timed assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCacheFreshSeesEveryEarlierCommit is read-your-writes: a fresh
// caller that arrives while a revision read is in flight does not take
// that read's answer (it may predate the caller's write), but callers
// that arrive together share the next one. The first read is held in
// flight after the emulator answered it; a change is committed; seven
// fresh callers arrive; then the first read is let through.
func TestCacheFreshSeesEveryEarlierCommit(t *testing.T) {
	t.Parallel()
	client, project := emulatortest.FirestoreProject(t)
	writer := &env{t: t, ctx: context.Background(), client: client, st: store.New(client), clock: newClock()}
	writer.seedMany(3)
	g, addr := newGate(t)
	via := emulatortest.FirestoreVia(t, project, addr, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	c := &osb.Cache{Store: store.New(via), Window: time.Hour, Now: writer.clock.Now}
	cold, _ := writer.get(c)

	g.close()
	type result struct {
		r     *osb.Rendered
		reads int64
		err   error
	}
	first := make(chan result, 1)
	go func() {
		r, reads, err := c.GetFresh(writer.ctx)
		first <- result{r, reads, err}
	}()
	waitFor(t, "the first revision read to be answered", func() bool { return g.heldChunks() > 0 })
	time.Sleep(50 * time.Millisecond) // the rest of the answer
	writer.upsert(offerSpec(t, testReg, "late", "", 0))
	rev := writer.commitAll(testReg)
	const callers = 7
	rest := make(chan result, callers)
	for range callers {
		go func() {
			r, reads, err := c.GetFresh(writer.ctx)
			rest <- result{r, reads, err}
		}()
	}
	waitFor(t, "the fresh callers to wait", func() bool { return c.Waiters() == callers })
	g.open()

	f := <-first
	if f.err != nil {
		t.Fatal(f.err)
	}
	if f.r.Revision != cold.Revision {
		t.Fatalf("the first read saw revision %d: it was not held before the commit, so this test tested nothing", f.r.Revision)
	}
	total := f.reads
	for range callers {
		res := <-rest
		if res.err != nil {
			t.Fatal(res.err)
		}
		if res.r.Revision != rev || serviceCount(t, res.r.Body) != 4 {
			t.Fatalf("a caller that arrived after revision %d was committed got revision %d with %d services", rev, res.r.Revision, serviceCount(t, res.r.Body))
		}
		total += res.reads
	}
	// The held read (1), then one more for all seven: revision + change.
	if total != 3 {
		t.Fatalf("%d fresh callers read %d documents in all, want 3 (they share the read after the one in flight)", callers+1, total)
	}
}

var cacheSeeds = flag.Int("cache.seeds", 3, "how many random change sequences TestCacheMatchesFullRender runs (go test ./pkg/osb -run TestCacheMatchesFullRender -cache.seeds=N)")

// TestCacheMatchesFullRender is the property: whatever sequence of
// changes the registries make, a warm cache that refreshes now and then
// serves, once every change is committed, exactly the body a fresh full
// render gives at that moment, with the tag of its revision; and a
// refresh that applies k changes reads k + 1 documents. Two registries
// write creates, updates, renames, marks, unmarks, deletes and
// held-back versions of specs that share names (the oldest keeps one)
// and explicit ids (freed by one registry, taken by the other), commit
// in any order, sometimes while the cache refreshes or an instance
// starts cold (so full renders see pending changes); changes are pruned
// under the cache and come in bursts beyond its bound. Every step runs
// against the real store on the emulator.
func TestCacheMatchesFullRender(t *testing.T) {
	t.Parallel()
	for seed := range *cacheSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, uint64(seed))
			for step := range 120 {
				switch step {
				case 30, 90: // a burst of more changes than specs held
					w.burst()
					w.checkpoint("after a burst")
					continue
				case 60: // changes the cache needs, pruned
					w.upsertRandom()
					w.commitAll()
					w.prune()
					w.upsertRandom()
					w.checkpoint("after a prune")
					continue
				}
				switch x := w.r.IntN(100); {
				case x < 36:
					w.upsertRandom()
				case x < 48:
					w.markRandom()
				case x < 56:
					w.deleteRandom()
				case x < 62:
					w.holdRandom()
				case x < 66:
					w.move()
				case x < 74:
					w.commitOne()
				case x < 84:
					w.refresh()
				case x < 88:
					w.restart()
				case x < 90:
					w.prune()
				default:
					w.checkpoint(fmt.Sprintf("step %d", step))
				}
			}
			w.checkpoint("at the end")
			t.Logf("refreshes: %v", w.paths)
			for _, p := range []string{"changes", "full: bound", "full: gone"} {
				if w.paths[p] == 0 {
					t.Errorf("no refresh took the %q path: the sequence did not test it", p)
				}
			}
		})
	}
}

// world is the state of one random sequence.
type world struct {
	e      *env
	r      *rand.Rand
	c      *osb.Cache
	ids    []string // every spec id written
	seen   map[string]bool
	served *osb.Rendered // what the cache served last
	paths  map[string]int
	n      int // a counter for unique run ids and names
}

var (
	worldRegistries = []string{testReg, "other"}
	worldNames      = []string{"pg", "mq", "kv", "web"}
	worldIDs        = []string{"", "", "shared-0", "shared-1"} // "": derived from registry and name
)

func newWorld(t *testing.T, seed uint64) *world {
	e := newEnv(t, time.Minute)
	w := &world{e: e, r: rand.New(rand.NewPCG(seed, 0x5eed)), seen: map[string]bool{}, paths: map[string]int{}}
	// A few specs besides the contested ones, so that most refreshes are
	// within the bound; they are marked, held back and deleted too.
	for _, o := range e.seedMany(8) {
		w.seen[o.Spec.ID] = true
		w.ids = append(w.ids, o.Spec.ID)
	}
	w.restart()
	return w
}

func (w *world) pick(xs []string) string { return xs[w.r.IntN(len(xs))] }

func (w *world) upsertRandom() {
	o := offerSpec(w.e.t, w.pick(worldRegistries), w.pick(worldNames), w.pick(worldIDs), w.r.IntN(3))
	w.upsert(o)
}

func (w *world) upsert(o store.Offer) {
	w.e.upsert(o)
	if !w.seen[o.Spec.ID] {
		w.seen[o.Spec.ID] = true
		w.ids = append(w.ids, o.Spec.ID)
	}
}

// stored returns a random stored spec in one of the states ("" for any).
func (w *world) stored(states ...string) *store.SpecRecord {
	all, err := w.e.st.AllSpecs(w.e.ctx)
	if err != nil {
		w.e.t.Fatal(err)
	}
	var in []store.SpecRecord
	for _, r := range all {
		if len(states) == 0 || slices.Contains(states, r.State) {
			in = append(in, r)
		}
	}
	if len(in) == 0 {
		return nil
	}
	return &in[w.r.IntN(len(in))]
}

func (w *world) markRandom() {
	if rec := w.stored(store.StateActive); rec != nil {
		w.n++
		if _, err := w.e.st.MarkSpec(w.e.ctx, rec.Registry, rec.ID, fmt.Sprintf("run-%d", w.n)); err != nil {
			w.e.t.Fatal(err)
		}
	}
}

func (w *world) deleteRandom() {
	if rec := w.stored(store.StateMarked); rec != nil {
		w.n++
		if _, _, err := w.e.st.DeleteMarked(w.e.ctx, rec.Registry, rec.ID, fmt.Sprintf("sweep-%d", w.n), time.Now().Add(time.Hour)); err != nil {
			w.e.t.Fatal(err)
		}
	}
}

func (w *world) holdRandom() {
	if rec := w.stored(); rec != nil {
		h := store.HeldBackSpec{SpecID: rec.ID, Name: rec.Name, Digest: fmt.Sprintf("sha256:held-%d", w.r.IntN(3)), Blockers: []string{"plan small is used by 1 instance"}}
		if _, err := w.e.st.HoldBack(w.e.ctx, rec.Registry, h, "run-hold"); err != nil {
			w.e.t.Fatal(err)
		}
	}
}

// move is a spec with an explicit id leaving its registry (marked,
// deleted) and taken up by the other, its changes pending in both.
func (w *world) move() {
	id := w.pick(worldIDs[2:])
	rec, err := w.e.st.GetSpec(w.e.ctx, id)
	if err != nil {
		w.upsert(offerSpec(w.e.t, w.pick(worldRegistries), w.pick(worldNames), id, 0))
		return
	}
	w.n++
	run := fmt.Sprintf("run-%d", w.n)
	if rec.State == store.StateActive {
		if _, err := w.e.st.MarkSpec(w.e.ctx, rec.Registry, id, run); err != nil {
			w.e.t.Fatal(err)
		}
	}
	w.e.deleteMarked(rec.Registry, id, run+"-sweep")
	other := worldRegistries[0]
	if rec.Registry == other {
		other = worldRegistries[1]
	}
	// A name of its own: a newcomer loses a contested name, which would
	// hide what the move did.
	w.upsert(offerSpec(w.e.t, other, "moved-"+id, id, w.r.IntN(3)))
}

func (w *world) commitOne() { w.e.commitAll(w.pick(worldRegistries)) }

func (w *world) commitAll() int64 {
	// In a random order: which registry's changes get the lower
	// revisions is what the cache must not depend on.
	regs := slices.Clone(worldRegistries)
	w.r.Shuffle(len(regs), func(i, j int) { regs[i], regs[j] = regs[j], regs[i] })
	return w.e.commitAll(regs...)
}

func (w *world) prune() {
	if _, err := w.e.st.PruneChanges(w.e.ctx, time.Now().Add(2*time.Hour), 10000); err != nil {
		w.e.t.Fatal(err)
	}
}

// burst creates more specs than the cache can hold in the catalog.
func (w *world) burst() {
	w.n++
	for i := range len(w.ids) + 2 {
		w.upsert(offerSpec(w.e.t, w.pick(worldRegistries), fmt.Sprintf("burst-%d-%d", w.n, i), "", 0))
	}
	w.commitAll()
}

// restart is a cold instance: its first request renders in full, maybe
// while changes are pending.
func (w *world) restart() {
	w.c = w.e.newCache(time.Second)
	w.c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) // conflicts are logged on every render
	w.served = nil
	w.refresh()
}

// refresh is a request after the window.
func (w *world) refresh() *osb.Rendered {
	t := w.e.t
	t.Helper()
	w.e.clock.Advance(time.Second)
	r, reads := w.e.get(w.c)
	how := w.c.LastRefresh()
	w.paths[how]++
	if r.ETag != catalog.ETag(r.Revision, string(r.Body)) {
		t.Fatalf("ETag %s is not the tag of revision %d and its body", r.ETag, r.Revision)
	}
	if how == "changes" {
		if k := r.Revision - w.served.Revision; reads != 1+k {
			t.Fatalf("a refresh from revision %d to %d read %d documents, want %d", w.served.Revision, r.Revision, reads, 1+k)
		}
	}
	w.served = r
	return r
}

// checkpoint commits everything, refreshes and compares.
func (w *world) checkpoint(what string) {
	w.commitAll()
	w.e.wantFullRender(what, w.refresh())
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
