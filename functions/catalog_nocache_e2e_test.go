package functions_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
)

// TestE2ECatalogNoCache: with a refresh window of an hour, a platform
// that sends no Cache-Control is served the catalog its warm instance
// holds (that is the staleness bound the window buys), while `specsync
// catalog`, which sends Cache-Control: no-cache, shows what the last
// bootstrap did, and leaves the instance holding it; so does `specsync
// bootstrap --wait`, which ends with a no-cache read.
func TestE2ECatalogNoCache(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t, "alpha", "beta")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB), "SPECSYNC_CATALOG_REFRESH=1h")
	const poll = "--poll-interval=200ms"
	s.cli(nil, "bootstrap", "--wait", poll).must(t, 0, "first bootstrap")
	if c, _ := s.catalog(); names(c) != "alpha,beta,gamma" {
		t.Fatalf("after the first bootstrap: %s", names(c))
	}

	a.set(false, "alpha") // beta leaves team-a: the next run marks it
	// Started and followed over HTTP, as a scheduler would: the CLI's
	// bootstrap --wait ends with a no-cache catalog read of its own.
	r := s.do(http.MethodPost, "/bootstrap", "admin", nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /bootstrap: %d %s", r.status, r.body)
	}
	var start struct{ Operation string }
	r.json(t, &start)
	if op := s.poll(start.Operation); op.State != api.Succeeded {
		t.Fatalf("second bootstrap: %s (%s)", op.State, op.Description)
	}
	if c, _ := s.catalog(); names(c) != "alpha,beta,gamma" {
		t.Fatalf("a plain GET inside the window: %s, want the catalog the instance holds (alpha,beta,gamma)", names(c))
	}
	var cat catalog.Catalog
	out := s.cli(nil, "catalog", "--output=json").must(t, 0, "catalog json")
	if err := json.Unmarshal([]byte(out.stdout), &cat); err != nil || names(cat) != "alpha,gamma" {
		t.Fatalf("specsync catalog after the bootstrap: %v %s, want alpha,gamma", err, out.stdout)
	}
	out = s.cli(nil, "catalog").must(t, 0, "catalog table")
	out.contains(t, "catalog table", "alpha", "gamma")
	if c, _ := s.catalog(); names(c) != "alpha,gamma" {
		t.Fatalf("a plain GET after the fresh read: %s, want alpha,gamma", names(c))
	}
	// The header alone does it, for any client.
	if fresh := s.do(http.MethodGet, "/v2/catalog", "broker", nil, "Cache-Control", "no-cache"); fresh.status != http.StatusOK || fresh.header.Get("X-Specsync-Firestore-Reads") != "1" {
		t.Fatalf("no-cache, nothing changed: %d after %s reads, want 200 after 1", fresh.status, fresh.header.Get("X-Specsync-Firestore-Reads"))
	}
	a.set(false, "alpha", "beta") // beta is back: unmarked by the next run
	s.cli(nil, "bootstrap", "--wait", poll).must(t, 0, "third bootstrap")
	if c, _ := s.catalog(); names(c) != "alpha,beta,gamma" {
		t.Fatalf("a plain GET after bootstrap --wait: %s, want alpha,beta,gamma", names(c))
	}
}
