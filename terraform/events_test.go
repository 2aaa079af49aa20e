//go:build deploycheck

package terraform_test

// Events: the gcr topic of every project whose Artifact Registry the
// registries file reads, adopted (read by the plan, so a missing one stops
// it before anything is created) or created, and its push subscription to
// the reconcile function; and the webhooks, on a public function of their
// own whatever the bootstrap is.

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/hooks"
	"github.com/specsync/specsync/pkg/queue"
)

// gcrSubscriptions are the push subscriptions of gcr topics, by project.
func gcrSubscriptions(m *module) map[string]*instance {
	out := map[string]*instance{}
	for _, sub := range m.ofType("google_pubsub_subscription") {
		if p, ok := gcrProject(sub.str("topic")); ok {
			out[p] = sub
		}
	}
	return out
}

// gcrProject is the project of a gcr topic's path.
func gcrProject(topic string) (string, bool) {
	mt := regexp.MustCompile(`^projects/([^/]+)/topics/` + queue.ArtifactRegistryTopic + `$`).FindStringSubmatch(topic)
	if mt == nil {
		return "", false
	}
	return mt[1], true
}

func TestArtifactRegistryEventSubscriptions(t *testing.T) {
	t.Parallel()
	f := parseTF(t, ".")

	// existing (the default), the module's own project: the topic
	// Artifact Registry created is read once the APIs are on (at apply
	// time on a first apply), never created.
	m := planOf(t, shipped)
	subs := gcrSubscriptions(m)
	if len(subs) != 1 || subs["my-specsync-project"] == nil {
		t.Fatalf("shipped: gcr subscriptions %v, want the module project's", keysOfInstances(subs))
	}
	if r := m.resources["google_pubsub_topic.gcr"]; r != nil {
		t.Error("shipped: the module creates a gcr topic; by default it adopts the one Artifact Registry made")
	}
	if own := m.instance("data.google_pubsub_topic.gcr_own", "0"); own == nil || own.str("name") != queue.ArtifactRegistryTopic {
		t.Error("shipped: the module does not read the project's gcr topic before subscribing to it")
	}
	checkPushTrigger(t, m, subs["my-specsync-project"], "my-specsync-project", queue.ArtifactRegistryTopic)

	// existing, another project: read at plan time (here from the
	// emulator, where the test created it) and subscribed to from the
	// module's project.
	m = planOf(t, outside)
	subs = gcrSubscriptions(m)
	if len(subs) != 1 || subs[otherProject] == nil {
		t.Fatalf("outside: gcr subscriptions %v, want %s's", keysOfInstances(subs), otherProject)
	}
	if subs[otherProject].str("project") != testProject {
		t.Errorf("outside: the subscription is in %s, want the module's project", subs[otherProject].str("project"))
	}
	checkPushTrigger(t, m, subs[otherProject], otherProject, queue.ArtifactRegistryTopic)

	// A project without its gcr topic stops the plan, naming it.
	out := flat(planFailure(t, missingTopic))
	if !strings.Contains(out, "projects/no-topic-prj/topics/gcr not found") || !strings.Contains(out, `gcr_other["no-topic-prj"]`) {
		t.Errorf("a missing gcr topic does not fail the plan by name:\n%s", out)
	}

	// create: the module's project's topic is the module's, never
	// destroyed by it (other teams may subscribe).
	m = planOf(t, domain)
	topic := m.instance("google_pubsub_topic.gcr", "0")
	if topic == nil || topic.str("name") != queue.ArtifactRegistryTopic || topic.str("project") != testProject {
		t.Fatalf("create: the module does not create the project's gcr topic")
	}
	if !preventsDestroy(f, "google_pubsub_topic.gcr") {
		t.Error("the gcr topic the module creates may be destroyed by it; other teams may subscribe to it (lifecycle.prevent_destroy)")
	}
	subs = gcrSubscriptions(m)
	if len(subs) != 1 || subs[testProject] == nil {
		t.Fatalf("create: gcr subscriptions %v", keysOfInstances(subs))
	}
	checkPushTrigger(t, m, subs[testProject], testProject, queue.ArtifactRegistryTopic)

	// off: nothing.
	m = planOf(t, views)
	if len(gcrSubscriptions(m)) != 0 || m.resources["google_pubsub_topic.gcr"] != nil || m.resources["data.google_pubsub_topic.gcr_own"] != nil {
		t.Error("off: the module still has a gcr topic, read or subscription")
	}

	// What Artifact Registry publishes there reaches the function as the
	// third kind of body it dispatches on.
	body := `{"action":"INSERT","digest":"europe-docker.pkg.dev/p/r/redis@sha256:` + strings.Repeat("ab", 32) + `","tag":"europe-docker.pkg.dev/p/r/redis:latest"}`
	env := fmt.Sprintf(`{"message":{"data":%q,"messageId":"1"}}`, base64.StdEncoding.EncodeToString([]byte(body)))
	if ev, _, err := queue.FromEvent([]byte(env)); err != nil || ev.Artifact == nil {
		t.Fatalf("an Artifact Registry notification pushed to the function does not decode as one: %+v %v", ev, err)
	}
}

func keysOfInstances(m map[string]*instance) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// preventsDestroy reports whether a resource block sets
// lifecycle.prevent_destroy = true.
func preventsDestroy(f tfFiles, addr string) bool {
	for _, body := range f.bodies {
		for _, b := range body.Blocks {
			if b.Type != "resource" || b.Labels[0]+"."+b.Labels[1] != addr {
				continue
			}
			for _, lb := range b.Body.Blocks {
				if a, ok := lb.Body.Attributes["prevent_destroy"]; ok && lb.Type == "lifecycle" {
					v, diags := a.Expr.Value(nil)
					return !diags.HasErrors() && v.True()
				}
			}
		}
	}
	return false
}

// The webhooks: every registry with a hook block has its URL in the
// hook_urls output, on the hooks function, which is public however the
// bootstrap is (IAM-only here), and its route is the one the hooks handler
// serves: without a secret a 401, not a 404.
func TestWebhooksAreReachable(t *testing.T) {
	t.Parallel()
	f := parseTF(t, ".")
	if got, want := template(t, f, "output.hook_urls", "value"), `${google_cloud_run_v2_service.function["hooks"].uri}/hooks/${h.name}`; !strings.Contains(got, want) {
		t.Errorf("output hook_urls is %s; want each URL on the hooks function: %s", got, want)
	}
	for _, sc := range []scenario{outside, domain} {
		m := planOf(t, sc)
		fns := functionsByEntryPoint(t, m)
		hooksFn := fns["Hooks"]
		if hooksFn == nil {
			t.Fatalf("%s: no hooks function, though registries have hook blocks", sc.name)
		}
		if hooksFn.str("ingress") != "INGRESS_TRAFFIC_ALL" {
			t.Errorf("%s: the hooks function's ingress is %s; registries call it from anywhere", sc.name, hooksFn.str("ingress"))
		}
		if !isPublic(t, m, "hooks") {
			t.Errorf("%s: the hooks function is not public: every sender would get 403 from Cloud Run", sc.name)
		}
		if sc.name == "outside" && isPublic(t, m, "bootstrap") {
			t.Errorf("%s: the bootstrap is public with bootstrap_public = false", sc.name)
		}
	}

	m := planOf(t, outside)
	urls := m.outVals["hook_urls"]
	var names []string
	for it := urls.ElementIterator(); it.Next(); {
		k, _ := it.Element()
		names = append(names, k.AsString())
	}
	sort.Strings(names)
	path := writeTemp(t, outside)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range cfg.Registries {
		if r.Hook != nil {
			want = append(want, r.Name)
		}
	}
	sort.Strings(want)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("hook_urls names %v; the registries with a hook are %v", names, want)
	}
	h := hooks.New(hooks.Config{Registries: hooks.FromConfig(cfg), Logger: slog.New(slog.DiscardHandler)}).Handler()
	for _, name := range names {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/hooks/"+name, strings.NewReader(`{"entries":[]}`)))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("POST /hooks/%s without its secret: %d, want 401 (the route of the hook)", name, rec.Code)
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
	// No hook block, no hooks function.
	if fns := functionsByEntryPoint(t, planOf(t, shipped)); fns["Hooks"] != nil {
		t.Error("shipped: a hooks function without any hook block")
	}
}

// isPublic reports whether anyone may call a function: an allUsers
// invoker, or Cloud Run's invoker check turned off.
func isPublic(t *testing.T, m *module, fn string) bool {
	t.Helper()
	svc := m.instance("google_cloud_run_v2_service.function", fn)
	if svc == nil {
		t.Fatalf("no %s function", fn)
	}
	if isTrue(svc.Attrs["invoker_iam_disabled"]) {
		return true
	}
	for _, b := range m.ofType("google_cloud_run_v2_service_iam_member") {
		if b.str("name") == svc.str("name") && b.str("role") == "roles/run.invoker" && (b.str("member") == "allUsers" || b.str("member") == "allAuthenticatedUsers") {
			return true
		}
	}
	return false
}

// A hook's secret is a secret of its own: naming a registry credential's
// variable or file as a hook's fails the plan, as does a file in the
// admin token's directory.
var sharedSecrets = scenario{
	name: "shared-secrets",
	files: map[string]string{"registries.yaml": `registries:
  - name: a
    type: http
    http: {url: "https://x.example.com/i.yaml", auth: {type: token, token_env: SHARED_SECRET}}
    hook: {type: hmac, secret_env: SHARED_SECRET}
  - name: b
    type: dir
    dir: {embedded: true}
    hook: {type: bearer, secret_file: /etc/specsync/admin-token/hook}
`},
	args: `  registries_file = "registries.yaml"` + "\n",
}

func TestHookSecretsAreTheirOwn(t *testing.T) {
	t.Parallel()
	out := flat(planFailure(t, sharedSecrets))
	for _, says := range []string{"SHARED_SECRET", "admin token"} {
		if !strings.Contains(out, says) {
			t.Errorf("the plan does not fail saying %q:\n%s", says, out)
		}
	}
}
