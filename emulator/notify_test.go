package emulator

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/pkg/spec"
)

// endpoint records the notification envelopes it receives; it refuses
// the first failFirst of them, as an endpoint that is briefly down does.
type endpoint struct {
	mu        sync.Mutex
	got       []Event
	auth      []string
	failFirst int
	arrived   chan struct{}
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failFirst > 0 {
		e.failFirst--
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != EventsMediaType {
		http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.got = append(e.got, env.Events...)
	e.auth = append(e.auth, r.Header.Get("Authorization"))
	e.arrived <- struct{}{}
}

func (e *endpoint) wait(t *testing.T, n int) []Event {
	t.Helper()
	for range n {
		select {
		case <-e.arrived:
		case <-time.After(20 * time.Second):
			t.Fatalf("waited for notification %d of %d", len(e.events())+1, n)
		}
	}
	return e.events()
}

func (e *endpoint) events() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.got...)
}

// The local registry notifies as a distribution registry with a
// notification endpoint does: after every manifest push or delete it
// accepts, one envelope (the tag push naming its tag and digest), with
// the configured headers, retried while the endpoint is down; nothing
// before Notify is called (the seeding).
func TestRegistryNotifiesPushesAndDeletes(t *testing.T) {
	ctx := context.Background()
	r, err := StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	label := base64.StdEncoding.EncodeToString([]byte("name: redis\ndescription: d\nplans:\n  - name: p\n    description: p\n"))
	if _, err := PushSpecImage(ctx, r.Host(), "specs/seeded", "latest", label, nil); err != nil {
		t.Fatal(err)
	}

	ep := &endpoint{failFirst: 2, arrived: make(chan struct{}, 100)}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	r.Notify(srv.URL+"/hooks/examples", http.Header{"Authorization": {"Bearer local-hook-token"}}, nil)

	// A multi-platform push: two images by digest, then the index by tag.
	digest, err := PushSpecImage(ctx, r.Host(), "specs/redis", "latest", label, []spec.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}})
	if err != nil {
		t.Fatal(err)
	}
	events := ep.wait(t, 3)
	last := events[2]
	if last.Action != "push" || last.Target.Repository != "specs/redis" || last.Target.Tag != "latest" || last.Target.Digest != digest {
		t.Errorf("the tag push's event: %+v, want push of specs/redis:latest at %s", last, digest)
	}
	for _, ev := range events[:2] {
		if ev.Action != "push" || ev.Target.Tag != "" || ev.Target.Digest == "" || ev.Target.Repository != "specs/redis" {
			t.Errorf("a platform image's event: %+v, want a push by digest", ev)
		}
	}
	for _, a := range ep.auth {
		if a != "Bearer local-hook-token" {
			t.Errorf("Authorization %q, want the configured header", a)
		}
	}

	ref, err := name.NewDigest(r.Host() + "/specs/redis@" + digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(ref); err != nil {
		t.Fatal(err)
	}
	events = ep.wait(t, 1)
	if del := events[3]; del.Action != "delete" || del.Target.Digest != digest || del.Target.Repository != "specs/redis" {
		t.Errorf("the delete's event: %+v", del)
	}
	for _, ev := range ep.events() {
		if ev.Target.Repository == "specs/seeded" {
			t.Errorf("an event for a push before Notify: %+v", ev)
		}
	}
}

// The registry counts what it serves, so a benchmark can count a run's
// upstream requests by their user agent.
func TestRegistryCountsRequests(t *testing.T) {
	r, err := StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := PushSpecImage(context.Background(), r.Host(), "specs/a", "latest", "x", nil); err != nil {
		t.Fatal(err)
	}
	puts := r.Requests(func(q Request) bool { return q.Method == http.MethodPut })
	if len(puts) == 0 {
		t.Fatal("a push made no PUT the registry counted")
	}
	ref, _ := name.NewTag(r.Host() + "/specs/a:latest")
	r.ResetRequests()
	if _, err := remote.Head(ref, remote.WithUserAgent("specsync")); err != nil {
		t.Fatal(err)
	}
	heads := r.Requests(func(q Request) bool {
		return q.Method == http.MethodHead && strings.HasPrefix(q.UserAgent, "specsync")
	})
	if len(heads) != 1 || heads[0].Path != "/v2/specs/a/manifests/latest" {
		t.Errorf("after a reset, one HEAD: %+v", r.Requests(nil))
	}
}
