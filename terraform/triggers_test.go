//go:build deploycheck

package terraform_test

// What starts the functions: the scheduler's call to the bootstrap and
// the Pub/Sub push subscriptions of the reconcile and commit triggers.

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
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
		if topic.str("id") == sub.str("topic") || topic.str("name") == sub.str("topic") {
			return topic
		}
	}
	t.Fatalf("%s: its topic %q is not a topic of the module", sub.addr(), sub.str("topic"))
	return nil
}

// changesTopicOf is the topic the change feed publishes to: the one that
// is neither the work topic nor a dead-letter topic.
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
// the one of Artifact Registry's gcr topic (gcrSubscriptionOf).
func pushSubscriptionOf(t *testing.T, m *module, ordered bool) *instance {
	t.Helper()
	var found []*instance
	for _, sub := range m.ofType("google_pubsub_subscription") {
		if sub.one("push_config") != nil && isTrue(sub.Attrs["enable_message_ordering"]) == ordered && !isGCRTopic(sub.str("topic")) {
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

// isGCRTopic reports whether topic (an id or a name) is Artifact
// Registry's gcr topic of the project.
func isGCRTopic(topic string) bool {
	return topic == queue.ArtifactRegistryTopic || topic == "projects/"+testProject+"/topics/"+queue.ArtifactRegistryTopic
}

func isTrue(v cty.Value) bool {
	return v.IsKnown() && !v.IsNull() && v.Type() == cty.Bool && v.True()
}

func TestSchedulerCallsBootstrapWithOIDC(t *testing.T) {
	m := evaluated(t, nil)
	p := parseFunctions(t)
	fns := functionsByEntryPoint(t, m)
	jobs := m.ofType("google_cloud_scheduler_job")
	if len(jobs) != 1 {
		t.Fatalf("want one scheduler job, found %d", len(jobs))
	}
	job := jobs[0]
	var bootstrapEP string
	for _, r := range p.regs {
		if r.Name == "Bootstrap" {
			bootstrapEP = r.Name
		}
	}
	if bootstrapEP == "" {
		t.Fatal("the code registers no Bootstrap function")
	}
	fn := fns[bootstrapEP]
	ht := job.one("http_target")
	if ht == nil {
		t.Fatal("the scheduler job has no http_target")
	}
	const path = "/bootstrap"
	if got, want := ht.str("uri"), fn.one("service_config").str("uri")+path; got != want {
		t.Errorf("the scheduler calls %q, want the bootstrap function's %q", got, want)
	}
	if ht.str("http_method") != http.MethodPost {
		t.Errorf("the scheduler uses %s, want POST", ht.str("http_method"))
	}
	if _, ok := ht.Attrs["body"]; ok {
		t.Error("the scheduler sends a body; POST /bootstrap rejects one")
	}
	oidc := ht.one("oidc_token")
	if oidc == nil {
		t.Fatal("the scheduler sends no OIDC token")
	}
	env := stringMap(fn.one("service_config").Attrs["environment_variables"])
	if got := env["SPECSYNC_SCHEDULER_AUDIENCE"]; got == "" || got != oidc.str("audience") {
		t.Errorf("the bootstrap accepts audience %q; the scheduler's token is for %q", got, oidc.str("audience"))
	}
	if got := env["SPECSYNC_SCHEDULER_SERVICE_ACCOUNT"]; got == "" || got != oidc.str("service_account_email") {
		t.Errorf("the bootstrap accepts tokens of %q; the scheduler's token is issued to %q", got, oidc.str("service_account_email"))
	}
	// The audience is the function's own (cloudfunctions.net) URL, which
	// a postcondition checks at apply time.
	if oidc.str("audience") != fn.str("url") {
		t.Errorf("the OIDC audience %q is not the bootstrap function's URL %q", oidc.str("audience"), fn.str("url"))
	}
	if job.str("schedule") != asString(m.vars["bootstrap_schedule"]) {
		t.Error("the schedule is not var.bootstrap_schedule")
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
	m := evaluated(t, nil)
	checkPushTrigger(t, m, pushSubscriptionOf(t, m, false), workTopicOf(t, m))
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
	m := evaluated(t, nil)
	sub := pushSubscriptionOf(t, m, true)
	commit := commitTopicOf(t, m)
	checkPushTrigger(t, m, sub, commit)
	if commit.str("id") == workTopicOf(t, m).str("id") {
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

// checkPushTrigger checks a push subscription to the reconcile function.
func checkPushTrigger(t *testing.T, m *module, sub, work *instance) {
	t.Helper()
	fns := functionsByEntryPoint(t, m)
	reconcileFn := fns["Reconcile"]
	if reconcileFn == nil {
		t.Fatal("no Reconcile function")
	}
	uri := reconcileFn.one("service_config").str("uri")
	pc := sub.one("push_config")
	ep := pc.str("push_endpoint")
	if !strings.HasPrefix(ep, uri+"/") {
		t.Errorf("push endpoint %q is not the reconcile function %q", ep, uri)
	}
	// functions-framework-go takes the topic from the path.
	mt := regexp.MustCompile(`(projects/[^/?]+/topics/[^/?]+)/*`).FindStringSubmatch(strings.TrimPrefix(ep, uri))
	if mt == nil || mt[1] != "projects/"+testProject+"/topics/"+work.str("name") {
		t.Errorf("push endpoint %q does not end in /projects/PROJECT/topics/TOPIC of the work topic", ep)
	}
	if _, ok := pc.Attrs["no_wrapper"]; ok || len(pc.Blocks["no_wrapper"]) > 0 {
		t.Error("the push must keep Pub/Sub's envelope (functions-framework-go decodes it)")
	}
	oidc := pc.one("oidc_token")
	if oidc == nil {
		t.Fatal("the push sends no OIDC token")
	}
	if oidc.str("audience") != uri {
		t.Errorf("OIDC audience %q, want the reconcile service URL %q", oidc.str("audience"), uri)
	}
	if oidc.str("service_account_email") != m.instance("google_service_account.reconcile_push", "").str("email") {
		t.Error("the push does not authenticate as the reconcile push account")
	}
	dl := sub.one("dead_letter_policy")
	if dl == nil {
		t.Fatal("the work topic's subscription has no dead-letter policy")
	}
	if dl.str("dead_letter_topic") == "" || dl.str("dead_letter_topic") == work.str("id") {
		t.Error("the dead-letter topic must be a topic of its own")
	}
	var dlt *instance
	for _, topic := range m.ofType("google_pubsub_topic") {
		if topic.str("id") == dl.str("dead_letter_topic") {
			dlt = topic
		}
	}
	if dlt == nil {
		t.Fatal("the dead-letter topic is not a topic of the module")
	}
	kept := false
	for _, s := range m.ofType("google_pubsub_subscription") {
		kept = kept || s.str("topic") == dlt.str("id")
	}
	if !kept {
		t.Error("no subscription keeps dead-lettered messages")
	}
	n, _ := dl.Attrs["max_delivery_attempts"].AsBigFloat().Int64()
	if n < 5 || n > 100 {
		t.Errorf("max_delivery_attempts %d; Pub/Sub allows 5 to 100", n)
	}
	rp := sub.one("retry_policy")
	if rp == nil || rp.str("minimum_backoff") == "" || rp.str("maximum_backoff") == "" {
		t.Error("the subscription retries without a backoff")
	}
	ack, _ := sub.Attrs["ack_deadline_seconds"].AsBigFloat().Int64()
	timeout, _ := reconcileFn.one("service_config").Attrs["timeout_seconds"].AsBigFloat().Int64()
	if ack < timeout {
		t.Errorf("ack deadline %ds is shorter than the reconcile timeout %ds: Pub/Sub would redeliver a running reconcile", ack, timeout)
	}
	leaseTTL, _ := m.vars["lease_ttl_seconds"].AsBigFloat().Int64()
	if leaseTTL <= timeout {
		t.Errorf("lease TTL %ds does not outlive a reconcile (%ds)", leaseTTL, timeout)
	}
	var onWork int
	for _, s := range m.ofType("google_pubsub_subscription") {
		if s.str("topic") == work.str("id") {
			onWork++
		}
	}
	if onWork != 1 {
		t.Errorf("%d subscriptions on topic %s; a second one would deliver every message twice", onWork, work.str("name"))
	}
}
