//go:build deploycheck

package terraform_test

// Least privilege: every grant of the module is one its holder needs.

import (
	"reflect"
	"sort"
	"strings"
	"testing"
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
		if r.Mode != "resource" || !strings.Contains(r.Type, "_iam_") {
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
			switch {
			case scope == "project":
				s += ":" + inst.str("project")
			case scope == "arrepository":
				s += ":" + inst.str("project") + "/" + inst.str("location") + "/" + inst.str("repository")
			default:
				s += ":" + inst.str(scopeAttr[scope])
			}
			member := inst.str("member")
			if inst.unknown("member") {
				member = "(known after apply)"
			}
			out = append(out, binding{Scope: s, Role: inst.str("role"), Member: member, Addr: inst.addr()})
		}
	}
	return out
}

func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	for _, sc := range []scenario{reference(t), outside, views} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			leastPrivilege(t, planOf(t, sc))
		})
	}
}

func leastPrivilege(t *testing.T, m *module) {
	bs := bindingsOf(t, m)
	fns := functionsByEntryPoint(t, m)
	p := parseFunctions(t)
	// Every function's runtime account, by entry point.
	accounts := map[string]string{}
	for ep, fn := range fns {
		email := fn.one("template").str("service_account")
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
	build := "serviceAccount:" + m.instance("google_service_account.build", "").str("email")
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

	// What each function's account may hold: the grants listed here.
	workTopic := workTopicOf(t, m).str("name")
	changesTopic := changesTopicOf(t, m).str("name")
	commitTopic := commitTopicOf(t, m).str("name")
	configBucket := "bucket:" + m.instance("google_storage_bucket.config", "").str("name")
	secretsOf := func(ep string) map[string]bool {
		out := map[string]bool{}
		_, secretEnv := envOf(t, fns[ep])
		for _, id := range secretEnv {
			out["secret:"+id] = true
		}
		for _, id := range mountsOf(t, fns[ep]) {
			out["secret:"+id] = true
		}
		return out
	}
	hookSecrets, registrySecrets := map[string]bool{}, map[string]bool{}
	for _, s := range m.ofType("google_secret_manager_secret") {
		id := "secret:" + s.str("secret_id")
		switch {
		case secretSettings[s.Key], strings.Contains(s.str("secret_id"), "-broker-view-"):
		case strings.Contains(s.str("secret_id"), "-hook-"):
			hookSecrets[id] = true
		default:
			registrySecrets[id] = true
		}
	}
	for _, r := range p.regs {
		acct, deployed := accounts[r.Name]
		if !deployed {
			continue
		}
		rc := p.reach(r.Handler)
		mounted := secretsOf(r.Name)
		accessible := map[string]bool{}
		hasFirestore, hasTrace := false, false
		for _, b := range held[acct] {
			switch {
			case b.Scope == "project:"+testProject && b.Role == "roles/datastore.user":
				hasFirestore = true
			case b.Scope == "project:"+testProject && b.Role == "roles/telemetry.tracesWriter":
				hasTrace = true
			case b.Role == "roles/secretmanager.secretAccessor" && strings.HasPrefix(b.Scope, "secret:"):
				accessible[b.Scope] = true
			case b.Role == "roles/storage.objectViewer" && b.Scope == configBucket && rc.LoadsRegistries:
			case b.Role == "roles/pubsub.publisher" && (r.Name == "Bootstrap" || r.Name == "Hooks") && b.Scope == "topic:"+workTopic:
			case b.Role == "roles/pubsub.publisher" && r.Name == "Reconcile" && b.Scope == "topic:"+changesTopic:
			case b.Role == "roles/pubsub.publisher" && r.Name == "Reconcile" && b.Scope == "topic:"+commitTopic:
			// What the registries file reads with auth type google
			// (TestGrantsDerivedFromTheRegistriesFile says which).
			case b.Role == "roles/artifactregistry.reader" && r.Name == "Reconcile" && strings.HasPrefix(b.Scope, "arrepository:"):
			case b.Role == "roles/storage.objectViewer" && r.Name == "Reconcile" && strings.HasPrefix(b.Scope, "bucket:"):
			default:
				t.Errorf("%s: %s may not hold %s on %s", b.Addr, r.Name, b.Role, b.Scope)
			}
		}
		// The hooks function touches no data: no Firestore.
		if hasFirestore == (r.Name == "Hooks") {
			t.Errorf("%s: roles/datastore.user %v; every function but hooks reads Firestore, hooks never", r.Name, hasFirestore)
		}
		// Every function traces (pkg/telemetry): without the writer role
		// the Telemetry API refuses its spans, and a bootstrap's trace has
		// holes.
		if !hasTrace {
			t.Errorf("%s has no roles/telemetry.tracesWriter: its spans cannot reach the Telemetry API", r.Name)
		}
		if !reflect.DeepEqual(accessible, mounted) && !(len(accessible) == 0 && len(mounted) == 0) {
			t.Errorf("%s can read secrets %v but mounts %v: each secret is readable by the functions that use it and only those", r.Name, keysOf(accessible), keysOf(mounted))
		}
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
		if rc.ServesHooks != (r.Name == "Hooks") {
			t.Errorf("%s serves webhooks: %v; the hooks function alone does", r.Name, rc.ServesHooks)
		}
	}
	// The catalog: instance records only (by its code; IAM cannot scope
	// Firestore to collections, see iam.tf), no Pub/Sub and no secret at
	// all: it checks credentials against their digests (views aside: each
	// view's password is a file only the catalog reads).
	if len(held[accounts["Catalog"]]) == 0 {
		t.Fatal("the catalog's account holds nothing: the checks below would be vacuous")
	}
	for _, b := range held[accounts["Catalog"]] {
		if strings.HasPrefix(b.Role, "roles/pubsub.") {
			t.Errorf("%s: the catalog may not use Pub/Sub (%s)", b.Addr, b.Role)
		}
		if strings.HasPrefix(b.Role, "roles/secretmanager.") && !strings.Contains(b.Scope, "-broker-view-") {
			t.Errorf("%s: the catalog may not read secrets, not even its own credentials (it holds their digests), but holds %s on %s", b.Addr, b.Role, b.Scope)
		}
	}
	for ep := range fns {
		for s := range secretsOf(ep) {
			if registrySecrets[s] && ep != "Reconcile" {
				t.Errorf("%s mounts the registry secret %s", ep, s)
			}
			if hookSecrets[s] && ep != "Hooks" {
				t.Errorf("%s mounts the hook secret %s", ep, s)
			}
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
	serviceOf := func(ep string) string { return "run:" + fns[ep].str("name") }
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
	repo := m.instance("google_artifact_registry_repository.functions", "")
	sourceBucket := "bucket:" + m.instance("google_storage_bucket.source", "").str("name")
	for _, b := range held[build] {
		switch {
		case b.Role == "roles/logging.logWriter" && b.Scope == "project:"+testProject:
		case b.Role == "roles/artifactregistry.writer" && b.Scope == "arrepository:"+testProject+"/"+repo.str("location")+"/"+repo.str("repository_id"):
		case b.Role == "roles/storage.objectViewer" && b.Scope == sourceBucket:
		default:
			t.Errorf("%s: the build account may not hold %s on %s (build logs, its image repository, its source bucket)", b.Addr, b.Role, b.Scope)
		}
	}
	// allUsers: the functions that authenticate callers themselves, never
	// the reconcile, and the bootstrap only when bootstrap_public.
	for _, b := range bs {
		if b.Member == "allUsers" || b.Member == "allAuthenticatedUsers" {
			public := b.Scope == serviceOf("Catalog") || fns["Hooks"] != nil && b.Scope == serviceOf("Hooks")
			if b.Role != "roles/run.invoker" || !public {
				t.Errorf("%s: %s may only invoke the catalog and the hooks function (the bootstrap is IAM-only here)", b.Addr, b.Member)
			}
		}
	}
	// Pub/Sub's service agent (its address has the project number, known
	// at apply time) signs the push's OIDC tokens and dead-letters.
	const agent = "(known after apply)"
	dlt := pushSub.one("dead_letter_policy").str("dead_letter_topic")
	wantAgent := []binding{
		{Scope: "topic:" + strings.TrimPrefix(dlt, "projects/"+testProject+"/topics/"), Role: "roles/pubsub.publisher"},
		{Scope: "subscription:" + pushSub.str("name"), Role: "roles/pubsub.subscriber"},
		{Scope: "subscription:" + commitSub.str("name"), Role: "roles/pubsub.subscriber"},
		{Scope: "serviceaccount:" + m.instance("google_service_account.reconcile_push", "").str("name"), Role: "roles/iam.serviceAccountTokenCreator"},
	}
	if commitDLT := commitSub.one("dead_letter_policy").str("dead_letter_topic"); commitDLT != dlt {
		t.Errorf("the commit subscription dead-letters to %s, the reconcile one to %s: one dead-letter topic (and its grant)", commitDLT, dlt)
	}
	// Artifact Registry's events dead-letter like the other triggers.
	for _, gcr := range gcrSubscriptions(m) {
		wantAgent = append(wantAgent, binding{Scope: "subscription:" + gcr.str("name"), Role: "roles/pubsub.subscriber"})
		if dl := gcr.one("dead_letter_policy"); dl == nil || dl.str("dead_letter_topic") != dlt {
			t.Errorf("%s does not dead-letter to %s, the topic the agent may publish to", gcr.addr(), dlt)
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
		if _, known := ours[member]; !known && member != agent && member != "allUsers" && !strings.HasPrefix(member, "group:") {
			t.Errorf("grants to %s, which is not one of the module's identities", member)
		}
	}
}

// Where the organisation refuses allUsers (domain-restricted sharing),
// public_access = "invoker_iam_disabled" makes the endpoints that
// authenticate their callers themselves public with no allUsers binding at
// all: Cloud Run's invoker check is off on those services and on no other.
func TestPublicWithoutAllUsers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sc       scenario
		disabled []string // services with the invoker check off
		allUsers []string // services with an allUsers invoker
	}{
		{domain, []string{"bootstrap", "catalog", "hooks"}, nil}, // bootstrap_public = true there
		{outside, nil, []string{"catalog", "hooks"}},
		{shipped, nil, []string{"catalog"}},
	} {
		m := planOf(t, c.sc)
		var disabled, allUsers []string
		for _, svc := range m.ofType("google_cloud_run_v2_service") {
			if isTrue(svc.Attrs["invoker_iam_disabled"]) {
				disabled = append(disabled, svc.Key)
			}
		}
		for _, b := range bindingsOf(t, m) {
			if b.Member == "allUsers" || b.Member == "allAuthenticatedUsers" {
				allUsers = append(allUsers, strings.TrimPrefix(strings.TrimPrefix(b.Scope, "run:"), "specsync-"))
			}
		}
		sort.Strings(disabled)
		sort.Strings(allUsers)
		if strings.Join(disabled, ",") != strings.Join(c.disabled, ",") || strings.Join(allUsers, ",") != strings.Join(c.allUsers, ",") {
			t.Errorf("%s: invoker check off on %v and allUsers on %v; want %v and %v", c.sc.name, disabled, allUsers, c.disabled, c.allUsers)
		}
	}
}
