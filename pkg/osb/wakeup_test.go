package osb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// A waiting long poll is answered at once after the commit: the
// listener wakes it. Every slower path is made minutes long here (the
// cache's refresh window an hour on a clock that never moves, the
// waiter's look at the cache every ten minutes, its wait ten minutes),
// so the bound below, generous against a loaded machine, is still far
// below any of them: a waiter the listener did not wake cannot be
// answered within it by luck.
func TestWaitingLongPollIsWokenByTheCommit(t *testing.T) {
	const (
		slow  = 10 * time.Minute // every path but the wake-up
		bound = 15 * time.Second // from the commit to the answer
	)
	e := newEnv(t, time.Hour)
	e.broker.TuneWaiterFallback(slow, 2*slow)
	e.seed(parseSpec(t, specYAML("alpha")))
	if _, r := e.catalog(); r.header.Get("X-Catalog-Revision") != "1" {
		t.Fatalf("X-Catalog-Revision %q, want 1", r.header.Get("X-Catalog-Revision"))
	}

	// The poll is cancelled when the test ends, so that a failing run
	// does not hold the server (and the test) for its ten minutes.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req := e.request(http.MethodGet, fmt.Sprintf("/v2/catalog/changes?since=1&wait=%s", slow), "").WithContext(ctx)
	answered := make(chan polled, 1)
	go func() {
		r, err := e.try(req)
		p := polled{r: r, err: err}
		if err == nil && r.status == http.StatusOK {
			p.err = json.Unmarshal(r.body, &p.page)
		}
		answered <- p
	}()
	e.waitingOn(t, 1)

	beta := parseSpec(t, specYAML("beta"))
	if _, err := e.st.UpsertSpec(e.ctx, store.Offer{Registry: testReg, Entry: beta.Name, Ref: "registry.test/beta:latest",
		Spec: beta, Digest: spec.Digest(beta), Run: "seed"}); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	e.commit()
	select {
	case p := <-answered:
		took := time.Since(committed)
		wantChange(t, p, 2, "beta")
		if took > bound {
			t.Fatalf("the waiting long poll was answered %s after the commit, want within %s (the listener's wake-up; every other path takes %s)", took, bound, slow)
		}
		t.Logf("answered %s after the commit", took.Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("the waiting long poll was not answered within %s of the commit: the listener did not wake it (every other path takes %s)", bound, slow)
	}
}
