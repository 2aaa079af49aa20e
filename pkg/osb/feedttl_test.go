package osb_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

// Firestore's TTL policy deletes expired changes some time after they
// expire, in no particular order (the emulator runs no TTL: the test
// deletes the documents as it would). Whatever is gone, a watcher never
// skips a revision: a page starts at since+1 and stops before the first
// revision that is gone, and a watcher that reaches the hole gets 410
// Gone with the current revision. A long poll waiting at the head while
// history is deleted beneath it gets the next commit's changes, whole.
func TestFeedUnderTTLDeletesInAnyOrder(t *testing.T) {
	e := newEnv(t, 0)
	const n = 8
	for i := 1; i <= n; i++ {
		e.seed(parseSpec(t, specYAML(fmt.Sprintf("t%d", i))))
	}
	if rev := e.commit(); rev != n {
		t.Fatalf("revision %d, want %d", rev, n)
	}
	// A watcher waiting at the head.
	waiting := e.longPoll(n)
	e.waitingOn(t, 1)

	// TTL deletes 6, then 2, then 4 (the order its sweep found them in).
	gone := map[int64]bool{}
	expire := func(rev int64) {
		t.Helper()
		snaps, err := e.client.Collection(store.ChangesCollection).Where("revision", "==", rev).Documents(e.ctx).GetAll()
		if err != nil || len(snaps) != 1 {
			t.Fatalf("change %d: %d %v", rev, len(snaps), err)
		}
		// Expired first (TTL deletes only what has), then deleted.
		if _, err := snaps[0].Ref.Update(e.ctx, []firestoreUpdate{{Path: "expires_at", Value: time.Now().Add(-time.Hour)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := snaps[0].Ref.Delete(e.ctx); err != nil {
			t.Fatal(err)
		}
		gone[rev] = true
	}
	for _, rev := range []int64{6, 2, 4} {
		expire(rev)
	}

	// The waiting watcher is not disturbed: the next commit is its answer.
	e.seed(parseSpec(t, specYAML("t9")))
	if rev := e.commit(); rev != n+1 {
		t.Fatalf("revision %d, want %d", rev, n+1)
	}
	wantChange(t, <-waiting, n+1, "t9")

	// Every watcher behind, followed page by page as `specsync changes
	// --follow` does, sees each revision after its own once, in order,
	// up to the first that is gone, and then 410 at the current revision.
	rng := rand.New(rand.NewPCG(34, 6))
	for since := int64(0); since <= n; since++ {
		limit := 1 + rng.IntN(4)
		at, seen := since, []int64{}
		for at < n+1 {
			path := fmt.Sprintf("/v2/catalog/changes?since=%d&limit=%d", at, limit)
			r := e.do(http.MethodGet, path, "")
			if r.status == http.StatusGone {
				var g api.Gone
				if json.Unmarshal(r.body, &g) != nil || g.Revision != n+1 || !gone[at+1] {
					t.Errorf("GET %s: 410 %s; want 410 at revision %d only when %d is gone", path, r.body, n+1, at+1)
				}
				break
			}
			var page api.ChangePage
			if r.status != http.StatusOK || json.Unmarshal(r.body, &page) != nil || len(page.Changes) == 0 {
				t.Fatalf("GET %s: %d %s", path, r.status, r.body)
			}
			for i, c := range page.Changes {
				if c.Revision != at+1+int64(i) || gone[c.Revision] {
					t.Fatalf("GET %s: change %d of the page is revision %d (%s): a revision skipped", path, i, c.Revision, r.body)
				}
				seen = append(seen, c.Revision)
			}
			if page.Next != page.Changes[len(page.Changes)-1].Revision {
				t.Fatalf("GET %s: next %d past the changes it gave", path, page.Next)
			}
			at = page.Next
		}
		// Where it stopped: at the head, or just before a gone revision.
		if at != n+1 && !gone[at+1] {
			t.Errorf("a watcher from %d stopped at %d (saw %v)", since, at, seen)
		}
	}
	// TTL catches up with the rest of what expired: a pruned prefix.
	for rev := int64(1); rev <= n; rev++ {
		if !gone[rev] {
			expire(rev)
		}
	}
}
