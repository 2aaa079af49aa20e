package store_test

import (
	"errors"
	"testing"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// A spec keeps no counters, so a provision no longer changes the spec's
// update time, and a run's conditional write cannot tell that an
// instance came after it read the spec's usage. A new version that drops
// a plan or a platform is therefore adopted only after a query of the
// spec's instances in the adopting transaction (which locks their range):
// an instance on what it drops refuses the write, retryably, whichever
// path writes it (a run's batch or the per-spec upsert). A version that
// drops nothing costs nothing more.
func TestNewVersionNeverStrandsALateInstance(t *testing.T) {
	e := newStoreEnv(t)
	large := e.plan("large")
	read, err := e.st.RegistrySpecs(e.ctx, "r1", []string{e.o.Spec.ID})
	if err != nil || len(read) != 1 || read[0].Instances != 0 {
		t.Fatalf("read the spec: %+v %v", read, err)
	}
	// After the read: an instance on the plan version two drops, and one
	// on a platform it drops.
	if _, err := e.st.CreateInstance(e.ctx, store.Instance{ID: "late", SpecID: e.o.Spec.ID, PlanID: large}); err != nil {
		t.Fatal(err)
	}
	v2 := updatable(t, "r1", "db")
	v2.Spec.Plans = v2.Spec.Plans[:1] // small only
	v2.Digest = spec.Digest(v2.Spec)

	stranded := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrStranded) || !failure.Is(err, failure.Precondition) || !failure.Retryable(err) {
			t.Fatalf("%s of a version dropping a plan in use: %v, want a retryable ErrStranded", what, err)
		}
	}
	_, err = e.st.UpdateSpecs(e.ctx, []store.SpecUpdate{{Offer: v2, Read: read[0]}})
	stranded("the run's batch", err)
	_, err = e.st.UpsertSpec(e.ctx, v2)
	stranded("the upsert", err)
	if rec := e.counts(); rec.Digest != e.o.Digest || rec.PlanInstances[large] != 1 {
		t.Fatalf("the spec after refused adoptions: digest %s (want %s), usage %v", rec.Digest, e.o.Digest, rec.PlanInstances)
	}

	// A platform is dropped the same way.
	if _, err := e.st.DeleteInstance(e.ctx, "late"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateInstance(e.ctx, store.Instance{ID: "on-arm", SpecID: e.o.Spec.ID, PlanID: e.plan("small"), Platform: "linux/arm64"}); err != nil {
		t.Fatal(err)
	}
	amd := updatable(t, "r1", "db")
	amd.Spec.Platforms = amd.Spec.Platforms[:1]
	amd.Digest = spec.Digest(amd.Spec)
	_, err = e.st.UpsertSpec(e.ctx, amd)
	stranded("the upsert dropping linux/arm64", err)

	// A version that drops nothing: no query, no read.
	same := updatable(t, "r1", "db")
	same.Spec.Description = "d, version two"
	same.Digest = spec.Digest(same.Spec)
	read, err = e.st.RegistrySpecs(e.ctx, "r1", []string{e.o.Spec.ID})
	if err != nil {
		t.Fatal(err)
	}
	var res []store.UpsertResult
	cost := e.delta(func() {
		if res, err = e.st.UpdateSpecs(e.ctx, []store.SpecUpdate{{Offer: same, Read: read[0]}}); err != nil {
			t.Fatal(err)
		}
	})
	if res[0].Outcome != store.Updated || cost.Reads != 0 {
		t.Fatalf("a version dropping nothing: %+v at %+v, want updated at no read", res, cost)
	}

	// Once the instance is gone, the version that drops its platform is
	// adopted.
	if _, err := e.st.DeleteInstance(e.ctx, "on-arm"); err != nil {
		t.Fatal(err)
	}
	if r, err := e.st.UpsertSpec(e.ctx, amd); err != nil || r.Outcome != store.Updated {
		t.Fatalf("adopt once unused: %+v %v", r, err)
	}
}
