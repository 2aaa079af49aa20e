package functions_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	ggcr "github.com/google/go-containerregistry/pkg/registry"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/pkg/api"
)

// Guarantee 8 (secrets never travel) with a canary: a registry password
// and a webhook secret that appear nowhere — not in Firestore, not in
// Pub/Sub messages, not in logs, not in any HTTP response — through a
// successful bootstrap, a wrong password, an outage, and a webhook signed
// right and wrong.
func TestE2ESecretCanary(t *testing.T) {
	t.Parallel()
	buf := make([]byte, 16)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	canary := "canary-" + hex.EncodeToString(buf)
	wrong := canary + "-wrong"
	basic := base64.StdEncoding.EncodeToString([]byte("robot:" + canary))

	// One registry, two doors: an open one the test pushes through and a
	// guarded one (basic auth with the canary) the stack reads from.
	reg := ggcr.New(ggcr.Logger(log.New(ioDiscard{}, "", 0)))
	open := httptest.NewServer(reg)
	t.Cleanup(open.Close)
	var down atomic.Bool
	guarded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "registry down", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Authorization") != "Basic "+basic {
			w.Header().Set("WWW-Authenticate", `Basic realm="canary"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(guarded.Close)
	host := strings.TrimPrefix(open.URL, "http://")
	for _, n := range []string{"db", "cache"} {
		label := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("name: %s\ndescription: the %s\nplans:\n  - name: p\n    description: p\n", n, n)))
		if _, err := emulator.PushSpecImage(context.Background(), host, "specs/"+n, "latest", label, nil); err != nil {
			t.Fatal(err)
		}
	}
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(canary+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The registry's webhook has a canary secret of its own.
	hookSecret := canary + "-hook"
	hookFile := filepath.Join(t.TempDir(), "hook")
	if err := os.WriteFile(hookFile, []byte(hookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, fmt.Sprintf(`registries:
  - name: private
    type: oci
    oci:
      host: %s
      insecure: true
      auth: {type: basic, username: robot, password_file: %q}
    hook: {type: hmac, secret_file: %q}
`, strings.TrimPrefix(guarded.URL, "http://"), pwFile, hookFile),
		// Every span exported, as JSON lines on the stack's stdout: the
		// spans, their attributes and events are checked too.
		"SPECSYNC_TRACE=stdout", "SPECSYNC_TRACE_SAMPLE_RATIO=1")

	// Listen to everything the bootstrap publishes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps, err := pubsub.NewClient(ctx, s.project)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	// The work topic, the catalog-changes topic, and the commit topic
	// (commit requests, and the reports that carry each run's result and
	// error to the operation).
	subs := map[string]string{
		"projects/" + s.project + "/subscriptions/canary":         "projects/" + s.project + "/topics/reconcile-" + s.project,
		"projects/" + s.project + "/subscriptions/canary-changes": "projects/" + s.project + "/topics/specsync-catalog-changes",
		"projects/" + s.project + "/subscriptions/canary-commit":  "projects/" + s.project + "/topics/specsync-commit",
	}
	for sub, topic := range subs {
		if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic}); err != nil {
			t.Fatal(err)
		}
	}
	var responses strings.Builder
	record := func(r response) {
		responses.Write(r.body)
		for k, v := range r.header {
			responses.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
	}

	op := s.bootstrap()
	if op.State != api.Succeeded {
		t.Fatalf("bootstrap with the right password: %+v", op)
	}
	if err := os.WriteFile(pwFile, []byte(wrong), 0o600); err != nil {
		t.Fatal(err)
	}
	op = s.bootstrap()
	if r := op.result(t, "private"); r.Result != api.ResultFetchFailed {
		t.Fatalf("wrong password: %+v", r)
	}
	down.Store(true)
	op = s.bootstrap()
	if r := op.result(t, "private"); r.Result != api.ResultFetchFailed {
		t.Fatalf("registry down: %+v", r)
	}
	// A signed webhook (accepted: it publishes an event's message) and
	// one signed with the wrong secret (refused).
	hookBody := `{"entries":["specs/db"]}`
	for _, key := range []string{hookSecret, wrong} {
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write([]byte(hookBody))
		r := s.do(http.MethodPost, "/hooks/private", "", strings.NewReader(hookBody), "X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		if want := map[bool]int{true: http.StatusAccepted, false: http.StatusUnauthorized}[key == hookSecret]; r.status != want {
			t.Fatalf("webhook signed with the %s secret: %d %s", map[bool]string{true: "hook's", false: "wrong"}[key == hookSecret], r.status, r.body)
		}
		record(r)
	}
	for _, path := range []string{"/registries", "/bootstrap/last_operation?operation=" + op.Operation} {
		record(s.do(http.MethodGet, path, "admin", nil))
	}
	record(s.do(http.MethodGet, "/v2/catalog", "broker", nil))
	record(s.do(http.MethodGet, "/v2/catalog/changes?since=0", "broker", nil))

	var published strings.Builder
	for sub := range subs {
		var got strings.Builder
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_ = ps.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			got.Write(m.Data)
			for k, v := range m.Attributes {
				got.WriteString(k + "=" + v + "\n")
			}
			m.Ack()
		})
		rcancel()
		if got.Len() == 0 {
			t.Fatalf("no message was captured on %s: the Pub/Sub check would be vacuous", sub)
		}
		published.WriteString(got.String())
	}

	var stored strings.Builder
	fs, err := firestore.NewClient(ctx, s.project)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	colls, err := fs.Collections(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	docs := 0
	for _, c := range colls {
		all, err := c.Documents(ctx).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range all {
			docs++
			fmt.Fprintf(&stored, "%s %v\n", d.Ref.Path, d.Data())
		}
	}
	if docs == 0 {
		t.Fatal("no Firestore document read: the store check would be vacuous")
	}
	s.logsMu.Lock()
	logs := s.logs.String()
	s.logsMu.Unlock()
	if !strings.Contains(logs, "private") {
		t.Fatal("the stack's logs do not mention the registry: the log check would be vacuous")
	}
	spans := exportedSpans(t, logs, "reconcile", "fetch", "POST /hooks/{registry}", "receive event", "publish changes")
	for where, text := range map[string]string{"Firestore": stored.String(), "Pub/Sub": published.String(), "logs": logs, "HTTP responses": responses.String(), "spans": spans} {
		for _, secret := range []string{canary, wrong, basic, hookSecret} {
			if strings.Contains(text, secret) {
				t.Errorf("a secret leaked into %s", where)
			}
		}
	}
	// The failure is still explained without the secret.
	if !strings.Contains(stored.String(), "401") && !strings.Contains(stored.String(), "nauthorized") {
		t.Errorf("the recorded error does not say the credentials were refused")
	}
}

// exportedSpans returns the spans the stack exported to its stdout
// (SPECSYNC_TRACE=stdout: one JSON object a span, with its name,
// attributes, events and links), failing unless spans of every name in
// want are among them: the check of their text would be vacuous.
func exportedSpans(t *testing.T, logs string, want ...string) string {
	t.Helper()
	var out strings.Builder
	seen := map[string]bool{}
	for _, line := range strings.Split(logs, "\n") {
		var span struct{ Name string }
		if !strings.HasPrefix(line, `{"Name":`) || json.Unmarshal([]byte(line), &span) != nil {
			continue
		}
		seen[span.Name] = true
		out.WriteString(line + "\n")
	}
	for _, n := range want {
		if !seen[n] {
			t.Errorf("no %q span was exported (exported: %v): the span check would miss it", n, seen)
		}
	}
	return out.String()
}

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }
