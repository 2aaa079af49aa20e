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
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sirupsen/logrus"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// The real sender, for a signature pushed after the image: the reference
// distribution registry notifies what cosign's pushes are (v2's
// sha256-<hex>.sig tag; v3's bundle, a manifest pushed by digest, with
// the referrers tag schema's index, as the registry lacks the API), and
// each makes one message naming the signed repository's entry for a
// registry that verifies; the image's push under another tag names
// nothing.
func TestHookSignaturePushFromTheDistributionRegistry(t *testing.T) {
	logrus.SetOutput(io.Discard)
	var hook atomic.Pointer[httputil.ReverseProxy]
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hook.Load().ServeHTTP(w, r) }))
	t.Cleanup(front.Close)
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	cfg.Notifications.Endpoints = []configuration.Endpoint{{
		Name: "specsync", URL: front.URL + "/hooks/signed",
		Headers: http.Header{"Authorization": []string{"Bearer " + bearerSecret}},
		Timeout: 5 * time.Second, Threshold: 3, Backoff: 100 * time.Millisecond,
	}}
	reg := httptest.NewServer(handlers.NewApp(context.Background(), cfg))
	t.Cleanup(reg.Close)
	u, _ := url.Parse(reg.URL)
	e := newHookEnv(t, strings.ReplaceAll(referrerRegistries(t), "registry.example.com", u.Host), 10*time.Millisecond, true)
	target, _ := url.Parse(e.url)
	hook.Store(httputil.NewSingleHostReverseProxy(target))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := emulator.PushSpecImage(ctx, u.Host, "apps/redis", "v2", "bm90IGEgc3BlYw==", nil)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := name.NewRepository(u.Host+"/apps/redis", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	h, err := v1.NewHash(d)
	if err != nil {
		t.Fatal(err)
	}
	// The registry notifies on its own schedule: wait for a message, then
	// for stragglers.
	await := func(what string) []queue.Message {
		t.Helper()
		var msgs []queue.Message
		for deadline := time.Now().Add(30 * time.Second); len(msgs) == 0 && time.Now().Before(deadline); {
			msgs = append(msgs, e.published()...)
		}
		time.Sleep(500 * time.Millisecond)
		msgs = append(msgs, e.published()...)
		if len(msgs) == 0 {
			t.Fatalf("%s: no message; the hook's log:\n%s", what, e.logs.String())
		}
		for _, m := range msgs {
			if m.Registry != "signed" || !slices.Equal(m.Entries, []string{"redis"}) {
				t.Errorf("%s: published %+v; want messages naming redis of the verifying registry", what, msgs)
			}
		}
		return msgs
	}
	owner := verifytest.NewKey(t)
	owner.SignTag(t, repo, h)
	await("cosign v2's .sig tag")
	owner.Sign(t, repo, h)
	await("cosign v3's bundle")
	logs := e.logs.String()
	if !strings.Contains(logs, `"kind":"distribution"`) || strings.Contains(logs, "payload refused") || strings.Contains(logs, "webhook refused") {
		t.Errorf("the registry's notifications were not read as distribution envelopes:\n%s", logs)
	}
}
