package functions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/settings"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func lookup(m map[string]string) settings.Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func status(t *testing.T, h http.Handler, path string, auth func(*http.Request)) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("X-Broker-API-Version", "2.17")
	auth(req)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code
}

func basic(user, pass string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, pass) }
}

func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// The catalog as terraform deploys it: it holds only the digests of the
// broker password and the admin token, and accepts the credentials
// themselves. It does not open the registries file.
func TestCatalogColdStartWithDigests(t *testing.T) {
	if os.Getenv("FIRESTORE_EMULATOR_HOST") == "" {
		t.Fatal("FIRESTORE_EMULATOR_HOST is not set: run the tests through `make test`")
	}
	const password, token = "broker-password-0123456789abcdef", "admin-token-0123456789abcdef"
	h, err := newCatalog(context.Background(), lookup(map[string]string{
		"GOOGLE_CLOUD_PROJECT":            emulatortest.ProjectID(t),
		"LOG_LEVEL":                       "error",
		"SPECSYNC_BROKER_USERNAME":        "platform",
		"SPECSYNC_BROKER_PASSWORD_SHA256": sha256Hex(password),
		"SPECSYNC_ADMIN_TOKEN_SHA256":     sha256Hex(token),
		// Not read by the catalog: a missing file does not matter.
		"SPECSYNC_REGISTRIES": filepath.Join(t.TempDir(), "missing.yaml"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		auth func(*http.Request)
		want int
	}{
		{"/v2/catalog", basic("platform", password), http.StatusOK},
		{"/v2/catalog", basic("platform", sha256Hex(password)), http.StatusUnauthorized},
		{"/v2/catalog", basic("platform", token), http.StatusUnauthorized},
		{"/registries", bearer(token), http.StatusOK},
		{"/registries", bearer(sha256Hex(token)), http.StatusUnauthorized},
		{"/registries", bearer(password), http.StatusUnauthorized},
	} {
		if got := status(t, h, c.path, c.auth); got != c.want {
			t.Errorf("%s: %d, want %d", c.path, got, c.want)
		}
	}
}

// The bootstrap as terraform deploys it: the admin token in a file (a
// Secret Manager volume). A file with no secret version yet does not fail
// the cold start; it refuses every token until it holds one.
func TestBootstrapColdStartWithTokenFile(t *testing.T) {
	for _, v := range []string{"FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"} {
		if os.Getenv(v) == "" {
			t.Fatalf("%s is not set: run the tests through `make test`", v)
		}
	}
	const token = "admin-token-from-a-mounted-secret"
	dir := t.TempDir()
	registries := filepath.Join(dir, "registries.yaml")
	if err := os.WriteFile(registries, []byte("registries:\n- name: bundled\n  type: dir\n  dir: {embedded: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(tokenFile string) settings.Lookup {
		return lookup(map[string]string{
			"GOOGLE_CLOUD_PROJECT":      emulatortest.ProjectID(t),
			"LOG_LEVEL":                 "error",
			"SPECSYNC_REGISTRIES":       registries,
			"SPECSYNC_ADMIN_TOKEN_FILE": tokenFile,
		})
	}
	withToken := filepath.Join(dir, "token")
	if err := os.WriteFile(withToken, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := newBootstrap(context.Background(), env(withToken))
	if err != nil {
		t.Fatal(err)
	}
	// An unknown operation is a 404 once the caller is authenticated.
	const poll = "/bootstrap/last_operation?operation=no-such-operation"
	if got := status(t, h, poll, bearer(token)); got != http.StatusNotFound {
		t.Errorf("the file's token: %d, want 404 (authenticated, unknown operation)", got)
	}
	if got := status(t, h, poll, bearer(token+"x")); got != http.StatusUnauthorized {
		t.Errorf("another token: %d, want 401", got)
	}

	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h, err = newBootstrap(context.Background(), env(empty))
	if err != nil {
		t.Fatalf("an empty token file fails the cold start for good: %v", err)
	}
	if got := status(t, h, poll, bearer(token)); got != http.StatusUnauthorized {
		t.Errorf("an empty token file: %d, want 401", got)
	}
}

// The hooks function serves the registries' webhooks, each with its own
// registry's secret, and the bootstrap serves none: the admin token opens
// no webhook, a hook's secret starts no bootstrap, and an accepted
// webhook publishes an event's message to the bootstrap's topic.
func TestHooksColdStartServesHooks(t *testing.T) {
	for _, v := range []string{"FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"} {
		if os.Getenv(v) == "" {
			t.Fatalf("%s is not set: run the tests through `make test`", v)
		}
	}
	const token, hookSecret = "admin-token-0123456789abcdef", "canary-wiring-hook-secret-0123456789"
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "hook-secret")
	if err := os.WriteFile(secretFile, []byte(hookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	registries := filepath.Join(dir, "registries.yaml")
	if err := os.WriteFile(registries, []byte("registries:\n- name: bundled\n  type: dir\n  dir: {embedded: true}\n  hook: {type: bearer, secret_file: "+secretFile+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	client, project := emulatortest.PubSub(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := "projects/" + project + "/topics/reconcile"
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	sub := "projects/" + project + "/subscriptions/pull"
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"GOOGLE_CLOUD_PROJECT": project,
		"LOG_LEVEL":            "error",
		"SPECSYNC_REGISTRIES":  registries,
		"SPECSYNC_TOPIC":       topic,
		"SPECSYNC_HOOK_WINDOW": "10ms",
	}
	h, err := newHooks(ctx, lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	env["SPECSYNC_ADMIN_TOKEN"] = token
	b, err := newBootstrap(ctx, lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	post := func(h http.Handler, path string, auth func(*http.Request)) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"entries":[]}`))
		auth(req)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if strings.Contains(w.Body.String(), hookSecret) {
			t.Errorf("%s answers with the hook's secret", path)
		}
		return w
	}
	if w := post(h, "/hooks/bundled", bearer(token)); w.Code != http.StatusUnauthorized {
		t.Errorf("the admin token on a webhook: %d %s", w.Code, w.Body)
	}
	if w := post(b, "/bootstrap", bearer(hookSecret)); w.Code != http.StatusUnauthorized {
		t.Errorf("a hook's secret on POST /bootstrap: %d %s", w.Code, w.Body)
	}
	if w := post(h, "/bootstrap", bearer(hookSecret)); w.Code != http.StatusNotFound {
		t.Errorf("POST /bootstrap on the hooks function: %d %s, want 404", w.Code, w.Body)
	}
	if w := post(b, "/hooks/bundled", bearer(hookSecret)); w.Code != http.StatusNotFound {
		t.Errorf("a webhook on the bootstrap function: %d %s, want 404 (the hooks function serves them)", w.Code, w.Body)
	}
	if w := post(h, "/hooks/bundled", bearer(hookSecret)); w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), `"whole_registry":true`) {
		t.Fatalf("the hook's secret on its webhook: %d %s", w.Code, w.Body)
	}
	resp, err := client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 10, ReturnImmediately: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ReceivedMessages) != 1 {
		t.Fatalf("%d messages published, want 1", len(resp.ReceivedMessages))
	}
	m, err := queue.Decode(resp.ReceivedMessages[0].Message.Data)
	if err != nil || !m.Event() || m.Registry != "bundled" || len(m.Entries) != 0 {
		t.Fatalf("published %+v (%v): want an event's message for the whole of bundled", m, err)
	}
}

// The hooks function opens no Firestore (its service account has no
// Firestore role): its cold start succeeds where a Firestore client
// cannot be made, with no emulator and credentials that do not exist.
func TestHooksColdStartOpensNoFirestore(t *testing.T) {
	if os.Getenv("PUBSUB_EMULATOR_HOST") == "" {
		t.Fatal("PUBSUB_EMULATOR_HOST is not set: run the tests through `make test`")
	}
	dir := t.TempDir()
	t.Setenv("FIRESTORE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(dir, "no-such-key.json"))
	registries := filepath.Join(dir, "registries.yaml")
	if err := os.WriteFile(registries, []byte("registries:\n- name: bundled\n  type: dir\n  dir: {embedded: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := lookup(map[string]string{"GOOGLE_CLOUD_PROJECT": emulatortest.ProjectID(t), "LOG_LEVEL": "error", "SPECSYNC_REGISTRIES": registries})
	if _, err := newHooks(context.Background(), env); err != nil {
		t.Fatalf("the hooks function's cold start: %v", err)
	}
	// The same environment fails a function that opens Firestore: the
	// test can tell.
	if _, _, err := open(context.Background(), settings.Common{Runtime: settings.Runtime{Project: "p", LogLevel: "error", Tracing: settings.Tracing{Exporter: "off"}}}); err == nil {
		t.Fatal("a Firestore client was made without an emulator or credentials: this test proves nothing here")
	}
}

// The catalog with views as terraform deploys them: SPECSYNC_BROKER_VIEWS
// holds the views file as JSON, each view's password comes from its own
// variable (a digest, or a mounted secret file), and the broker's own
// credential is gone. A bad views file fails the cold start, naming it.
func TestCatalogColdStartWithViews(t *testing.T) {
	if os.Getenv("FIRESTORE_EMULATOR_HOST") == "" {
		t.Fatal("FIRESTORE_EMULATOR_HOST is not set: run the tests through `make test`")
	}
	const dataPass, appsPass = "data-password-0123456789abcdef", "apps-password-0123456789abcdef"
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte(appsPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"GOOGLE_CLOUD_PROJECT": emulatortest.ProjectID(t),
		"LOG_LEVEL":            "error",
		"SPECSYNC_BROKER_VIEWS": `{"views":[
			{"name":"data","username":"k8s-data","password_env":"SPECSYNC_VIEW_DATA_PASSWORD","registries":{"allow":["data"]}},
			{"name":"apps","username":"cf-apps","password_env":"SPECSYNC_VIEW_APPS_PASSWORD"}]}`,
		"SPECSYNC_VIEW_DATA_PASSWORD_SHA256": sha256Hex(dataPass),
		"SPECSYNC_VIEW_APPS_PASSWORD_FILE":   file,
		"SPECSYNC_ADMIN_TOKEN_SHA256":        sha256Hex("admin-token-0123456789abcdef"),
	}
	h, err := newCatalog(context.Background(), lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		auth func(*http.Request)
		want int
	}{
		{basic("k8s-data", dataPass), http.StatusOK},
		{basic("cf-apps", appsPass), http.StatusOK},
		{basic("k8s-data", appsPass), http.StatusUnauthorized},
		{basic("cf-apps", dataPass), http.StatusUnauthorized},
		{basic("platform", dataPass), http.StatusUnauthorized},
	} {
		if got := status(t, h, "/v2/catalog", c.auth); got != c.want {
			t.Errorf("/v2/catalog: %d, want %d", got, c.want)
		}
	}
	env["SPECSYNC_BROKER_VIEWS"] = `{"views":[{"name":"data","username":"k8s-data","password_env":"SPECSYNC_VIEW_DATA_PASSWORD","tags":{"allow":["("]}}]}`
	if _, err := newCatalog(context.Background(), lookup(env)); err == nil || !strings.Contains(err.Error(), `views file SPECSYNC_BROKER_VIEWS: line 1: views[0] (data): tags.allow[0] "(" is not a valid regular expression`) {
		t.Errorf("a bad views file: %v", err)
	}
	env["SPECSYNC_BROKER_VIEWS"] = `{"views":[{"name":"data","username":"k8s-data","password_env":"SPECSYNC_VIEW_NONE"}]}`
	if _, err := newCatalog(context.Background(), lookup(env)); err == nil || !strings.Contains(err.Error(), "view data: ") || !strings.Contains(err.Error(), "SPECSYNC_VIEW_NONE_FILE is required") {
		t.Errorf("a view without its password: %v", err)
	}
}
