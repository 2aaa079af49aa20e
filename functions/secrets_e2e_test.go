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
	"github.com/specsync/specsync/emulator/hubs"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/invariant"
)

// canaryPath is one way a secret reaches the local stack, a row of
// canaryPaths: what it adds to the registries file, the stack's
// environment, the forms of the secret that must appear nowhere, how to
// make the stack present a wrong one, and what to do with it once the
// bootstraps are done. A new source's credential is one more row.
type canaryPath struct {
	name string
	open func(t *testing.T, w *canaryWorld) canaryUse
}

// canaryWorld is what the rows share: a fresh canary each, an OCI
// registry with the specs (open, and reachable behind any door a row
// puts before it), and the outage switch every door obeys.
type canaryWorld struct {
	canary func(prefix string) string
	reg    http.Handler
	open   string // host of the registry without a door
	down   atomic.Bool
}

// canaryUse is a row opened: Registry is an entry of the registries file
// ("" for none), named Name; Secrets every form of the secret (the wrong
// one included) that must appear nowhere; Wrong makes the stack present
// a wrong credential from the next bootstrap on (nil: the path has none
// to get wrong, or none a bootstrap uses).
type canaryUse struct {
	Name     string
	Registry string
	Env      []string
	Secrets  []string
	Wrong    func()
	Exercise func(t *testing.T, s *stack, record func(response))
}

var canaryPaths = []canaryPath{
	{"oci basic auth, password_file", func(t *testing.T, w *canaryWorld) canaryUse {
		secret := w.canary("")
		wrong := secret + "-wrong"
		basic := func(p string) string { return base64.StdEncoding.EncodeToString([]byte("robot:" + p)) }
		guarded := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			switch {
			case w.down.Load():
				http.Error(rw, "registry down", http.StatusServiceUnavailable)
			case r.Header.Get("Authorization") != "Basic "+basic(secret):
				// Refused, it echoes what it was sent, as some
				// registries' errors do: the stack must not pass it on.
				rw.Header().Set("WWW-Authenticate", `Basic realm="canary"`)
				http.Error(rw, "unauthorized: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
			default:
				w.reg.ServeHTTP(rw, r)
			}
		}))
		t.Cleanup(guarded.Close)
		file := writeSecret(t, secret)
		return canaryUse{Name: "private",
			Registry: fmt.Sprintf("  - name: private\n    type: oci\n    oci:\n      host: %s\n      insecure: true\n      auth: {type: basic, username: robot, password_file: %q}\n",
				strings.TrimPrefix(guarded.URL, "http://"), file),
			Secrets: []string{secret, wrong, basic(secret), basic(wrong)},
			Wrong: func() {
				if err := os.WriteFile(file, []byte(wrong), 0o600); err != nil {
					t.Fatal(err)
				}
			}}
	}},
	{"hmac webhook, secret_file", func(t *testing.T, w *canaryWorld) canaryUse {
		secret := w.canary("hook-")
		wrong := secret + "-wrong"
		return canaryUse{Name: "hooked",
			Registry: fmt.Sprintf("  - name: hooked\n    type: oci\n    oci: {host: %s, insecure: true}\n    hook: {type: hmac, secret_file: %q}\n", w.open, writeSecret(t, secret)),
			Secrets:  []string{secret, wrong},
			// A signed webhook (accepted: it publishes an event's
			// message) and one signed with the wrong secret (refused).
			Exercise: func(t *testing.T, s *stack, record func(response)) {
				body := `{"entries":["specs/db"]}`
				for _, key := range []string{secret, wrong} {
					mac := hmac.New(sha256.New, []byte(key))
					mac.Write([]byte(body))
					r := s.do(http.MethodPost, "/hooks/hooked", "", strings.NewReader(body), "X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
					if want := map[bool]int{true: http.StatusAccepted, false: http.StatusUnauthorized}[key == secret]; r.status != want {
						t.Fatalf("webhook signed with the %s secret: %d %s", map[bool]string{true: "hook's", false: "wrong"}[key == secret], r.status, r.body)
					}
					record(r)
				}
			}}
	}},
	// A Quay namespace: a robot's token (a file, for pulls) and an OAuth
	// token (the environment, for the API), and its basic webhook (the
	// secret in the environment, sent as Quay sends it: HTTP Basic).
	{"quay robot password_file, API token_env, basic webhook secret_env", func(t *testing.T, w *canaryWorld) canaryUse {
		robot, apiToken, hook := w.canary("QUAYROBOT"), w.canary("quayoauth-"), w.canary("quay-hook-")
		wrong := robot + "-wrong"
		quay := hubs.NewQuay(w.reg)
		quay.AddRobot("specs+robot", robot)
		quay.AddOAuthToken(apiToken, "specs")
		quay.Add("specs", "db", false)
		quay.Add("specs", "cache", false)
		door := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if w.down.Load() {
				http.Error(rw, "quay down", http.StatusServiceUnavailable)
				return
			}
			if r.URL.Path == "/v2/auth" {
				if user, pass, _ := r.BasicAuth(); user == "specs+robot" && pass != robot {
					// Refused, it echoes what it was sent.
					http.Error(rw, `{"errors":[{"code":"UNAUTHORIZED","message":"refused `+r.Header.Get("Authorization")+`"}]}`, http.StatusUnauthorized)
					return
				}
			}
			quay.ServeHTTP(rw, r)
		}))
		t.Cleanup(door.Close)
		file := writeSecret(t, robot)
		basic := func(user, p string) string { return base64.StdEncoding.EncodeToString([]byte(user + ":" + p)) }
		return canaryUse{Name: "quay",
			Registry: fmt.Sprintf("  - name: quay\n    type: quay\n    quay:\n      namespace: specs\n      host: %s\n      insecure: true\n"+
				"      auth: {type: basic, username: specs+robot, password_file: %q, token_env: SPECSYNC_CANARY_QUAY_API}\n"+
				"    hook: {type: basic, secret_env: SPECSYNC_CANARY_QUAY_HOOK}\n", strings.TrimPrefix(door.URL, "http://"), file),
			Env: []string{"SPECSYNC_CANARY_QUAY_API=" + apiToken, "SPECSYNC_CANARY_QUAY_HOOK=" + hook},
			Secrets: []string{robot, wrong, apiToken, hook, basic("specs+robot", robot), basic("specs+robot", wrong),
				basic("specsync", hook), basic("specsync", hook+"-wrong")},
			Wrong: func() {
				if err := os.WriteFile(file, []byte(wrong), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			// Quay's push notification with the hook's secret (accepted)
			// and with a wrong one (refused).
			Exercise: func(t *testing.T, s *stack, record func(response)) {
				body := `{"repository":"specs/db","namespace":"specs","name":"db","docker_url":"quay.io/specs/db","updated_tags":["latest"]}`
				for _, key := range []string{hook, hook + "-wrong"} {
					r := s.do(http.MethodPost, "/hooks/quay", "", strings.NewReader(body), "Authorization", "Basic "+basic("specsync", key))
					if want := map[bool]int{true: http.StatusAccepted, false: http.StatusUnauthorized}[key == hook]; r.status != want {
						t.Fatalf("Quay notification with the %s secret: %d %s", map[bool]string{true: "hook's", false: "wrong"}[key == hook], r.status, r.body)
					}
					record(r)
				}
			}}
	}},
	// The stack's own credentials, as the test gives them (startStack):
	// every request carries one, and the banner must not print them.
	{"admin token and broker password, environment", func(t *testing.T, w *canaryWorld) canaryUse {
		return canaryUse{Secrets: []string{adminToken, brokerPass, base64.StdEncoding.EncodeToString([]byte(brokerUser + ":" + brokerPass))}}
	}},
}

// writeSecret writes secret (and a newline, as editors leave it) to a
// file of its own and returns its path.
func writeSecret(t *testing.T, secret string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// Secrets never travel, with a canary for each path of canaryPaths: no
// form of one appears in any document of any collection or subcollection
// of Firestore (read as stored: strings, maps, byte arrays), in any
// Pub/Sub message (data, attributes, ordering key), in any line the
// stack writes (its logs, slog.Default's and the standard logger's
// included: the whole of its stdout and stderr), in any exported span
// or in any HTTP answer, through a successful bootstrap, a wrong
// credential, an outage, and what each path does after.
func TestE2ESecretCanary(t *testing.T) {
	t.Parallel()
	w := &canaryWorld{canary: func(prefix string) string {
		buf := make([]byte, 16)
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		return prefix + "canary-" + hex.EncodeToString(buf)
	}}
	reg := ggcr.New(ggcr.Logger(log.New(ioDiscard{}, "", 0)))
	w.reg = reg
	open := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.down.Load() {
			http.Error(rw, "registry down", http.StatusServiceUnavailable)
			return
		}
		reg.ServeHTTP(rw, r)
	}))
	t.Cleanup(open.Close)
	w.open = strings.TrimPrefix(open.URL, "http://")
	for _, n := range []string{"db", "cache"} {
		label := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("name: %s\ndescription: the %s\nplans:\n  - name: p\n    description: p\n", n, n)))
		if _, err := emulator.PushSpecImage(context.Background(), w.open, "specs/"+n, "latest", label, nil); err != nil {
			t.Fatal(err)
		}
	}
	var uses []canaryUse
	var secrets, env []string
	registries := "registries:\n"
	for _, p := range canaryPaths {
		u := p.open(t, w)
		if len(u.Secrets) == 0 {
			t.Fatalf("canary path %q names no secret", p.name)
		}
		uses = append(uses, u)
		secrets = append(secrets, u.Secrets...)
		env = append(env, u.Env...)
		registries += u.Registry
	}
	// Every span exported, as JSON lines on the stack's stdout: the
	// spans, their attributes and events are checked too.
	env = append(env, "SPECSYNC_TRACE=stdout", "SPECSYNC_TRACE_SAMPLE_RATIO=1")
	s := startStack(t, registries, env...)

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
		responses.WriteString("\n")
		for k, v := range r.header {
			responses.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
	}

	op := s.bootstrap()
	if op.State != api.Succeeded {
		t.Fatalf("bootstrap with the right credentials: %+v", op)
	}
	for _, u := range uses {
		if u.Wrong != nil {
			u.Wrong()
		}
	}
	op = s.bootstrap()
	for _, u := range uses {
		if u.Wrong != nil {
			if r := op.result(t, u.Name); r.Result != api.ResultFetchFailed {
				t.Fatalf("%s with a wrong credential: %+v", u.Name, r)
			}
		}
	}
	w.down.Store(true)
	op = s.bootstrap()
	for _, u := range uses {
		if u.Name != "" {
			if r := op.result(t, u.Name); r.Result != api.ResultFetchFailed {
				t.Fatalf("%s down: %+v", u.Name, r)
			}
		}
	}
	for _, u := range uses {
		if u.Exercise != nil {
			u.Exercise(t, s, record)
		}
	}
	for _, path := range []string{"/registries", "/status", "/admin/operations", "/bootstrap/last_operation?operation=" + op.Operation} {
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
			got.WriteString("\n" + m.OrderingKey + "\n")
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

	// Firestore as the invariant checker reads it: every document of
	// every collection and subcollection, each value as it is stored.
	fs, err := firestore.NewClient(ctx, s.project)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	state, violations, err := invariant.Check(ctx, fs, invariant.Options{Canaries: secrets})
	if err != nil {
		t.Fatal(err)
	}
	if len(state.Raw) == 0 {
		t.Fatal("no Firestore document read: the store check would be vacuous")
	}
	for _, v := range violations {
		if v.Rule == "secret" {
			t.Errorf("a secret leaked into Firestore: %s", v)
		}
	}
	s.logsMu.Lock()
	logs := s.logs.String()
	s.logsMu.Unlock()
	if !strings.Contains(logs, "private") {
		t.Fatal("the stack's logs do not mention the registry: the log check would be vacuous")
	}
	spans := exportedSpans(t, logs, "reconcile", "fetch", "POST /hooks/{registry}", "receive event", "publish changes")
	for where, text := range map[string]string{"Pub/Sub": published.String(), "logs": logs, "HTTP responses": responses.String(), "spans": spans} {
		if found := invariant.Leaked(text, secrets); len(found) > 0 {
			t.Errorf("secrets leaked into %s: %s", where, strings.Join(found, ", "))
		}
	}
	// The failure is still explained without the secret.
	if st := fmt.Sprint(state.Raw); !strings.Contains(st, "401") && !strings.Contains(st, "nauthorized") {
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
