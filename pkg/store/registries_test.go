package store_test

import (
	"context"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

func TestRegistryStatusRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	empty, err := st.RegistryStatus(ctx, "never-run")
	if err != nil || empty.Name != "never-run" || empty.ListingDigest != "" {
		t.Fatalf("unknown registry status %+v %v", empty, err)
	}
	run := store.Run{ID: "r", Result: api.ResultFetchFailed, Error: "boom"}
	if err := st.RecordRun(ctx, "a", run, false, "", "", 0); err != nil {
		t.Fatal(err)
	}
	run2 := store.Run{ID: "r2", Result: api.ResultSucceeded, Counts: store.RunCounts{Created: 2}}
	if err := st.RecordRun(ctx, "a", run2, true, "sha256:x", "etag", 1); err != nil {
		t.Fatal(err)
	}
	if err := st.SetContested(ctx, "a", "b", []string{"id1"}); err != nil {
		t.Fatal(err)
	}
	got, err := st.RegistryStatus(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.LastRun.Error != "" || got.LastRun.Counts.Created != 2 || got.ListingDigest != "sha256:x" || got.Marked != 1 {
		t.Fatalf("status %+v: the second run must replace the first whole", got)
	}
	if len(got.ContestedBy["b"]) != 1 {
		t.Fatalf("contested_by %+v", got.ContestedBy)
	}
	// A later run of a keeps what b wrote; b withdrawing removes it.
	if err := st.RecordRun(ctx, "a", run2, true, "sha256:x", "etag", 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.RegistryStatus(ctx, "a"); len(got.ContestedBy["b"]) != 1 {
		t.Fatal("a's own run erased another registry's note")
	}
	if err := st.SetContested(ctx, "a", "b", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.RegistryStatus(ctx, "a"); len(got.ContestedBy) != 0 {
		t.Fatalf("withdrawn note remains: %+v", got.ContestedBy)
	}
	all, err := st.RegistryStatuses(ctx)
	if err != nil || len(all) != 1 || all[0].Name != "a" {
		t.Fatalf("statuses %+v %v", all, err)
	}
}
