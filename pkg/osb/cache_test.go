package osb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

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
	var c catalog.Catalog
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

// renderAsBefore is the cache's refresh before it applied changes (a full
// render at every new revision), the baseline of the tests and benchmarks:
// the revision, every active spec read now, oldest first, through
// catalog.RenderOfferings, encoded, tagged.
func renderAsBefore(ctx context.Context, st *store.Store) (*plainRender, error) {
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
	return &plainRender{Revision: rev, Body: body, ETag: catalog.ETag(rev, string(body))}, nil
}

// plainRender is a catalog rendered into one buffer, as the broker did
// before it held pieces.
type plainRender struct {
	Revision int64
	Body     []byte
	ETag     string
}

// wantFullRender checks a served catalog against fullRender and the
// store's revision, with its ETag.
func (e *env) wantFullRender(what string, r *osb.Rendered) {
	e.t.Helper()
	want := e.fullRender()
	if !bytes.Equal(r.Body(), want) {
		e.t.Fatalf("%s: the cache serves\n%s\na full render is\n%s", what, r.Body(), want)
	}
	rev, err := e.st.Revision(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.Revision != rev || r.ETag != catalog.ETag(rev, string(r.Body())) {
		e.t.Fatalf("%s: revision %d, ETag %s; want %d and %s", what, r.Revision, r.ETag, rev, catalog.ETag(rev, string(r.Body())))
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
	e.commit()
	return offers
}

// TestCacheReads pins the cost model docs/deploy.md#what-the-catalog-costs
// promises for the catalog: a warm instance answers from memory inside the
// window, re-checks with one read after it, and pays for the changes only
// when the revision moved.
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
	if n := serviceCount(t, cold.Body()); n != len(specs) {
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
	if r.ETag == cold.ETag || serviceCount(t, r.Body()) != len(specs)+1 {
		t.Fatalf("after a bump: ETag %s, %d services; want a new tag and %d", r.ETag, serviceCount(t, r.Body()), len(specs)+1)
	}
	e.wantFullRender("after a create", r)

	// A mark is one change too: the spec leaves, nothing else is read.
	e.mark(specs[0].ID, "run-1")
	e.clock.Advance(window)
	r, reads = e.get(c)
	if reads != 2 || serviceCount(t, r.Body()) != len(specs) {
		t.Fatalf("after marking one: %d reads, %d services; want 2 and %d", reads, serviceCount(t, r.Body()), len(specs))
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
	if string(r.Body()) != `{"services":[]}` {
		t.Fatalf("empty catalog body %s, want an empty services list", r.Body())
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

// TestCacheRefreshReadsChanges is the goal of the incremental refresh, at
// two catalog sizes: a refresh after k changes reads the revision and the k
// changes, nothing that grows with the catalog, up to k = the specs the
// instance holds; one change more and it renders in full, 1 + the active
// specs. The body is a full render's every time.
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
				e.commit()
				// The revision and the changes.
				e.refreshed(c, fmt.Sprintf("after %d changes", k), int64(1+k), "changes")
			}
			// A mark, a create and an unmark: 3 changes, 3 + 1 reads.
			e.markOnly(testReg, offers[1].Spec.ID, "run-m")
			e.upsert(offerSpec(t, testReg, "newcomer", "", 0))
			e.upsert(offerSpec(t, testReg, offers[1].Spec.Name, "", version))
			e.commit()
			e.refreshed(c, "after a mark, a create and an unmark", 4, "changes")
			// More changes than the n+1 specs held (each updated, one of
			// them marked): a full render of the n left.
			update(n)
			e.upsert(offerSpec(t, testReg, "newcomer", "", 1))
			e.markOnly(testReg, offers[2].Spec.ID, "run-m2")
			e.commit()
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
	e.commit()
	prune()
	e.refreshed(c, "all changes pruned", 1+1+5, "full: gone")
	// The first two of three pruned: the one left is read, then the render.
	e.upsert(offerSpec(t, testReg, offers[0].Spec.Name, "", 2))
	e.upsert(offerSpec(t, testReg, offers[1].Spec.Name, "", 2))
	e.commit()
	prune()
	e.upsert(offerSpec(t, testReg, offers[2].Spec.Name, "", 2))
	e.commit()
	e.refreshed(c, "the first changes pruned", 1+1+5, "full: gone")
	// And it goes on from there with changes again.
	e.upsert(offerSpec(t, testReg, offers[3].Spec.Name, "", 2))
	e.commit()
	e.refreshed(c, "after the fallback", 2, "changes")
}

// TestCacheFallsBackOnChangesFromOlderCode: a change that puts a spec in
// the catalog without its created_at (written before changes carried it)
// cannot be placed in the render order, so the refresh renders in full.
func TestCacheFallsBackOnChangesFromOlderCode(t *testing.T) {
	t.Parallel()
	e, offers, c := warmOn(t, 4)
	e.upsert(offerSpec(t, testReg, offers[0].Spec.Name, "", 1))
	rev := e.commit()
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
	e.commit()
	e.refreshed(c, "after the fallback", 2, "changes")
}
