package functions_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestE2ECatalogNoCache: with a refresh window of an hour, a platform
// that sends no Cache-Control is served the catalog its warm instance
// holds (that is the staleness bound the window buys), while `specsync
// catalog`, which sends Cache-Control: no-cache, shows what the last
// bootstrap did, and leaves the instance holding it.
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
	s.cli(nil, "bootstrap", "--wait", poll).must(t, 0, "second bootstrap")
	if c, _ := s.catalog(); names(c) != "alpha,beta,gamma" {
		t.Fatalf("a plain GET inside the window: %s, want the catalog the instance holds (alpha,beta,gamma)", names(c))
	}
	var cat osbCatalog
	r := s.cli(nil, "catalog", "--output=json").must(t, 0, "catalog json")
	if err := json.Unmarshal([]byte(r.stdout), &cat); err != nil || names(cat) != "alpha,gamma" {
		t.Fatalf("specsync catalog after the bootstrap: %v %s, want alpha,gamma", err, r.stdout)
	}
	r = s.cli(nil, "catalog").must(t, 0, "catalog table")
	r.contains(t, "catalog table", "alpha", "gamma")
	if c, _ := s.catalog(); names(c) != "alpha,gamma" {
		t.Fatalf("a plain GET after the fresh read: %s, want alpha,gamma", names(c))
	}
	// The header alone does it, for any client.
	if fresh := s.do(http.MethodGet, "/v2/catalog", "broker", nil, "Cache-Control", "no-cache"); fresh.status != http.StatusOK || fresh.header.Get("X-Specsync-Firestore-Reads") != "1" {
		t.Fatalf("no-cache, nothing changed: %d after %s reads, want 200 after 1", fresh.status, fresh.header.Get("X-Specsync-Firestore-Reads"))
	}
}
