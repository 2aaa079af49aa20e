package osb_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
)

// The feed's revisions are a store's: a store recreated under a watcher
// (the emulator's database emptied, as a new database or the local
// stack's restart does) starts its revisions again, with another epoch,
// and a watcher that comes back with the old epoch is told 410 Gone even
// where the numbers match. A watcher without an epoch is answered as
// before epochs.
func TestFeedEpochTellsARecreatedStore(t *testing.T) {
	client, project := emulatortest.FirestoreProject(t)
	e := newEnvOn(t, client, time.Hour) // the cache never refreshes by itself
	e.seed(parseSpec(t, specYAML("alpha")), parseSpec(t, specYAML("beta")))
	_, r := e.catalog()
	old := r.header.Get(api.EpochHeader)
	if old == "" || r.header.Get(api.RevisionHeader) != "2" {
		t.Fatalf("GET /v2/catalog: epoch %q revision %q, want an epoch at revision 2", old, r.header.Get(api.RevisionHeader))
	}
	r = e.do(http.MethodGet, "/v2/catalog/changes?since=0&epoch="+old, "")
	var page api.ChangePage
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != http.StatusOK || page.Epoch != old || r.header.Get(api.EpochHeader) != old || len(page.Changes) != 2 {
		t.Fatalf("the feed with its epoch: %d %s", r.status, r.body)
	}
	r = e.do(http.MethodGet, "/v2/catalog/changes?since=0&epoch=another-store", "")
	wantGone(t, r, old)

	// The store is recreated, and reaches revision 2 again.
	if err := emulator.ResetFirestore(e.ctx, os.Getenv(emulator.FirestoreEnv), project); err != nil {
		t.Fatal(err)
	}
	e.seed(parseSpec(t, specYAML("gamma")), parseSpec(t, specYAML("delta")))
	now, _, err := e.st.CatalogMetaAt(e.ctx)
	if err != nil || now.Revision != 2 || now.Epoch == "" || now.Epoch == old {
		t.Fatalf("recreated store: %+v %v, want revision 2 and a new epoch", now, err)
	}

	// A watcher back at revision 2 (or 1) of the old store: 410, with the
	// new store's revision and epoch to re-list at, though this instance's
	// cache still holds the old store's catalog.
	for _, since := range []string{"2", "1"} {
		r = e.do(http.MethodGet, "/v2/catalog/changes?since="+since+"&epoch="+old, "")
		wantGone(t, r, now.Epoch)
	}
	// One that waits is told too, not left waiting on revisions of
	// another store.
	r = e.do(http.MethodGet, "/v2/catalog/changes?since=2&wait=2s&epoch="+old, "")
	wantGone(t, r, now.Epoch)
	// Without an epoch, as before: the revision alone.
	r = e.do(http.MethodGet, "/v2/catalog/changes?since=1", "")
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != http.StatusOK || len(page.Changes) != 1 || page.Epoch != now.Epoch {
		t.Fatalf("an old watcher: %d %s", r.status, r.body)
	}
	// The catalog read fresh is the new store's (the cache does not take
	// revision 2 of the new store for its revision 2).
	req := e.request(http.MethodGet, "/v2/catalog", "")
	req.Header.Set("Cache-Control", "no-cache")
	r = e.send(req)
	if r.header.Get(api.EpochHeader) != now.Epoch || !strings.Contains(string(r.body), `"gamma"`) || strings.Contains(string(r.body), `"alpha"`) {
		t.Fatalf("the catalog after the store was recreated: epoch %q %s", r.header.Get(api.EpochHeader), r.body)
	}
}

// wantGone checks the feed's 410: an OSB error body (error, description)
// with the revision and the epoch to re-list at.
func wantGone(t *testing.T, r response, epoch string) {
	t.Helper()
	var g api.Gone
	dec := json.NewDecoder(strings.NewReader(string(r.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil || r.status != http.StatusGone || g.Error != "Gone" || g.Description == "" || g.Epoch != epoch || r.header.Get(api.EpochHeader) != epoch {
		t.Fatalf("want 410 Gone with epoch %q: %d %s (%v)", epoch, r.status, r.body, err)
	}
	if !strings.Contains(g.Description, "epoch") && !strings.Contains(g.Description, "ahead") {
		t.Errorf("the description does not say why: %s", g.Description)
	}
}
