package functions_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/pkg/api"
)

// A watcher survives a store recreated under it: while
// `specsync changes --follow` retries a feed that is down (the local
// stack restarting on empty emulators, a database restored), the store
// is emptied and reaches the watcher's revision again with other
// services. Back, the watcher's since matches a revision of the new
// store; its epoch does not, so the feed answers 410 and the watcher
// re-lists, and then follows the new store's changes.
func TestE2EWatcherSurvivesARecreatedStore(t *testing.T) {
	t.Parallel()
	a, u := newIndex(t, "alpha", "beta")
	s := startStack(t, `registries:
  - name: team-a
    type: http
    http: {url: "`+u+`", timeout: 5s}
`)
	s.bootstrap()
	first := s.do(http.MethodGet, "/v2/catalog", "broker", nil)

	// The watcher reaches the stack through a door the test can shut.
	target, _ := url.Parse(s.url)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var shut atomic.Bool
	door := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if shut.Load() {
			http.Error(w, `{"error":"Unavailable","description":"restarting"}`, http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(door.Close)

	cmd := exec.Command(specsyncBinary(t), "changes", "--follow", "--wait", "2s")
	cmd.Env = append(os.Environ(), "SPECSYNC_URL="+door.URL, "SPECSYNC_OUTPUT=", "SPECSYNC_CATALOG_URL=",
		"SPECSYNC_BROKER_USERNAME="+brokerUser, "SPECSYNC_BROKER_PASSWORD="+brokerPass)
	out := &lineWatcher{}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	out.waitFor(t, regexp.MustCompile(`^# listed the catalog \(start\): revision 2, 2 services$`), 20*time.Second)

	// Down: the watcher retries with backoff.
	shut.Store(true)
	out.waitFor(t, regexp.MustCompile(`^# feed unavailable`), 20*time.Second)

	// The store is recreated and reaches revision 2 again, with other
	// services.
	if err := emulator.ResetFirestore(context.Background(), os.Getenv(emulator.FirestoreEnv), s.project); err != nil {
		t.Fatal(err)
	}
	a.set(false, "gamma", "delta")
	s.bootstrap()
	second := s.do(http.MethodGet, "/v2/catalog", "broker", nil, "Cache-Control", "no-cache")
	if rev := second.header.Get(api.RevisionHeader); rev != "2" {
		t.Fatalf("the recreated store is at revision %s, want 2 (the watcher's)", rev)
	}
	e1, e2 := first.header.Get(api.EpochHeader), second.header.Get(api.EpochHeader)
	if e1 == "" || e2 == "" || e1 == e2 {
		t.Fatalf("epochs %q and %q: want two, different", e1, e2)
	}

	// Back up: 410 on the epoch, and a listing of the new store.
	shut.Store(false)
	out.waitFor(t, regexp.MustCompile(`^# listed the catalog \(the store was recreated or restored: epoch `+regexp.QuoteMeta(e2)+`, not `+regexp.QuoteMeta(e1)+` \(410 Gone\)\): revision 2, 2 services$`), 30*time.Second)
	// And the new store's changes from there.
	a.set(false, "gamma", "delta", "omega")
	s.bootstrap()
	out.waitFor(t, regexp.MustCompile(`^3\s+\S+\s+created\s+team-a/omega\s+\S+\s+\(3 services\)$`), 20*time.Second)

	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("changes --follow after an interrupt: %v\n%s", err, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("changes --follow did not stop on an interrupt")
	}
	if strings.Contains(errb.String(), "panic") {
		t.Fatal(errb.String())
	}
}
