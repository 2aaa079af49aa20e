//go:build deploycheck

package terraform_test

// Least privilege: every grant of the module is one its holder needs.

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// binding is one IAM grant of the module.
type binding struct {
	Scope, Role, Member, Addr string
}

func bindingsOf(t *testing.T, m *module) []binding {
	t.Helper()
	scopes := map[string]string{
		"google_project_iam_member":               "project",
		"google_pubsub_topic_iam_member":          "topic",
		"google_pubsub_subscription_iam_member":   "subscription",
		"google_secret_manager_secret_iam_member": "secret",
		"google_cloud_run_v2_service_iam_member":  "run",
		"google_service_account_iam_member":       "serviceaccount",
		"google_storage_bucket_iam_member":        "bucket",
		// Scoped PROJECT/LOCATION/REPOSITORY (below).
		"google_artifact_registry_repository_iam_member": "arrepository",
	}
	scopeAttr := map[string]string{
		"topic": "topic", "subscription": "subscription", "secret": "secret_id",
		"run": "name", "serviceaccount": "service_account_id", "bucket": "bucket",
	}
	var out []binding
	for _, k := range m.order {
		r := m.resources[k]
		if !strings.Contains(r.Type, "_iam_") {
			continue
		}
		if strings.HasSuffix(r.Type, "_iam_binding") || strings.HasSuffix(r.Type, "_iam_policy") {
			t.Errorf("%s: authoritative IAM (%s) would remove grants terraform does not know; use *_iam_member", k, r.Type)
			continue
		}
		scope, ok := scopes[r.Type]
		if !ok {
			t.Errorf("%s: IAM resource type %s is not known to this test; add it to bindingsOf", k, r.Type)
			continue
		}
		for _, inst := range r.Instances {
			s := scope
			if a := scopeAttr[scope]; a != "" {
				s += ":" + inst.str(a)
			}
			if scope == "arrepository" {
				s += ":" + inst.str("project") + "/" + inst.str("location") + "/" + inst.str("repository")
			}
			out = append(out, binding{Scope: s, Role: inst.str("role"), Member: inst.str("member"), Addr: inst.addr()})
		}
	}
	return out
}

func TestLeastPrivilege(t *testing.T) {
	m := evaluated(t, map[string]cty.Value{"artifact_registry_repositories": ctyFromGo(arRepositories)})
	bs := bindingsOf(t, m)
	fns := functionsByEntryPoint(t, m)
	p := parseFunctions(t)
	sa := func(addr, key string) string {
		i := m.instance(addr, key)
		if i == nil {
			t.Fatalf("no %s[%q]", addr, key)
		}
		return "serviceAccount:" + i.str("email")
	}
	// Every function's runtime account, by entry point.
	accounts := map[string]string{}
	for ep, fn := range fns {
		email := fn.one("service_config").str("service_account_email")
		for other, a := range accounts {
			if a == "serviceAccount:"+email {
				t.Errorf("%s and %s share a service account", ep, other)
			}
		}
		accounts[ep] = "serviceAccount:" + email
	}
	pushSub := pushSubscriptionOf(t, m, false)
	commitSub := pushSubscriptionOf(t, m, true)
	push := "serviceAccount:" + pushSub.one("push_config").one("oidc_token").str("service_account_email")
	if other := "serviceAccount:" + commitSub.one("push_config").one("oidc_token").str("service_account_email"); other != push {
		t.Errorf("the commit push authenticates as %s, the reconcile push as %s: one push account invokes the reconcile function", other, push)
	}
	job := m.ofType("google_cloud_scheduler_job")
	if len(job) != 1 {
		t.Fatalf("want one scheduler job, found %d", len(job))
	}
	scheduler := "serviceAccount:" + job[0].one("http_target").one("oidc_token").str("service_account_email")
	build := sa("google_service_account.build", "")
	ours := map[string]string{push: "push", scheduler: "scheduler", build: "build"}
	for ep, a := range accounts {
		ours[a] = ep
	}
	if len(ours) != len(accounts)+3 {
		t.Error("the push subscription, the scheduler, the builds and the functions must each have their own account")
	}

	held := map[string][]binding{}
	for _, b := range bs {
		switch b.Role {
		case "roles/owner", "roles/editor", "roles/viewer":
			t.Errorf("%s grants the primitive role %s to %s", b.Addr, b.Role, b.Member)
		}
		if strings.HasSuffix(b.Role, ".admin") || strings.HasSuffix(b.Role, "Admin") {
			t.Errorf("%s grants an admin role %s to %s", b.Addr, b.Role, b.Member)
		}
		held[b.Member] = append(held[b.Member], b)
	}

	// What each function's account may hold: Firestore at project level,
	// plus the grants listed here.
	workTopic := workTopicOf(t, m)
	changesTopic := changesTopicOf(t, m)
	commitTopic := commitTopicOf(t, m)
	secretsOf := func(ep string) map[string]bool {
		out := map[string]bool{}
		sc := fns[ep].one("service_config")
		for _, s := range sc.Blocks["secret_environment_variables"] {
			out["secret:"+s.str("secret")] = true
		}
		for _, v := range sc.Blocks["secret_volumes"] {
			out["secret:"+v.str("secret")] = true
		}
		return out
	}
	g := loadGoRegistries(t)
	hookKeys := map[string]bool{}
	for _, k := range append(g.HookSecretEnvs, g.HookSecretFiles...) {
		hookKeys[k] = true
	}
	registrySecrets, hookSecrets := map[string]bool{}, map[string]bool{}
	for _, s := range m.ofType("google_secret_manager_secret") {
		switch {
		case secretSettings[s.Key]:
		case hookKeys[s.Key]:
			hookSecrets["secret:"+s.str("secret_id")] = true
		default:
			registrySecrets["secret:"+s.str("secret_id")] = true
		}
	}
	if len(hookSecrets) == 0 {
		t.Fatal("no hook secret among the module's secrets: the hook checks below would be vacuous")
	}
	servesHooks := map[string]bool{}
	for _, r := range p.regs {
		acct := accounts[r.Name]
		mounted := secretsOf(r.Name)
		accessible := map[string]bool{}
		hasFirestore, hasTrace := false, false
		for _, b := range held[acct] {
			switch {
			case b.Scope == "project" && b.Role == "roles/datastore.user":
				hasFirestore = true
			case b.Scope == "project" && b.Role == "roles/cloudtrace.agent":
				hasTrace = true
			case b.Scope == "project":
				t.Errorf("%s: %s holds project role %s; functions get Firestore (roles/datastore.user) and Cloud Trace writes (roles/cloudtrace.agent), nothing else project-wide", b.Addr, r.Name, b.Role)
			case b.Role == "roles/secretmanager.secretAccessor" && strings.HasPrefix(b.Scope, "secret:"):
				accessible[b.Scope] = true
			case b.Role == "roles/pubsub.publisher" && r.Name == "Bootstrap" && b.Scope == "topic:"+workTopic.str("name"):
			case b.Role == "roles/pubsub.publisher" && r.Name == "Reconcile" && b.Scope == "topic:"+changesTopic.str("name"):
			case b.Role == "roles/pubsub.publisher" && r.Name == "Reconcile" && b.Scope == "topic:"+commitTopic.str("name"):
			case b.Role == "roles/artifactregistry.reader" && r.Name == "Reconcile" && strings.HasPrefix(b.Scope, "arrepository:"):
			default:
				t.Errorf("%s: %s may not hold %s on %s", b.Addr, r.Name, b.Role, b.Scope)
			}
		}
		if !hasFirestore {
			t.Errorf("%s has no roles/datastore.user", r.Name)
		}
		// Every function traces (pkg/telemetry): without the agent role
		// Cloud Trace refuses its spans, and a bootstrap's trace has holes.
		if !hasTrace {
			t.Errorf("%s has no roles/cloudtrace.agent: its spans cannot reach Cloud Trace", r.Name)
		}
		if !reflect.DeepEqual(accessible, mounted) && !(len(accessible) == 0 && len(mounted) == 0) {
			t.Errorf("%s can read secrets %v but mounts %v: each secret is readable by the functions that use it and only those", r.Name, keysOf(accessible), keysOf(mounted))
		}
		rc := p.reach(r.Handler)
		servesHooks[r.Name] = rc.ServesHooks
		for s := range accessible {
			if registrySecrets[s] && !rc.FetchesRegistries {
				t.Errorf("%s does not fetch registries but can read the registry secret %s", r.Name, s)
			}
			if hookSecrets[s] && !rc.ServesHooks {
				t.Errorf("%s serves no webhook but can read the hook secret %s", r.Name, s)
			}
		}
		if rc.ServesHooks {
			for s := range hookSecrets {
				if !accessible[s] {
					t.Errorf("%s serves the webhooks but cannot read the hook secret %s", r.Name, s)
				}
			}
		}
	}
	// The catalog: instance records only (by its code; IAM cannot scope
	// Firestore to collections, see iam.tf), no Pub/Sub and no secret at
	// all: it checks credentials against their digests.
	if len(held[accounts["Catalog"]]) == 0 {
		t.Fatal("the catalog's account holds nothing: the checks below would be vacuous")
	}
	for _, b := range held[accounts["Catalog"]] {
		if strings.HasPrefix(b.Role, "roles/pubsub.") {
			t.Errorf("%s: the catalog may not use Pub/Sub (%s)", b.Addr, b.Role)
		}
		// (Its spans are no data: roles/cloudtrace.agent writes traces only.)
		if b.Role == "roles/datastore.owner" || (b.Scope == "project" && b.Role != "roles/datastore.user" && b.Role != "roles/cloudtrace.agent") {
			t.Errorf("%s: the catalog's only write role is roles/datastore.user, not %s", b.Addr, b.Role)
		}
		if strings.HasPrefix(b.Role, "roles/secretmanager.") {
			t.Errorf("%s: the catalog may not read secrets, not even its own credentials (it holds their digests), but holds %s on %s", b.Addr, b.Role, b.Scope)
		}
	}
	if sc := fns["Catalog"].one("service_config"); len(sc.Blocks["secret_environment_variables"]) > 0 || len(sc.Blocks["secret_volumes"]) > 0 {
		t.Errorf("the catalog mounts secrets %v", keysOf(secretsOf("Catalog")))
	}
	for _, b := range held[accounts["Catalog"]] {
		if b.Role == "roles/pubsub.publisher" {
			t.Errorf("%s: the catalog may not publish", b.Addr)
		}
	}
	for s := range secretsOf("Catalog") {
		if registrySecrets[s] {
			t.Errorf("the catalog mounts the registry secret %s", s)
		}
	}
	for s := range secretsOf("Bootstrap") {
		if registrySecrets[s] {
			t.Errorf("the bootstrap mounts the registry secret %s", s)
		}
	}
	if !servesHooks["Bootstrap"] || servesHooks["Reconcile"] || servesHooks["Catalog"] {
		t.Errorf("functions serving webhooks: %v; want the bootstrap only", servesHooks)
	}
	for s := range secretsOf("Reconcile") {
		if hookSecrets[s] {
			t.Errorf("the reconcile mounts the hook secret %s", s)
		}
	}
	// Secrets: no one but the functions reads them.
	for _, b := range bs {
		if b.Role == "roles/secretmanager.secretAccessor" {
			if _, fn := ours[b.Member]; !fn || b.Member == push || b.Member == scheduler || b.Member == build {
				t.Errorf("%s: %s may not read secrets", b.Addr, b.Member)
			}
		}
	}

	// Invokers: the reconcile only by its trigger; the trigger and the
	// scheduler invoke one function each and hold nothing else.
	serviceOf := func(ep string) string { return "run:" + fns[ep].one("service_config").str("service") }
	for _, b := range bs {
		if b.Scope == serviceOf("Reconcile") && b.Member != push {
			t.Errorf("%s: only the push subscription's account may invoke the reconcile function, not %s", b.Addr, b.Member)
		}
	}
	onlyHolds := func(who, acct string, want binding) {
		got := held[acct]
		if len(got) != 1 || got[0].Scope != want.Scope || got[0].Role != want.Role {
			t.Errorf("the %s account holds %v; want only %s on %s", who, got, want.Role, want.Scope)
		}
	}
	onlyHolds("push", push, binding{Scope: serviceOf("Reconcile"), Role: "roles/run.invoker"})
	onlyHolds("scheduler", scheduler, binding{Scope: serviceOf("Bootstrap"), Role: "roles/run.invoker"})
	for _, b := range held[build] {
		switch b.Role {
		case "roles/logging.logWriter", "roles/artifactregistry.writer", "roles/storage.objectViewer":
		default:
			t.Errorf("%s: the build account may not hold %s", b.Addr, b.Role)
		}
	}
	// allUsers: the HTTP functions (they authenticate callers themselves),
	// never the reconcile.
	for _, b := range bs {
		if b.Member == "allUsers" || b.Member == "allAuthenticatedUsers" {
			if b.Role != "roles/run.invoker" || (b.Scope != serviceOf("Catalog") && b.Scope != serviceOf("Bootstrap")) {
				t.Errorf("%s: %s may only invoke the catalog and the bootstrap", b.Addr, b.Member)
			}
		}
	}
	// Pub/Sub's service agent signs the push's OIDC tokens and dead-letters.
	agent := "serviceAccount:service-" + fakeProjectNumber + "@gcp-sa-pubsub.iam.gserviceaccount.com"
	dlt := pushSub.one("dead_letter_policy").str("dead_letter_topic")
	var dltName string
	for _, topic := range m.ofType("google_pubsub_topic") {
		if topic.str("id") == dlt {
			dltName = topic.str("name")
		}
	}
	pushAccount := m.instance("google_service_account.reconcile_push", "")
	if commitDLT := commitSub.one("dead_letter_policy").str("dead_letter_topic"); commitDLT != dlt {
		t.Errorf("the commit subscription dead-letters to %s, the reconcile one to %s: one dead-letter topic (and its grant)", commitDLT, dlt)
	}
	wantAgent := []binding{
		{Scope: "topic:" + dltName, Role: "roles/pubsub.publisher"},
		{Scope: "subscription:" + pushSub.str("name"), Role: "roles/pubsub.subscriber"},
		{Scope: "subscription:" + commitSub.str("name"), Role: "roles/pubsub.subscriber"},
		{Scope: "serviceaccount:" + pushAccount.str("name"), Role: "roles/iam.serviceAccountTokenCreator"},
	}
	// Artifact Registry's events dead-letter like the other triggers.
	if gcr := gcrSubscriptionOf(t, m); gcr != nil {
		wantAgent = append(wantAgent, binding{Scope: "subscription:" + gcr.str("name"), Role: "roles/pubsub.subscriber"})
		if dl := gcr.one("dead_letter_policy"); dl == nil || dl.str("dead_letter_topic") != dlt {
			t.Errorf("the gcr subscription does not dead-letter to %s, the topic the agent may publish to", dlt)
		}
		if a := "serviceAccount:" + gcr.one("push_config").one("oidc_token").str("service_account_email"); a != push {
			t.Errorf("the gcr push authenticates as %s; one push account invokes the reconcile function", a)
		}
	}
	for _, want := range wantAgent {
		found := false
		for _, b := range held[agent] {
			found = found || (b.Scope == want.Scope && b.Role == want.Role)
		}
		if !found {
			t.Errorf("Pub/Sub's service agent needs %s on %s", want.Role, want.Scope)
		}
	}
	if len(held[agent]) != len(wantAgent) {
		t.Errorf("Pub/Sub's service agent holds %v; want exactly the %d grants dead-lettering and push authentication need", held[agent], len(wantAgent))
	}
	for member := range held {
		if _, known := ours[member]; !known && member != agent && member != "allUsers" {
			t.Errorf("grants to %s, which is not one of the module's identities", member)
		}
	}
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
