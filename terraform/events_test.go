//go:build deploycheck

package terraform_test

// Events: Artifact Registry's gcr topic and its push subscription to the
// reconcile function, whichever way the topic comes (created, existing,
// or none at all), and the webhooks' URLs.

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/hooks"
	"github.com/specsync/specsync/pkg/queue"
)

// gcrSubscriptionOf is the push subscription of the gcr topic, or nil.
func gcrSubscriptionOf(t *testing.T, m *module) *instance {
	t.Helper()
	var found []*instance
	for _, sub := range m.ofType("google_pubsub_subscription") {
		if isGCRTopic(sub.str("topic")) {
			found = append(found, sub)
		}
	}
	if len(found) > 1 {
		t.Fatalf("%d subscriptions of the gcr topic; a second one would deliver every event twice", len(found))
	}
	if len(found) == 0 {
		return nil
	}
	return found[0]
}

// preventsDestroy reports whether a resource block sets
// lifecycle.prevent_destroy = true.
func preventsDestroy(b *hclsyntax.Block) bool {
	for _, lb := range b.Body.Blocks {
		if lb.Type != "lifecycle" {
			continue
		}
		if a, ok := lb.Body.Attributes["prevent_destroy"]; ok {
			v, diags := a.Expr.Value(nil)
			return !diags.HasErrors() && v.True()
		}
	}
	return false
}

func TestArtifactRegistryEventsTrigger(t *testing.T) {
	gcrID := "projects/" + testProject + "/topics/" + queue.ArtifactRegistryTopic

	// create (the default): the topic is the module's, and never
	// destroyed by it; the subscription pushes to the reconcile function
	// like the reconcile trigger (OIDC, retries, dead letters).
	m := evaluated(t, nil)
	topics := m.resources["google_pubsub_topic.gcr"]
	if topics == nil || len(topics.Instances) != 1 || topics.Instances["0"].str("name") != queue.ArtifactRegistryTopic {
		t.Fatalf("by default the module creates the topic %q", queue.ArtifactRegistryTopic)
	}
	if !preventsDestroy(topics.Block) {
		t.Error("the gcr topic the module creates may be destroyed by it; other teams may subscribe to it (lifecycle.prevent_destroy)")
	}
	sub := gcrSubscriptionOf(t, m)
	if sub == nil || sub.str("topic") != gcrID {
		t.Fatalf("the gcr topic has no push subscription of its own: %v", sub)
	}
	checkPushTrigger(t, m, sub, topics.Instances["0"])
	if got := asString(m.outVals["gcr_subscription"]); got != sub.str("id") {
		t.Errorf("output gcr_subscription = %q, want %q", got, sub.str("id"))
	}
	// What Artifact Registry publishes there reaches the function as the
	// third kind of body it dispatches on.
	body := `{"action":"INSERT","digest":"europe-docker.pkg.dev/p/r/redis@sha256:` + strings.Repeat("ab", 32) + `","tag":"europe-docker.pkg.dev/p/r/redis:latest"}`
	env := fmt.Sprintf(`{"message":{"data":%q,"messageId":"1"}}`, base64.StdEncoding.EncodeToString([]byte(body)))
	if ev, _, err := queue.FromEvent([]byte(env)); err != nil || ev.Artifact == nil {
		t.Fatalf("an Artifact Registry notification pushed to the function does not decode as one: %+v %v", ev, err)
	}

	// existing: a topic the module reads and never manages.
	m = evaluated(t, map[string]cty.Value{"artifact_registry_events": cty.StringVal("existing")})
	if n := len(m.resources["google_pubsub_topic.gcr"].Instances); n != 0 {
		t.Errorf("with existing, the module creates %d gcr topics", n)
	}
	data := m.instance("data.google_pubsub_topic.gcr", "0")
	if data == nil || data.str("name") != queue.ArtifactRegistryTopic {
		t.Fatal("with existing, the module does not read the gcr topic (a missing topic must fail the plan)")
	}
	if sub := gcrSubscriptionOf(t, m); sub == nil || sub.str("topic") != gcrID {
		t.Errorf("with existing, the subscription's topic is %v, want %s", sub, gcrID)
	} else {
		checkPushTrigger(t, m, sub, data)
	}

	// off: nothing.
	m = evaluated(t, map[string]cty.Value{"artifact_registry_events": cty.StringVal("off")})
	if gcrSubscriptionOf(t, m) != nil || len(m.resources["google_pubsub_topic.gcr"].Instances) != 0 || len(m.resources["data.google_pubsub_topic.gcr"].Instances) != 0 {
		t.Error("with off, the module still has a gcr topic or subscription")
	}
	if v := m.outVals["gcr_subscription"]; !v.IsNull() {
		t.Errorf("with off, output gcr_subscription = %#v", v)
	}
	for _, b := range bindingsOf(t, m) {
		if strings.Contains(b.Scope, "gcr") {
			t.Errorf("with off, the module still grants %s on %s", b.Role, b.Scope)
		}
	}
}

// Every registry with a hook block has its URL in the hook_urls output,
// and it is the route the bootstrap's webhook handler serves: without a
// secret a 401, not a 404; a registry without a hook has no URL.
func TestHookURLs(t *testing.T) {
	m := evaluated(t, nil)
	g := loadGoRegistries(t)
	fns := functionsByEntryPoint(t, m)
	base := fns["Bootstrap"].one("service_config").str("uri")
	got := stringMap(m.outVals["hook_urls"])
	var names []string
	for name := range got {
		names = append(names, name)
	}
	sort.Strings(names)
	want := append([]string(nil), g.Hooks...)
	sort.Strings(want)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("hook_urls names %v; the registries with a hook are %v", names, want)
	}
	cfg, err := config.Load(filepath.Join("..", referenceRegistries))
	if err != nil {
		t.Fatal(err)
	}
	h := hooks.New(hooks.Config{Registries: hooks.FromConfig(cfg), Logger: slog.New(slog.DiscardHandler)}).Handler()
	for name, u := range got {
		path, ok := strings.CutPrefix(u, base)
		if !ok {
			t.Errorf("hook_urls[%s] = %q is not on the bootstrap function (%s)", name, u, base)
			continue
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"entries":[]}`)))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("POST %s without its secret: %d, want 401 (the route of the hook)", path, rec.Code)
		}
	}
	for _, r := range cfg.Registries {
		if r.Hook != nil {
			continue
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/hooks/"+r.Name, strings.NewReader(`{}`)))
		if rec.Code != http.StatusNotFound {
			t.Errorf("registry %s has no hook block but /hooks/%s answers %d", r.Name, r.Name, rec.Code)
		}
	}
}

// A hook's secret is a secret of its own: naming a registry credential's
// variable or file as a hook's fails the plan, as does a file in the
// admin token's directory.
func TestHookSecretsAreTheirOwn(t *testing.T) {
	for name, c := range map[string]struct{ file, says string }{
		"a registry credential's variable": {`registries:
  - name: a
    type: http
    http: {url: "https://x.example.com/i.yaml", auth: {type: token, token_env: SHARED_SECRET}}
    hook: {type: hmac, secret_env: SHARED_SECRET}
`, "SHARED_SECRET"},
		"the admin token's directory": {`registries:
  - name: a
    type: dir
    dir: {embedded: true}
    hook: {type: bearer, secret_file: /etc/specsync/admin-token/hook}
`, "admin token"},
	} {
		rel := writeInRepo(t, c.file)
		bad, err := loadModule(".", inputs(map[string]cty.Value{"registries_file": cty.StringVal(rel), "registry_env": cty.MapValEmpty(cty.String)}))
		if err != nil {
			t.Fatal(err)
		}
		if joined := strings.Join(bad.errs, "\n"); !strings.Contains(joined, c.says) {
			t.Errorf("%s: the plan does not fail saying %q: %s", name, c.says, joined)
		}
	}
}

// writeInRepo writes a registries file where the module reads one: inside
// the repository (a directory of its own, removed when the test ends),
// and returns its path relative to the repository root.
func writeInRepo(t *testing.T, content string) string {
	t.Helper()
	dir, err := os.MkdirTemp("..", ".terraform-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "registries.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel("..", filepath.Join(dir, "registries.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(rel)
}
