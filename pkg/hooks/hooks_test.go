package hooks_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/hooks"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/web"
)

// The secrets of these tests are canaries: no response and no log line
// may ever contain one.
const (
	bearerSecret = "canary-bearer-hook-secret-0123456789"
	hmacSecret   = "canary-hmac-hook-secret-9876543210"
)

// hookEnv is the webhook endpoint as the bootstrap function serves it
// (behind the same body limit), publishing to a topic of the Pub/Sub
// emulator that a pull subscription reads back.
type hookEnv struct {
	t      *testing.T
	url    string
	client *pubsub.Client
	sub    string
	logs   *syncBuffer
	// svc serves the requests; serve replaces it.
	svc *atomic.Pointer[hooks.Service]
}

// serve makes svc serve the requests from now on.
func (e *hookEnv) serve(svc *hooks.Service) { e.svc.Store(svc) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// registriesYAML is the registries file of these tests: an OCI registry
// scoped to a prefix with a bearer hook (a distribution registry's or
// Harbor's), GHCR with an HMAC hook (GitHub's), an index document (no
// Selector) with an HMAC hook read from a file, and a registry without a
// hook.
func registriesYAML(t *testing.T, distributionHost string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "index-hook-secret")
	if err := os.WriteFile(file, []byte(hmacSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPECSYNC_TEST_TEAM_HOOK", bearerSecret)
	t.Setenv("SPECSYNC_TEST_GHCR_HOOK", hmacSecret)
	if distributionHost == "" {
		distributionHost = "registry.example.com"
	}
	return fmt.Sprintf(`registries:
  - name: team
    type: oci
    deny: ["internal/.*"]
    oci: {host: %q, prefix: apps, tag: latest, insecure: true}
    hook: {type: bearer, secret_env: SPECSYNC_TEST_TEAM_HOOK}
  - name: ghcr
    type: oci
    oci: {host: ghcr.io, prefix: codertocat, tag: latest}
    hook: {type: hmac, secret_env: SPECSYNC_TEST_GHCR_HOOK}
  - name: index
    type: http
    http: {url: "https://specs.example.com/index.yaml"}
    hook: {type: hmac, secret_file: %q}
  - name: nohook
    type: oci
    oci: {host: registry.example.com}
`, distributionHost, file)
}

// newHookEnv serves the webhooks of the registries file with a window; a
// missing topic makes every publish fail.
func newHookEnv(t *testing.T, registries string, window time.Duration, topicExists bool) *hookEnv {
	t.Helper()
	cfg, err := config.Parse([]byte(registries), "test", ".")
	if err != nil {
		t.Fatal(err)
	}
	client, project := emulatortest.PubSub(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := "projects/" + project + "/topics/reconcile"
	e := &hookEnv{t: t, client: client, sub: "projects/" + project + "/subscriptions/pull", logs: &syncBuffer{}}
	if topicExists {
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: e.sub, Topic: topic}); err != nil {
			t.Fatal(err)
		}
	}
	pub := queue.NewPublisher(client, topic)
	t.Cleanup(pub.Stop)
	svc := hooks.New(hooks.Config{Registries: hooks.FromConfig(cfg), Publisher: pub, Window: window,
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	e.svc = &atomic.Pointer[hooks.Service]{}
	e.serve(svc)
	srv := httptest.NewServer(web.LimitBody(web.DefaultMaxBodyBytes, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.svc.Load().Handler().ServeHTTP(w, r)
	})))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	t.Cleanup(func() {
		if strings.Contains(e.logs.String(), bearerSecret) || strings.Contains(e.logs.String(), hmacSecret) {
			t.Errorf("a hook secret is in the log:\n%s", e.logs.String())
		}
	})
	return e
}

type answer struct {
	status int
	body   []byte
}

func (a answer) accepted(t *testing.T) api.HookAccepted {
	t.Helper()
	var h api.HookAccepted
	if a.status != http.StatusAccepted || json.Unmarshal(a.body, &h) != nil {
		t.Fatalf("answer %d %s, want 202 and what was enqueued", a.status, a.body)
	}
	return h
}

func (a answer) error(t *testing.T, status int, code, says string) {
	t.Helper()
	var eb api.ErrorBody
	if a.status != status || json.Unmarshal(a.body, &eb) != nil || eb.Error != code || !strings.Contains(eb.Description, says) {
		t.Errorf("answer %d %s, want %d %s saying %q", a.status, a.body, status, code, says)
	}
}

// post sends body to /hooks/registry with headers (name, value, ...).
func (e *hookEnv) post(registry string, body []byte, headers ...string) answer {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/hooks/"+registry, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return e.do(req)
}

func (e *hookEnv) do(req *http.Request) answer {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, s := range []string{bearerSecret, hmacSecret} {
		if strings.Contains(string(b), s) {
			e.t.Errorf("a hook secret is in the answer to %s: %s", req.URL.Path, b)
		}
	}
	return answer{resp.StatusCode, b}
}

// published reads every message the topic holds now (each answer is sent
// only after its message was published, so none is still on its way).
func (e *hookEnv) published() []queue.Message {
	e.t.Helper()
	var out []queue.Message
	for empty := 0; empty < 3; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := e.client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: e.sub, MaxMessages: 1000, ReturnImmediately: true})
		cancel()
		if err != nil {
			e.t.Fatalf("pull: %v", err)
		}
		if len(resp.ReceivedMessages) == 0 {
			empty++
			time.Sleep(50 * time.Millisecond)
			continue
		}
		empty = 0
		var ids []string
		for _, m := range resp.ReceivedMessages {
			ids = append(ids, m.AckId)
			msg, err := queue.Decode(m.Message.Data)
			if err != nil || !msg.Event() || m.Message.Attributes["registry"] != msg.Registry {
				e.t.Errorf("published %s (%v), attributes %v: not an event's reconcile message", m.Message.Data, err, m.Message.Attributes)
			}
			out = append(out, msg)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		err = e.client.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: e.sub, AckIds: ids})
		cancel()
		if err != nil {
			e.t.Fatalf("acknowledge: %v", err)
		}
	}
	return out
}

func bearer(secret string) []string { return []string{"Authorization", "Bearer " + secret} }

func signed(secret string, body []byte, event string) []string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return []string{hooks.SignatureHeader, "sha256=" + hex.EncodeToString(mac.Sum(nil)), hooks.GitHubEventHeader, event}
}

// push is a distribution envelope announcing a manifest push of
// repository:tag.
func push(repository, tag string) []byte {
	return fmt.Appendf(nil, `{"events":[{"action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%064x","repository":%q,"tag":%q},"request":{"host":"registry.example.com"}}]}`, 1, repository, tag)
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every answer of the endpoint, and what each publishes: nothing for a
// request refused, nothing for an event the registry does not select, a
// message naming the entries (or the whole registry, for a source that
// names none) for the others.
func TestHookStatuses(t *testing.T) {
	e := newHookEnv(t, registriesYAML(t, ""), 10*time.Millisecond, true)
	before := time.Now()

	// A registry that does not exist and one without a hook: the same
	// answer, so the public endpoint tells nobody which registries exist.
	e.post("nope", push("apps/redis", "latest"), bearer(bearerSecret)...).error(t, http.StatusNotFound, "NotFound", `no webhook for registry "nope"`)
	e.post("nohook", push("redis", "latest"), bearer(bearerSecret)...).error(t, http.StatusNotFound, "NotFound", `no webhook for registry "nohook"`)
	e.post("team/extra", push("apps/redis", "latest"), bearer(bearerSecret)...).error(t, http.StatusNotFound, "NotFound", "no such endpoint")
	get, _ := http.NewRequest(http.MethodGet, e.url+"/hooks/team", nil)
	e.do(get).error(t, http.StatusMethodNotAllowed, "MethodNotAllowed", "allowed: POST")

	// No token, a wrong one, another hook's secret: 401.
	e.post("team", push("apps/redis", "latest")).error(t, http.StatusUnauthorized, "Unauthorized", "needs an Authorization: Bearer header")
	e.post("team", push("apps/redis", "latest"), bearer("not-the-secret-0123456789")...).error(t, http.StatusUnauthorized, "Unauthorized", "not the hook's secret")
	e.post("team", push("apps/redis", "latest"), bearer(hmacSecret)...).error(t, http.StatusUnauthorized, "Unauthorized", "not the hook's secret")
	body := []byte(`{"entries":[]}`)
	e.post("index", body, hooks.SignatureHeader, "sha1=abc").error(t, http.StatusUnauthorized, "Unauthorized", "is not sha256=")
	e.post("index", body, signed(bearerSecret, body, "")...).error(t, http.StatusUnauthorized, "Unauthorized", "does not match the body")

	// Over the body limit, declared or not (chunked): 413, before the
	// secret is even looked at.
	big := append(append([]byte(`{"entries":["`), bytes.Repeat([]byte("a"), web.DefaultMaxBodyBytes)...), `"]}`...)
	e.post("team", big, bearer(bearerSecret)...).error(t, http.StatusRequestEntityTooLarge, "PayloadTooLarge", fmt.Sprintf("larger than %d bytes", web.DefaultMaxBodyBytes))
	chunked, _ := http.NewRequest(http.MethodPost, e.url+"/hooks/team", io.MultiReader(bytes.NewReader(big)))
	chunked.Header.Set("Authorization", "Bearer "+bearerSecret)
	e.do(chunked).error(t, http.StatusRequestEntityTooLarge, "PayloadTooLarge", "larger than")

	// Authenticated but unreadable: 400 naming what was wrong.
	e.post("team", []byte(`{"events":[`), bearer(bearerSecret)...).error(t, http.StatusBadRequest, "MalformedJSON", "not a JSON object")
	e.post("team", []byte(`{"push_data":{"tag":"latest"}}`), bearer(bearerSecret)...).error(t, http.StatusBadRequest, "UnknownPayload", "unknown payload (fields push_data)")

	// Authenticated events for nothing the registry selects: another tag,
	// outside the prefix, denied, a pull. 202, nothing enqueued, and the
	// answer says why.
	for _, b := range [][]byte{push("apps/redis", "v2"), push("other/redis", "latest"), push("apps/internal/db", "latest"), fixture(t, "distribution-pull.json")} {
		h := e.post("team", b, bearer(bearerSecret)...).accepted(t)
		if h.Enqueued || len(h.Entries) != 0 || h.Registry != "team" || h.Kind != hooks.KindDistribution || !strings.Contains(h.Description, "nothing enqueued") {
			t.Errorf("an event for nothing selected: %+v", h)
		}
	}
	if msgs := e.published(); len(msgs) != 0 {
		t.Fatalf("refused or unselected requests published %+v", msgs)
	}

	// Accepted: the entry the registry selects, or the whole registry for
	// a source without a Selector.
	h := e.post("team", push("apps/redis", "latest"), bearer(bearerSecret)...).accepted(t)
	if !h.Enqueued || !slices.Equal(h.Entries, []string{"redis"}) || h.WholeRegistry || h.Events != 1 {
		t.Errorf("a push of the registry's tag: %+v", h)
	}
	h = e.post("index", body, signed(hmacSecret, body, "")...).accepted(t)
	if !h.Enqueued || !h.WholeRegistry || len(h.Entries) != 0 || h.Kind != hooks.KindEntries {
		t.Errorf("the index's hook: %+v", h)
	}
	h = e.post("index", push("anything", "latest"), signed(hmacSecret, push("anything", "latest"), "")...).accepted(t)
	if !h.WholeRegistry {
		t.Errorf("an event for a source without a Selector reconciles all of it: %+v", h)
	}
	after := time.Now()
	got := map[string]int{}
	for _, m := range e.published() {
		got[m.Registry+":"+strings.Join(m.Entries, ",")]++
		if m.EventAt.Before(before) || m.EventAt.After(after) {
			t.Errorf("%+v: event_at is not when the event was received", m)
		}
	}
	if got["team:redis"] != 1 || got["index:"] < 1 || got["index:"] > 2 || len(got) != 2 {
		t.Errorf("published %v, want team's redis once and the index (once or, coalesced, twice... at most twice)", got)
	}
}

// Each payload kind, through the endpoint, becomes the entries it names.
func TestHookPayloadKinds(t *testing.T) {
	e := newHookEnv(t, registriesYAML(t, ""), 10*time.Millisecond, true)
	ghLatest := func(name string, key string) []byte {
		var p map[string]any
		if err := json.Unmarshal(fixture(t, name), &p); err != nil {
			t.Fatal(err)
		}
		v := p[key].(map[string]any)["package_version"].(map[string]any)
		v["container_metadata"].(map[string]any)["tag"].(map[string]any)["name"] = "latest"
		b, _ := json.Marshal(p)
		return b
	}
	harbor := bytes.ReplaceAll(fixture(t, "harbor-push.json"), []byte("test-webhook/debian"), []byte("apps/debian"))
	for _, c := range []struct {
		name, registry string
		body           []byte
		headers        []string
		kind           string
		entries        []string
	}{
		{"distribution delete", "team", bytes.ReplaceAll(fixture(t, "distribution-delete.json"), []byte("library/test"), []byte("apps/test")), bearer(bearerSecret), hooks.KindDistribution, []string{"test"}},
		{"distribution push by digest", "team", bytes.ReplaceAll(fixture(t, "distribution-push.json"), []byte("library/test"), []byte("apps/test")), bearer(bearerSecret), hooks.KindDistribution, nil},
		{"harbor push", "team", harbor, bearer(bearerSecret), hooks.KindHarbor, []string{"debian"}},
		{"harbor pull", "team", fixture(t, "harbor-cloudevents-pull.json"), bearer(bearerSecret), hooks.KindHarbor, nil},
		{"github package, untagged", "ghcr", fixture(t, "github-package-published.json"), nil, hooks.KindGitHub, nil},
		{"github package as latest", "ghcr", ghLatest("github-package-published.json", "package"), nil, hooks.KindGitHub, []string{"hello-world"}},
		{"github registry_package as latest", "ghcr", ghLatest("github-registry-package-published.json", "registry_package"), nil, hooks.KindGitHub, []string{"hello-world"}},
		{"github ping", "ghcr", []byte(`{"zen":"Keep it logically awesome."}`), nil, hooks.KindGitHub, nil},
		{"entries", "team", []byte(`{"entries":["redis","db/pg","redis"]}`), bearer(bearerSecret), hooks.KindEntries, []string{"db/pg", "redis"}},
	} {
		headers := c.headers
		if c.registry == "ghcr" {
			event := "package"
			if strings.Contains(c.name, "registry_package") {
				event = "registry_package"
			}
			if strings.Contains(c.name, "ping") {
				event = "ping"
			}
			headers = signed(hmacSecret, c.body, event)
		}
		h := e.post(c.registry, c.body, headers...).accepted(t)
		if h.Kind != c.kind || h.Enqueued != (len(c.entries) > 0) || !slices.Equal(h.Entries, append([]string{}, c.entries...)) {
			t.Errorf("%s: %+v, want %s entries %v", c.name, h, c.kind, c.entries)
		}
	}
	var got []string
	for _, m := range e.published() {
		got = append(got, m.Registry+":"+strings.Join(m.Entries, ","))
	}
	slices.Sort(got)
	want := []string{"ghcr:hello-world", "ghcr:hello-world", "team:db/pg,redis", "team:debian", "team:test"}
	if !slices.Equal(got, want) {
		// Coalescing may merge requests that came within a window.
		t.Logf("published %v (want %v unless merged)", got, want)
		seen := map[string]bool{}
		for _, g := range got {
			_, entries, _ := strings.Cut(g, ":")
			for _, en := range strings.Split(entries, ",") {
				seen[en] = true
			}
		}
		for _, en := range []string{"hello-world", "db/pg", "redis", "debian", "test"} {
			if !seen[en] {
				t.Errorf("no published message names %s: %v", en, got)
			}
		}
	}
}

// burst sends n requests at once and returns their answers, the latest
// time one was sent and how long the burst took.
func burst(t *testing.T, e *hookEnv, n int, body func(i int) []byte, headers []string) ([]answer, time.Time, time.Duration) {
	t.Helper()
	answers := make([]answer, n)
	sent := make([]time.Time, n)
	start := time.Now()
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, e.url+"/hooks/team", bytes.NewReader(body(i)))
			for k := 0; k+1 < len(headers); k += 2 {
				req.Header.Set(headers[k], headers[k+1])
			}
			<-gate
			sent[i] = time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers[i] = answer{resp.StatusCode, b}
		}()
	}
	close(gate)
	wg.Wait()
	return answers, slices.MaxFunc(sent, func(a, b time.Time) int { return a.Compare(b) }), time.Since(start)
}

// A hundred pushes to one repository at once make a few messages, never a
// hundred: the first is published at once, the others join the window
// and go out together when it closes; each is answered only once its
// message is out. The bound follows from the window and the burst's
// length (one message at the leading edge, one per window after it), so
// a slow machine loosens it and nothing is timed.
func TestHookBurstCoalesces(t *testing.T) {
	const n, window = 100, time.Second
	e := newHookEnv(t, registriesYAML(t, ""), window, true)
	answers, lastSent, took := burst(t, e, n, func(int) []byte { return push("apps/redis", "latest") }, bearer(bearerSecret))
	coalesced := 0
	for i, a := range answers {
		h := a.accepted(t)
		if !h.Enqueued || !slices.Equal(h.Entries, []string{"redis"}) {
			t.Errorf("request %d: %+v", i, h)
		}
		if h.Coalesced {
			coalesced++
		}
	}
	msgs := e.published()
	bound := 2 + int(took/window)
	if len(msgs) > bound || len(msgs) == 0 {
		t.Fatalf("%d requests in %s made %d messages; want 1 to %d (one at once, one per window)", n, took, len(msgs), bound)
	}
	if coalesced == 0 {
		t.Error("no answer says its event was coalesced with others")
	}
	newest := time.Time{}
	for _, m := range msgs {
		if m.Registry != "team" || !slices.Equal(m.Entries, []string{"redis"}) {
			t.Errorf("message %+v", m)
		}
		if m.EventAt.After(newest) {
			newest = m.EventAt
		}
	}
	// Each message's event_at is the receive time of the newest event it
	// carries: the newest is no earlier than the last request was sent.
	if newest.Before(lastSent) {
		t.Errorf("the newest event_at %s is before the last request was sent (%s)", newest, lastSent)
	}
	t.Logf("%d requests in %s: %d messages", n, took, len(msgs))
}

// A burst naming more entries than a message carries splits into
// messages of at most queue.MaxEntries, each entry in exactly one.
func TestHookBurstSplitsEntries(t *testing.T) {
	const n, window = 250, time.Second
	e := newHookEnv(t, registriesYAML(t, ""), window, true)
	name := func(i int) string { return fmt.Sprintf("svc-%03d", i) }
	answers, _, took := burst(t, e, n, func(i int) []byte { return fmt.Appendf(nil, `{"entries":[%q]}`, name(i)) }, bearer(bearerSecret))
	for i, a := range answers {
		if h := a.accepted(t); !h.Enqueued || !slices.Equal(h.Entries, []string{name(i)}) {
			t.Errorf("request %d: %+v", i, h)
		}
	}
	msgs := e.published()
	seen := map[string]int{}
	for _, m := range msgs {
		if len(m.Entries) == 0 || len(m.Entries) > queue.MaxEntries {
			t.Errorf("a message of %d entries", len(m.Entries))
		}
		for _, en := range m.Entries {
			seen[en]++
		}
	}
	for i := range n {
		if seen[name(i)] != 1 {
			t.Errorf("%s is in %d messages, want 1", name(i), seen[name(i)])
		}
	}
	// One at the leading edge, then per window a batch of at most
	// ceil(n/MaxEntries) messages.
	windows := 1 + int(took/window)
	if bound := 1 + windows*((n+queue.MaxEntries-1)/queue.MaxEntries); len(msgs) > bound {
		t.Errorf("%d requests in %s made %d messages, more than %d", n, took, len(msgs), bound)
	}
	t.Logf("%d requests in %s: %d messages", n, took, len(msgs))
}

// Nothing is acknowledged that was not published: when the topic is
// gone, the request published at once and the ones that waited for the
// window all get 503.
func TestHookPublishFailureIsNotAcknowledged(t *testing.T) {
	e := newHookEnv(t, registriesYAML(t, ""), 200*time.Millisecond, false)
	answers, _, _ := burst(t, e, 5, func(int) []byte { return push("apps/redis", "latest") }, bearer(bearerSecret))
	for i, a := range answers {
		a.error(t, http.StatusServiceUnavailable, "PublishFailed", "could not be published; send the event again")
		if t.Failed() {
			t.Fatalf("request %d", i)
		}
	}
}

// A replayed webhook is harmless (it names what to reconcile; the run
// reads upstream's current state): accepted again, the same entry. A
// forged one (another secret, or a body changed under a real signature)
// is 401 and publishes nothing.
func TestHookReplayedAndForged(t *testing.T) {
	e := newHookEnv(t, registriesYAML(t, ""), 10*time.Millisecond, true)
	body := bytes.ReplaceAll(fixture(t, "github-package-published.json"), []byte(`"name": ""`), []byte(`"name": "latest"`))
	headers := signed(hmacSecret, body, "package")
	for range 2 {
		if h := e.post("ghcr", body, headers...).accepted(t); !h.Enqueued || !slices.Equal(h.Entries, []string{"hello-world"}) {
			t.Fatalf("a signed package event: %+v", h)
		}
	}
	e.post("ghcr", body, signed("another-secret-0123456789", body, "package")...).error(t, http.StatusUnauthorized, "Unauthorized", "does not match the body")
	tampered := bytes.ReplaceAll(body, []byte("hello-world"), []byte("evil-image"))
	e.post("ghcr", tampered, headers...).error(t, http.StatusUnauthorized, "Unauthorized", "does not match the body")
	msgs := e.published()
	if len(msgs) == 0 || len(msgs) > 2 {
		t.Fatalf("two accepted requests made %d messages", len(msgs))
	}
	for _, m := range msgs {
		if m.Registry != "ghcr" || !slices.Equal(m.Entries, []string{"hello-world"}) {
			t.Errorf("published %+v", m)
		}
	}
}

// A changed registries file makes a Service With its registries that
// keeps the coalescing of the one before: a request after the change,
// within the window a request before it opened, joins that window
// instead of being published at once (the window is long, so that a
// slow machine cannot close it before the request arrives); and the registries are the new
// file's (a hook added is served, one removed is not).
func TestHookWithKeepsTheWindowAcrossAChange(t *testing.T) {
	const window = 2 * time.Second
	e := newHookEnv(t, registriesYAML(t, ""), window, true)
	before := e.svc.Load()
	t.Setenv("SPECSYNC_TEST_LATER_HOOK", bearerSecret)
	cfg, err := config.Parse([]byte(`registries:
  - name: team
    type: oci
    oci: {host: registry.example.com, prefix: apps, tag: latest}
    hook: {type: bearer, secret_env: SPECSYNC_TEST_TEAM_HOOK}
  - name: later
    type: http
    http: {url: "https://specs.example.com/index.yaml"}
    hook: {type: bearer, secret_env: SPECSYNC_TEST_LATER_HOOK}
`), "test", ".")
	if err != nil {
		t.Fatal(err)
	}
	if h := e.post("team", push("apps/redis", "latest"), bearer(bearerSecret)...).accepted(t); !h.Enqueued || h.Coalesced {
		t.Fatalf("the first event: %+v, want it published at once", h)
	}
	opened := time.Now()
	e.serve(before.With(hooks.FromConfig(cfg)))
	// Joining the window, the request is answered when it closes, once
	// the window's message is out; a window of its own would have
	// published it at once.
	if h := e.post("team", push("apps/postgres", "latest"), bearer(bearerSecret)...).accepted(t); !h.Enqueued || time.Since(opened) < window/2 {
		t.Errorf("an event after the change, within the window: %+v after %s, want it to wait for the window (%s)", h, time.Since(opened), window)
	}
	if h := e.post("later", []byte(`{"entries": []}`), bearer(bearerSecret)...).accepted(t); !h.Enqueued || !h.WholeRegistry {
		t.Errorf("the added hook: %+v", h)
	}
	e.post("index", []byte(`{"entries": []}`), bearer(bearerSecret)...).error(t, http.StatusNotFound, "NotFound", `no webhook for registry "index"`)
	e.serve(before)
	e.post("later", []byte(`{"entries": []}`), bearer(bearerSecret)...).error(t, http.StatusNotFound, "NotFound", `no webhook for registry "later"`)
	if msgs := e.published(); len(msgs) != 3 {
		t.Errorf("%d messages, want 3: team's at once, team's window, later's", len(msgs))
	}
}

// A webhook is authenticated before anything else about the request is
// looked at: an hmac hook that gets no signature header at all is refused
// whatever its payload says (never "let the payload decide"), and a
// refused caller learns nothing from its query string; a registry without
// a hook is a 404 whatever the query.
func TestHookAuthenticatesBeforeAnythingElse(t *testing.T) {
	e := newHookEnv(t, registriesYAML(t, ""), 10*time.Millisecond, true)
	for _, reg := range []string{"index", "ghcr"} {
		for _, body := range [][]byte{[]byte(`{"entries":[]}`), []byte(`{"entries":["redis"]}`), fixture(t, "github-package-published.json")} {
			e.post(reg, body).error(t, http.StatusUnauthorized, "Unauthorized", "needs an "+hooks.SignatureHeader+" header")
			e.post(reg, body, "X-GitHub-Event", "package").error(t, http.StatusUnauthorized, "Unauthorized", "needs an "+hooks.SignatureHeader+" header")
		}
	}
	query := func(path string, headers ...string) answer {
		req, _ := http.NewRequest(http.MethodPost, e.url+path, bytes.NewReader(push("apps/redis", "latest")))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return e.do(req)
	}
	query("/hooks/team?x=1&x=2").error(t, http.StatusUnauthorized, "Unauthorized", "needs an Authorization: Bearer header")
	query("/hooks/nope?x=1&x=2").error(t, http.StatusNotFound, "NotFound", `no webhook for registry "nope"`)
	// Authenticated, the query contract holds as everywhere.
	query("/hooks/team?x=1&x=2", bearer(bearerSecret)...).error(t, http.StatusBadRequest, "BadRequest", "is given 2 times")
	if msgs := e.published(); len(msgs) != 0 {
		t.Fatalf("refused requests published %+v", msgs)
	}
}

// A plain {"entries": [...]} request is held to what the other payload
// forms are: its names go through the registry's selection (a denied or
// unlisted name is never enqueued), a name that is not relative and clean
// (absolute, climbing, with empty or . parts) and a body that is not
// UTF-8 are refused before anything is enqueued, and one request names at
// most MaxRequestEntries.
func TestHookPlainEntriesAreSelectedAndClean(t *testing.T) {
	e := newHookEnv(t, registriesYAML(t, ""), 10*time.Millisecond, true)
	entries := func(names ...string) []byte {
		b, _ := json.Marshal(map[string][]string{"entries": names})
		return b
	}
	for _, bad := range []string{"../x", "/abs", "specs/../../etc/passwd", "a//b", "./a", "a/.", ".."} {
		e.post("team", entries("redis", bad), bearer(bearerSecret)...).error(t, http.StatusBadRequest, "MalformedJSON", "entries[1]")
	}
	notUTF8 := []byte("{\"entries\": [\"re\xffdis\"]}")
	e.post("team", notUTF8, bearer(bearerSecret)...).error(t, http.StatusBadRequest, "MalformedJSON", "not UTF-8")
	many := make([]string, hooks.MaxRequestEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf("svc-%d", i)
	}
	e.post("team", entries(many...), bearer(bearerSecret)...).error(t, http.StatusBadRequest, "MalformedJSON", fmt.Sprintf("at most %d", hooks.MaxRequestEntries))
	if msgs := e.published(); len(msgs) != 0 {
		t.Fatalf("refused requests published %+v", msgs)
	}

	// team denies internal/.*: a denied name is not enqueued, and the
	// answer says so; the selected one is.
	h := e.post("team", entries("internal/db"), bearer(bearerSecret)...).accepted(t)
	if h.Enqueued || len(h.Entries) != 0 || !strings.Contains(h.Description, "nothing enqueued") {
		t.Errorf("a denied entry: %+v", h)
	}
	h = e.post("team", entries("internal/db", "redis", "redis"), bearer(bearerSecret)...).accepted(t)
	if !h.Enqueued || !slices.Equal(h.Entries, []string{"redis"}) {
		t.Errorf("a denied and a selected entry: %+v, want redis alone", h)
	}
	for _, m := range e.published() {
		if slices.Contains(m.Entries, "internal/db") {
			t.Errorf("a denied entry was enqueued: %+v", m)
		}
	}
}

// Docker Hub's webhooks carry no credential (webhooks.md, Docker Hub):
// one of its own, as it sends it, is refused before its payload is read
// and publishes nothing; the job that pushed posts the plain form with
// the hook's bearer instead, and its names go through the namespace's
// selection like any other.
func TestHookDockerHubTakesThePushingJobsPlainForm(t *testing.T) {
	t.Setenv("SPECSYNC_TEST_HUB_HOOK", bearerSecret)
	e := newHookEnv(t, `registries:
  - name: hub
    type: dockerhub
    deny: ["internal-.*"]
    dockerhub: {namespace: acme}
    hook: {type: bearer, secret_env: SPECSYNC_TEST_HUB_HOOK}
`, 10*time.Millisecond, true)
	hubPayload := []byte(`{"callback_url": "https://registry.hub.docker.com/u/acme/redis/hook/2141b5bi5i5b02bec211i4eeih0242eg11000a/", "push_data": {"pushed_at": 1417566161, "pusher": "acme", "tag": "latest"}, "repository": {"repo_name": "acme/redis", "namespace": "acme", "name": "redis", "is_private": false}}`)
	e.post("hub", hubPayload).error(t, http.StatusUnauthorized, "Unauthorized", "needs an Authorization: Bearer header")
	if msgs := e.published(); len(msgs) != 0 {
		t.Fatalf("Docker Hub's own webhook published %+v", msgs)
	}

	h := e.post("hub", []byte(`{"entries": ["redis", "internal-db"]}`), bearer(bearerSecret)...).accepted(t)
	if !h.Enqueued || !slices.Equal(h.Entries, []string{"redis"}) {
		t.Fatalf("the pushing job's plain form: %+v, want redis enqueued alone (internal-db is denied)", h)
	}
	msgs := e.published()
	if len(msgs) != 1 || msgs[0].Registry != "hub" || !slices.Equal(msgs[0].Entries, []string{"redis"}) {
		t.Errorf("published %+v, want one message for hub naming redis", msgs)
	}
}
