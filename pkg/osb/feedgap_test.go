package osb_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

// The feed's gap check, where only part of the history is pruned: with
// revisions 1 and 2 expired and deleted (as the TTL policy does) and 3 to
// 5 kept, a watcher at 0 or 1 needs a change that is gone and must get
// 410, with or without a limit, never a page that starts past since+1
// (it would skip revisions silently); a watcher at 2 or later reads on.
// A check reduced to "no changes at all" passes every other test.
func TestFeedGoneWhenThePrefixIsPruned(t *testing.T) {
	e := newEnv(t, 0)
	for _, name := range []string{"a1", "a2", "a3", "a4", "a5"} {
		e.seed(parseSpec(t, specYAML(name)))
	}
	if rev := e.commit(); rev != 5 {
		t.Fatalf("revision %d after five specs, want 5", rev)
	}
	snaps, err := e.client.Collection(store.ChangesCollection).Where("revision", "<=", 2).Documents(e.ctx).GetAll()
	if err != nil || len(snaps) != 2 {
		t.Fatalf("changes 1 and 2: %d %v", len(snaps), err)
	}
	past := time.Now().Add(-time.Hour)
	for _, s := range snaps {
		if _, err := s.Ref.Update(e.ctx, []firestoreUpdate{{Path: "expires_at", Value: past}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.st.PruneChanges(e.ctx, time.Now(), 100); err != nil || n != 2 {
		t.Fatalf("pruned %d: %v", n, err)
	}
	for _, since := range []int64{0, 1} {
		for _, limit := range []string{"", "&limit=1", "&limit=2", "&limit=1000"} {
			path := fmt.Sprintf("/v2/catalog/changes?since=%d%s", since, limit)
			r := e.do(http.MethodGet, path, "")
			var gone api.Gone
			if r.status != http.StatusGone || json.Unmarshal(r.body, &gone) != nil || gone.Revision != 5 {
				t.Errorf("GET %s with 1 and 2 pruned: %d %s, want 410 at revision 5", path, r.status, r.body)
			}
		}
	}
	for _, c := range []struct {
		since      int64
		limit      string
		first, end int64
	}{{2, "", 3, 5}, {2, "&limit=1", 3, 3}, {3, "", 4, 5}, {4, "&limit=5", 5, 5}} {
		path := fmt.Sprintf("/v2/catalog/changes?since=%d%s", c.since, c.limit)
		r := e.do(http.MethodGet, path, "")
		var page api.ChangePage
		if r.status != http.StatusOK || json.Unmarshal(r.body, &page) != nil || len(page.Changes) == 0 {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
			continue
		}
		if page.Changes[0].Revision != c.first || page.Next != c.end {
			t.Errorf("GET %s: changes from %d, next %d; want from %d, next %d", path, page.Changes[0].Revision, page.Next, c.first, c.end)
		}
	}
}
