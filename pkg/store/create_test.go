package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/store"
)

// New specs are created a batch to a commit, without reading them: each
// is stored exactly as UpsertSpec would store it, with its pending change.
func TestCreateSpecsBatch(t *testing.T) {
	ctx := context.Background()
	client := checked(t)
	ops := &store.Ops{}
	st := store.New(client).WithOps(ops)
	offers := []store.Offer{offer(t, "r1", "alpha", "small"), offer(t, "r1", "beta", "small", "large"), offer(t, "r1", "gamma", "small")}
	batches, err := store.CreateBatches(offers)
	if err != nil || len(batches) != 1 || batches[0].Len() != 3 {
		t.Fatalf("batches %v %v", batches, err)
	}
	res, err := st.CreateSpecs(ctx, batches[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != store.Created {
			t.Errorf("offer %d: %+v", i, r)
		}
	}
	if got := ops.Snapshot(); got.Reads != 0 || got.Writes != 6 {
		t.Fatalf("three batched creates: %+v, want 0 reads and 6 writes", got)
	}

	// The same specs through UpsertSpec, in another project: the stored
	// documents must not differ but for the times.
	ref := store.New(checked(t))
	for _, o := range offers {
		if _, err := ref.UpsertSpec(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range offers {
		got, err := st.GetSpec(ctx, o.Spec.ID)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.GetSpec(ctx, o.Spec.ID)
		if err != nil {
			t.Fatal(err)
		}
		got.CreatedAt, got.UpdatedAt, want.CreatedAt, want.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", *want) {
			t.Errorf("batched create stored\n%+v\nUpsertSpec stores\n%+v", *got, *want)
		}
	}
	committed := commit(t, st)
	var kinds []string
	for _, c := range committed {
		kinds = append(kinds, string(c.Kind)+":"+c.Name)
		if c.Generation != 1 || !c.InCatalog() || c.Run != "run" {
			t.Errorf("change %+v", c)
		}
	}
	if got := strings.Join(kinds, " "); got != "created:alpha created:beta created:gamma" {
		t.Fatalf("committed %s", got)
	}

	// A second create of the same specs (a run that did not see them)
	// fails its precondition and falls back to the upsert: unchanged.
	res, err = st.CreateSpecs(ctx, batches[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != store.Unchanged {
			t.Errorf("offer %d again: %+v, want unchanged", i, r)
		}
	}
}

// A batch holding a spec id another registry owns fails whole, atomically,
// and is redone one spec at a time: the newcomers are created, the owner
// keeps its spec, and the conflict is reported.
func TestCreateSpecsConflictFallsBack(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	owned := offer(t, "r1", "db", "small")
	if _, err := st.UpsertSpec(ctx, owned); err != nil {
		t.Fatal(err)
	}
	clash := owned
	clash.Registry = "r2"
	offers := []store.Offer{offer(t, "r2", "alpha", "small"), clash, offer(t, "r2", "beta", "small")}
	batches, err := store.CreateBatches(offers)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.CreateSpecs(ctx, batches[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []store.UpsertResult{{Outcome: store.Created}, {Outcome: store.Conflict, Owner: "r1"}, {Outcome: store.Created}}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Fatalf("results %+v, want %+v", res, want)
	}
	rec, err := st.GetSpec(ctx, owned.Spec.ID)
	if err != nil || rec.Registry != "r1" {
		t.Fatalf("the owner lost its spec: %+v %v", rec, err)
	}
	var ofR2 []string
	for _, c := range commit(t, st) {
		if c.Registry == "r2" {
			ofR2 = append(ofR2, string(c.Kind)+":"+c.Name)
		}
	}
	if got := strings.Join(ofR2, " "); got != "created:alpha created:beta" {
		t.Fatalf("r2's changes: %s, want the two creates", got)
	}
}

// Batches stay within a commit's limits: at most 50 specs (100 writes),
// and at most 4 MiB of spec JSON (each stored twice).
func TestCreateBatchesSplit(t *testing.T) {
	var offers []store.Offer
	for i := range 270 {
		offers = append(offers, offer(t, "r1", fmt.Sprintf("s%d", i), "small"))
	}
	batches, err := store.CreateBatches(offers)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range batches {
		sizes = append(sizes, b.Len())
	}
	if fmt.Sprint(sizes) != "[50 50 50 50 50 20]" {
		t.Fatalf("270 small specs in batches of %v, want [50 50 50 50 50 20]", sizes)
	}

	// 200 KiB specs: 400 KiB a spec stored twice, so 10 to a batch.
	big := func(name string) store.Offer {
		o := offer(t, "r1", name, "small")
		o.Spec.Description = strings.Repeat("x", 200<<10)
		return o
	}
	offers = nil
	for i := range 25 {
		offers = append(offers, big(fmt.Sprintf("big%d", i)))
	}
	if batches, err = store.CreateBatches(offers); err != nil {
		t.Fatal(err)
	}
	sizes = nil
	for _, b := range batches {
		sizes = append(sizes, b.Len())
	}
	if fmt.Sprint(sizes) != "[10 10 5]" {
		t.Fatalf("25 specs of 200 KiB in batches of %v, want [10 10 5]", sizes)
	}
}
