//go:build deploycheck

package terraform_test

// What starts the functions: the scheduler's call to the bootstrap and
// the Pub/Sub push subscriptions of the reconcile, commit and event
// triggers.

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/queue"
)

// workTopicOf is the topic the bootstrap publishes to, identified as the
// topic of the unordered push subscription to the CloudEvent function.
func workTopicOf(t *testing.T, m *module) *instance {
	t.Helper()
	return topicOf(t, m, pushSubscriptionOf(t, m, false))
}

// commitTopicOf is the topic of commit requests: the topic of the ordered
// push subscription.
func commitTopicOf(t *testing.T, m *module) *instance {
	t.Helper()
	return topicOf(t, m, pushSubscriptionOf(t, m, true))
}

func topicOf(t *testing.T, m *module, sub *instance) *instance {
	t.Helper()
	for _, topic := range m.ofType("google_pubsub_topic") {
		if "projects/"+topic.str("project")+"/topics/"+topic.str("name") == sub.str("topic") {
			return topic
		}
	}
	t.Fatalf("%s: its topic %q is not a topic of the module", sub.addr(), sub.str("topic"))
	return nil
}

// changesTopicOf is the topic the change feed publishes to.
func changesTopicOf(t *testing.T, m *module) *instance {
	t.Helper()
	var found []*instance
	for _, topic := range m.ofType("google_pubsub_topic") {
		if strings.HasSuffix(topic.str("name"), "-catalog-changes") {
			found = append(found, topic)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one *-catalog-changes topic, found %d", len(found))
	}
	return found[0]
}

// pushSubscriptionOf is the one push subscription with message ordering
// (the commit trigger) or without (the reconcile trigger), other than
// those of Artifact Registry's gcr topics.
func pushSubscriptionOf(t *testing.T, m *module, ordered bool) *instance {
	t.Helper()
	var found []*instance
	for _, sub := range m.ofType("google_pubsub_subscription") {
		_, gcr := gcrProject(sub.str("topic"))
		if sub.one("push_config") != nil && isTrue(sub.Attrs["enable_message_ordering"]) == ordered && !gcr {
			found = append(found, sub)
		}
	}
	if len(found) != 1 {
		what := "unordered push subscription (the reconcile trigger)"
		if ordered {
			what = "ordered push subscription (the commit trigger)"
		}
		t.Fatalf("want exactly one %s, found %d", what, len(found))
	}
	return found[0]
}

func isTrue(v cty.Value) bool {
	return v != cty.NilVal && v.IsKnown() && !v.IsNull() && v.Type() == cty.Bool && v.True()
}

func number(v cty.Value) int64 {
	if v == cty.NilVal || !v.IsKnown() || v.IsNull() || v.Type() != cty.Number {
		return -1
	}
	n, _ := v.AsBigFloat().Int64()
	return n
}

// seconds reads "300s".
func seconds(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(s, "s"), 10, 64)
	if err != nil || !strings.HasSuffix(s, "s") {
		return -1
	}
	return n
}

func TestSchedulerCallsBootstrapWithOIDC(t *testing.T) {
	t.Parallel()
	f := parseTF(t, ".")
	for _, sc := range []scenario{shipped, outside} {
		m := planOf(t, sc)
		fn := functionsByEntryPoint(t, m)["Bootstrap"]
		jobs := m.ofType("google_cloud_scheduler_job")
		if len(jobs) != 1 {
			t.Fatalf("%s: want one scheduler job, found %d", sc.name, len(jobs))
		}
		ht := jobs[0].one("http_target")
		if ht == nil || ht.one("oidc_token") == nil {
			t.Fatalf("%s: the scheduler job sends no OIDC token", sc.name)
		}
		if ht.str("http_method") != http.MethodPost {
			t.Errorf("the scheduler uses %s, want POST", ht.str("http_method"))
		}
		if v, ok := ht.Attrs["body"]; ok && !v.IsNull() {
			t.Error("the scheduler sends a body; POST /bootstrap rejects one")
		}
		oidc := ht.one("oidc_token")
		env, _ := envOf(t, fn)
		if got := env["SPECSYNC_SCHEDULER_AUDIENCE"]; got == "" || got != oidc.str("audience") || got != firstAudience(fn) {
			t.Errorf("%s: the bootstrap accepts audience %q and its service %q; the scheduler's token is for %q", sc.name, got, firstAudience(fn), oidc.str("audience"))
		}
		if got := env["SPECSYNC_SCHEDULER_SERVICE_ACCOUNT"]; got == "" || got != oidc.str("service_account_email") {
			t.Errorf("%s: the bootstrap accepts tokens of %q; the scheduler's token is issued to %q", sc.name, got, oidc.str("service_account_email"))
		}
		// The scheduler may invoke it even when nobody else may.
		scheduler := "serviceAccount:" + oidc.str("service_account_email")
		invokes := false
		for _, b := range m.ofType("google_cloud_run_v2_service_iam_member") {
			invokes = invokes || b.str("name") == fn.str("name") && b.str("member") == scheduler && b.str("role") == "roles/run.invoker"
		}
		if !invokes {
			t.Errorf("%s: the scheduler's account may not invoke the bootstrap function", sc.name)
		}
		if jobs[0].str("schedule") != "0 * * * *" {
			t.Errorf("%s: schedule %q, want the default hourly one", sc.name, jobs[0].str("schedule"))
		}
	}
	// The URL is known only at apply time: the module's source says it is
	// the bootstrap service's URL and the start route.
	const path = "/bootstrap"
	if got, want := template(t, f, "google_cloud_scheduler_job.bootstrap", "http_target", "uri"), `${google_cloud_run_v2_service.function["bootstrap"].uri}`+path; got != want {
		t.Errorf("the scheduler calls %s, want %s", got, want)
	}
	// The path is the bootstrap handler's start route: without a token it
	// is a 401, not a 404.
	h := (&bootstrap.Service{VerifyAdmin: func(*http.Request, string) bool { return false }}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("POST %s without a token: %d, want 401 (the route the scheduler calls)", path, rec.Code)
	}
}

func TestReconcileTrigger(t *testing.T) {
	t.Parallel()
	m := planOf(t, reference(t))
	work := workTopicOf(t, m)
	checkPushTrigger(t, m, pushSubscriptionOf(t, m, false), testProject, work.str("name"))
	if m.instance("google_pubsub_topic.catalog_changes", "") == nil {
		t.Error("no catalog-changes topic")
	}
}

// The commit trigger: the ordered push subscription of the commit topic,
// to the same function as the reconcile trigger, with the same identity,
// dead letters and ack deadline; and the code agrees: what the reconcile
// function publishes there (queue.CommitPublisher) is a commit request on
// the one ordering key, which the function dispatches to the committer.
func TestCommitTrigger(t *testing.T) {
	t.Parallel()
	m := planOf(t, reference(t))
	sub := pushSubscriptionOf(t, m, true)
	commit := commitTopicOf(t, m)
	checkPushTrigger(t, m, sub, testProject, commit.str("name"))
	if commit.str("name") == workTopicOf(t, m).str("name") {
		t.Fatal("commit requests and reconcile messages share a topic: the commits would not be ordered apart from the runs")
	}
	body, err := queue.CommitRequest{Operation: "op", Registry: "team-a"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf(`{"message":{"data":%q,"messageId":"1"}}`, base64.StdEncoding.EncodeToString(body))
	if ev, _, err := queue.FromEvent([]byte(env)); err != nil || ev.Commit == nil {
		t.Fatalf("a commit request pushed to the function does not decode as one: %+v %v", ev, err)
	}
	if queue.CommitOrderingKey == "" {
		t.Error("commit requests have no ordering key: an ordered subscription would not serialize them")
	}
}

// pushEndpoint is how the module writes every push endpoint: the reconcile
// service's URL, then /projects/PROJECT/topics/TOPIC, which
// functions-framework-go turns into the event's source (the function
// tells an Artifact Registry event by its gcr topic).
var pushEndpoint = regexp.MustCompile(`^\$\{google_cloud_run_v2_service\.function\["reconcile"\]\.uri\}/projects/\$\{[^}]+\}/topics/(gcr|\$\{[^}]+\})$`)

// checkPushTrigger checks a push subscription to the reconcile function
// that reads project/topic.
func checkPushTrigger(t *testing.T, m *module, sub *instance, project, topic string) {
	t.Helper()
	fns := functionsByEntryPoint(t, m)
	reconcileFn := fns["Reconcile"]
	if reconcileFn == nil {
		t.Fatal("no Reconcile function")
	}
	if got, want := sub.str("topic"), "projects/"+project+"/topics/"+topic; got != want {
		t.Errorf("%s reads %s, want %s", sub.addr(), got, want)
	}
	// The endpoint is the service's URL, known at apply time: how the
	// module writes it is what can be checked.
	f := parseTF(t, ".")
	addr := sub.Res.Type + "." + sub.Res.Name
	if ep := template(t, f, addr, "push_config", "push_endpoint"); !pushEndpoint.MatchString(ep) {
		t.Errorf("%s: push endpoint %s is not the reconcile function's /projects/PROJECT/topics/TOPIC", addr, ep)
	}
	pc := sub.one("push_config")
	if pc.one("no_wrapper") != nil {
		t.Error("the push must keep Pub/Sub's envelope (functions-framework-go decodes it)")
	}
	oidc := pc.one("oidc_token")
	if oidc == nil {
		t.Fatal("the push sends no OIDC token")
	}
	if oidc.str("audience") != firstAudience(reconcileFn) || oidc.str("audience") == "" {
		t.Errorf("OIDC audience %q, want the reconcile service's audience %q", oidc.str("audience"), firstAudience(reconcileFn))
	}
	if oidc.str("service_account_email") != m.instance("google_service_account.reconcile_push", "").str("email") {
		t.Error("the push does not authenticate as the reconcile push account")
	}
	dl := sub.one("dead_letter_policy")
	if dl == nil {
		t.Fatalf("%s has no dead-letter policy", sub.addr())
	}
	var dlt *instance
	for _, tp := range m.ofType("google_pubsub_topic") {
		if "projects/"+tp.str("project")+"/topics/"+tp.str("name") == dl.str("dead_letter_topic") {
			dlt = tp
		}
	}
	if dlt == nil || dlt.str("name") == topic {
		t.Fatalf("%s: the dead-letter topic %q must be a topic of the module's own", sub.addr(), dl.str("dead_letter_topic"))
	}
	kept := false
	for _, s := range m.ofType("google_pubsub_subscription") {
		kept = kept || s.str("topic") == dl.str("dead_letter_topic")
	}
	if !kept {
		t.Error("no subscription keeps dead-lettered messages")
	}
	if n := number(dl.Attrs["max_delivery_attempts"]); n < 5 || n > 100 {
		t.Errorf("max_delivery_attempts %d; Pub/Sub allows 5 to 100", n)
	}
	rp := sub.one("retry_policy")
	if rp == nil || rp.str("minimum_backoff") == "" || rp.str("maximum_backoff") == "" {
		t.Error("the subscription retries without a backoff")
	}
	ack := number(sub.Attrs["ack_deadline_seconds"])
	timeout := seconds(reconcileFn.one("template").str("timeout"))
	if ack < timeout {
		t.Errorf("ack deadline %ds is shorter than the reconcile timeout %ds: Pub/Sub would redeliver a running reconcile", ack, timeout)
	}
	env, _ := envOf(t, reconcileFn)
	if lease := seconds(env["SPECSYNC_LEASE_TTL"]); lease <= timeout {
		t.Errorf("lease TTL %ds does not outlive a reconcile (%ds)", lease, timeout)
	}
	onTopic := 0
	for _, s := range m.ofType("google_pubsub_subscription") {
		if s.str("topic") == sub.str("topic") {
			onTopic++
		}
	}
	if onTopic != 1 {
		t.Errorf("%d subscriptions on topic %s; a second one would deliver every message twice", onTopic, sub.str("topic"))
	}
}
