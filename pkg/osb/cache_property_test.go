package osb_test

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/store"
)

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
					w.commitAll()
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
func (w *world) stored(states ...api.SpecState) *store.SpecRecord {
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
	if rec := w.stored(api.SpecActive); rec != nil {
		w.n++
		if _, err := w.e.st.MarkSpec(w.e.ctx, rec.Registry, rec.ID, fmt.Sprintf("run-%d", w.n)); err != nil {
			w.e.t.Fatal(err)
		}
	}
}

func (w *world) deleteRandom() {
	if rec := w.stored(api.SpecMarked); rec != nil {
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
	if rec.State == api.SpecActive {
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

func (w *world) commitAll() int64 { return w.e.commit() }

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
	if r.ETag != catalog.ETag(r.Revision, string(r.Body())) {
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
