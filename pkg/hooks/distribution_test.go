package hooks_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/sirupsen/logrus"

	// The reference registry registers its storage backend from an init
	// function, as its main package would.
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/pkg/queue"
)

// The real sender: the reference distribution registry, in process,
// configured as its documentation says (notifications.endpoints with an
// Authorization header), notifies the hook of a push; the layer and
// config pushes it announces too are ignored, the manifest push of the
// tag names the entry, and a push of another tag names nothing.
func TestHookFromTheDistributionRegistry(t *testing.T) {
	// NewApp logs through logrus (every HEAD of a blob it does not have
	// yet is an "error"); the test reads the hook's log, not the registry's.
	logrus.SetOutput(io.Discard)
	// The hook's URL is known only once its server runs, and the
	// registry's host must be in the registries file before the hook is
	// built: a front that forwards to the hook once it exists.
	var hook atomic.Pointer[httputil.ReverseProxy]
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hook.Load().ServeHTTP(w, r) }))
	t.Cleanup(front.Close)

	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	cfg.Notifications.Endpoints = []configuration.Endpoint{{
		Name:    "specsync",
		URL:     front.URL + "/hooks/team",
		Headers: http.Header{"Authorization": []string{"Bearer " + bearerSecret}},
		// A request that joins a coalescing window waits for it: the
		// documented advice is a timeout above the window.
		Timeout:   5 * time.Second,
		Threshold: 3,
		Backoff:   100 * time.Millisecond,
	}}
	reg := httptest.NewServer(handlers.NewApp(context.Background(), cfg))
	t.Cleanup(reg.Close)
	u, _ := url.Parse(reg.URL)

	e := newHookEnv(t, registriesYAML(t, u.Host), 10*time.Millisecond, true)
	target, _ := url.Parse(e.url)
	hook.Store(httputil.NewSingleHostReverseProxy(target))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := emulator.PushSpecImage(ctx, u.Host, "apps/redis", "v2", "bm90IGEgc3BlYw==", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := emulator.PushSpecImage(ctx, u.Host, "apps/redis", "latest", "bm90IGEgc3BlYw==", nil); err != nil {
		t.Fatal(err)
	}
	// The registry sends its notifications on its own schedule: wait for
	// the one message (the push of latest), then for stragglers.
	var msgs []queue.Message
	for deadline := time.Now().Add(30 * time.Second); len(msgs) == 0 && time.Now().Before(deadline); {
		msgs = append(msgs, e.published()...)
	}
	time.Sleep(500 * time.Millisecond)
	msgs = append(msgs, e.published()...)
	if len(msgs) != 1 || msgs[0].Registry != "team" || !slices.Equal(msgs[0].Entries, []string{"redis"}) {
		t.Fatalf("published %+v; want one message naming redis (the push of latest, not of v2 nor the blobs)", msgs)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, `"kind":"distribution"`) {
		t.Errorf("no webhook from the registry was read as a distribution envelope:\n%s", logs)
	}
	if !strings.Contains(logs, "webhook concerns nothing the registry selects") {
		t.Errorf("no notification (the blobs, the push of v2) was taken for what it is, an event for nothing selected:\n%s", logs)
	}
	if strings.Contains(logs, "webhook refused") || strings.Contains(logs, "payload refused") {
		t.Errorf("the registry's own notifications were refused:\n%s", logs)
	}
}
