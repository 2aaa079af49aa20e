package terraform_test

// The functions: every function the code registers is deployed from the
// uploaded source, reads exactly the settings terraform sets, and the
// module reads the registries file as the Go code does.

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/specsync/specsync/pkg/settings"
)

func TestEveryRegisteredFunctionIsDeployed(t *testing.T) {
	m := evaluated(t, nil)
	p := parseFunctions(t)
	fns := functionsByEntryPoint(t, m)
	var want, got []string
	for _, r := range p.regs {
		want = append(want, r.Name)
	}
	for ep := range fns {
		got = append(got, ep)
	}
	sort.Strings(want)
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("function resources have entry points %v; the code registers %v", got, want)
	}

	goMod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mv := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(string(goMod))
	if mv == nil {
		t.Fatal("no go directive in go.mod")
	}
	runtime := "go" + mv[1] + mv[2]

	bucket := m.instance("google_storage_bucket.source", "")
	object := m.instance("google_storage_bucket_object.source", "")
	archive := m.instance("data.archive_file.source", "")
	if bucket == nil || object == nil || archive == nil {
		t.Fatal("want google_storage_bucket.source, google_storage_bucket_object.source and data.archive_file.source")
	}
	for _, r := range p.regs {
		fn := fns[r.Name]
		if fn == nil {
			continue // reported above
		}
		bc := fn.one("build_config")
		if got := bc.str("runtime"); got != runtime {
			t.Errorf("%s: runtime %q, want %q (go.mod)", fn.addr(), got, runtime)
		}
		ss := bc.one("source").one("storage_source")
		if ss == nil || ss.str("bucket") != bucket.str("name") || ss.str("object") != object.str("name") {
			t.Errorf("%s: not built from the uploaded source archive", fn.addr())
		}
		if bc.str("service_account") == "" {
			t.Errorf("%s: no build service account (the default one may lack permissions or have too many)", fn.addr())
		}
		sc := fn.one("service_config")
		for _, a := range []string{"timeout_seconds", "available_memory", "max_instance_count", "max_instance_request_concurrency", "service_account_email", "ingress_settings"} {
			if v, ok := sc.Attrs[a]; !ok || v.IsNull() {
				t.Errorf("%s: service_config.%s is not set", fn.addr(), a)
			}
		}
	}
	if object.str("source") != archive.str("output_path") {
		t.Error("the uploaded object is not the source archive")
	}
	if !strings.Contains(object.str("name"), archive.str("output_md5")) {
		t.Error("the source object is not named by the archive's content (a changed source would not redeploy)")
	}

	// The archive is the repository root, as the buildpack expects it: the
	// root package that registers the functions, go.mod, the registries
	// file, and not terraform/ (state, provider cache).
	root, _ := filepath.Abs("..")
	if got := archive.str("source_dir"); got != filepath.ToSlash(root) {
		t.Errorf("archive source_dir %q, want the repository root %q", got, root)
	}
	var excludes []string
	for it := archive.Attrs["excludes"].ElementIterator(); it.Next(); {
		_, v := it.Element()
		excludes = append(excludes, v.AsString())
	}
	for _, must := range []string{"terraform", ".git"} {
		if !contains(excludes, must) {
			t.Errorf("the source archive must exclude %s", must)
		}
	}
	keep := []string{"go.mod", "go.sum", "specsync.go", "functions/functions.go", referenceRegistries}
	for _, f := range keep {
		if _, err := os.Stat(filepath.Join("..", f)); err != nil {
			t.Errorf("%s is missing from the repository: %v", f, err)
		}
		for _, ex := range excludes {
			if ok, _ := filepath.Match(ex, f); ok || f == ex || strings.HasPrefix(f, ex+"/") {
				t.Errorf("the source archive excludes %s (pattern %q), which the build needs", f, ex)
			}
		}
	}
	rootPkg, err := os.ReadFile("../specsync.go")
	if err != nil || !strings.Contains(string(rootPkg), `"github.com/specsync/specsync/functions"`) {
		t.Error("the root package must import functions/ so the buildpack's main registers them")
	}

	// The CloudEvent function is reached only through its push
	// subscription; the HTTP ones are reached at their URL.
	for _, r := range p.regs {
		fn := fns[r.Name]
		if fn == nil {
			continue
		}
		ingress := fn.one("service_config").str("ingress_settings")
		targeted := false
		for _, sub := range m.ofType("google_pubsub_subscription") {
			if pc := sub.one("push_config"); pc != nil && strings.HasPrefix(pc.str("push_endpoint"), fn.one("service_config").str("uri")+"/") {
				targeted = true
			}
		}
		switch r.Kind {
		case "CloudEvent":
			if !targeted {
				t.Errorf("%s is a CloudEvent function but no push subscription delivers to it", r.Name)
			}
			if ingress != "ALLOW_INTERNAL_ONLY" {
				t.Errorf("%s: ingress %s, want ALLOW_INTERNAL_ONLY (only Pub/Sub calls it)", r.Name, ingress)
			}
		case "HTTP":
			if targeted {
				t.Errorf("%s is an HTTP function but a push subscription delivers to it", r.Name)
			}
		}
	}
}

func setStrings(v cty.Value) []string {
	var out []string
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() {
		return nil
	}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, e.AsString())
	}
	sort.Strings(out)
	return out
}

// The module's reading of the registries file is the Go code's.
func TestRegistriesFileDerivation(t *testing.T) {
	m := evaluated(t, nil)
	g := loadGoRegistries(t)
	for name, want := range map[string][]string{
		"registry_env_refs":     g.EnvRefs,
		"registry_secret_envs":  g.SecretEnvs,
		"registry_secret_files": g.SecretFiles,
		"hook_secret_envs":      g.HookSecretEnvs,
		"hook_secret_files":     g.HookSecretFiles,
	} {
		if got := setStrings(m.localVals[name]); !reflect.DeepEqual(got, want) {
			t.Errorf("local.%s = %v; the Go config of %s says %v", name, got, referenceRegistries, want)
		}
	}

	// A ${VAR} without a value fails the plan, naming it.
	bad, err := loadModule(".", inputs(map[string]cty.Value{"registry_env": cty.MapValEmpty(cty.String)}))
	if err != nil {
		t.Fatal(err)
	}
	if joined := strings.Join(bad.errs, "\n"); !strings.Contains(joined, "REFERENCE_REGISTRY_HOST") {
		t.Errorf("a missing registry_env value does not fail the plan by name; errors: %s", joined)
	}
}

func TestEnvironmentMatchesSettings(t *testing.T) {
	m := evaluated(t, nil)
	p := parseFunctions(t)
	g := loadGoRegistries(t)
	fns := functionsByEntryPoint(t, m)
	workTopic := workTopicOf(t, m)
	retention := map[string]string{}

	for _, r := range p.regs {
		fn := fns[r.Name]
		if fn == nil {
			t.Errorf("no function resource has the entry point %s", r.Name)
			continue
		}
		rc := p.reach(r.Handler)
		if len(rc.Loaders) != 1 {
			t.Fatalf("%s: its cold start calls settings loaders %v, want exactly one", r.Name, rc.Loaders)
		}
		load, ok := loaders[rc.Loaders[0]]
		if !ok {
			t.Fatalf("%s: settings.%s is not known to this test; add it to loaders", r.Name, rc.Loaders[0])
		}
		want := keysRead(load)
		if want["SPECSYNC_REGISTRIES"] != rc.LoadsRegistries {
			t.Errorf("%s: reads SPECSYNC_REGISTRIES: %v, loads the registries file: %v; a function reads the setting exactly when it loads the file", r.Name, want["SPECSYNC_REGISTRIES"], rc.LoadsRegistries)
		}
		if rc.LoadsRegistries {
			for _, k := range g.EnvRefs {
				want[k] = true
			}
		}
		sc := fn.one("service_config")
		env := stringMap(sc.Attrs["environment_variables"])
		secretEnv := map[string]bool{}
		for _, s := range sc.Blocks["secret_environment_variables"] {
			k := s.str("key")
			if secretEnv[k] || env[k] != "" {
				t.Errorf("%s: %s is set twice", r.Name, k)
			}
			secretEnv[k] = true
		}

		// Credentials the function checks callers against: of the sources
		// it reads, terraform sets exactly one, each the way it must be
		// served (the secret itself from Secret Manager only, its digest
		// from the digest variable, its file from a mounted volume).
		secretWant := map[string]bool{}
		handled := map[string]bool{}
		files := map[string]string{} // mounted path -> the secret it holds
		for _, cred := range credentialSources(t, rc.Loaders[0], load) {
			var set []string
			for _, src := range cred.sources {
				delete(want, src)
				handled[src] = true
				if _, ok := env[src]; ok || secretEnv[src] {
					set = append(set, src)
				}
			}
			if len(set) != 1 {
				t.Errorf("%s: of %v terraform sets %v; want exactly one", r.Name, cred.sources, set)
				continue
			}
			src := set[0]
			switch strings.TrimPrefix(src, cred.key) {
			case "":
				secretWant[src] = true
				if !secretEnv[src] {
					t.Errorf("%s: %s is a plain environment variable; it is a secret (value would be in the state)", r.Name, src)
				}
			case settings.SuffixSHA256:
				if secretEnv[src] {
					t.Errorf("%s: %s comes from Secret Manager; a digest comes from its variable", r.Name, src)
				}
				if got, wantDigest := env[src], sha256Hex(testCredentials[cred.key]); got != wantDigest {
					t.Errorf("%s: %s = %q, want the digest variable's value %q", r.Name, src, got, wantDigest)
				}
			case settings.SuffixFile:
				if secretEnv[src] {
					t.Errorf("%s: %s comes from Secret Manager; it is the path of a mounted secret", r.Name, src)
				}
				files[env[src]] = cred.key
			}
		}
		for k := range want {
			if secretSettings[k] {
				secretWant[k] = true
			} else if regexp.MustCompile(`TOKEN|PASSWORD|SECRET`).MatchString(k) {
				t.Errorf("%s reads %s, which looks like a secret: add it to secretSettings and serve it from Secret Manager", r.Name, k)
			}
		}
		if rc.FetchesRegistries {
			for _, e := range g.SecretEnvs {
				want[e], secretWant[e] = true, true
			}
			for _, f := range g.SecretFiles {
				files[f] = f
			}
		}
		if rc.ServesHooks {
			for _, e := range g.HookSecretEnvs {
				want[e], secretWant[e] = true, true
			}
			for _, f := range g.HookSecretFiles {
				files[f] = f
			}
		}

		got := map[string]bool{}
		for k := range env {
			if handled[k] {
				continue
			}
			got[k] = true
			if secretWant[k] {
				t.Errorf("%s: %s is a plain environment variable; it is a secret (value would be in the state)", r.Name, k)
			}
		}
		for k := range secretEnv {
			if handled[k] {
				continue
			}
			got[k] = true
			if !secretWant[k] {
				t.Errorf("%s: %s comes from Secret Manager but the function does not read it as a secret", r.Name, k)
			}
		}
		for k := range want {
			if !got[k] {
				t.Errorf("%s reads %s, which terraform does not set", r.Name, k)
			}
		}
		for k := range got {
			if !want[k] {
				t.Errorf("%s: terraform sets %s, which the function does not read", r.Name, k)
			}
		}
		mounted := map[string]string{}
		for _, v := range sc.Blocks["secret_volumes"] {
			for _, ver := range v.Blocks["versions"] {
				mounted[v.str("mount_path")+"/"+ver.str("path")] = v.str("secret")
				if ver.str("version") != "latest" {
					t.Errorf("%s: the volume %s pins version %s; mount latest, so rotation needs no redeploy", r.Name, v.str("mount_path"), ver.str("version"))
				}
			}
		}
		wantMounted := map[string]string{}
		for path, key := range files {
			wantMounted[path] = secretIDOf(t, m, key)
		}
		if !reflect.DeepEqual(mounted, wantMounted) && !(len(mounted) == 0 && len(wantMounted) == 0) {
			t.Errorf("%s: secret files mounted %v, want %v", r.Name, mounted, wantMounted)
		}

		// The values are what the code accepts, and mean what they should.
		values := map[string]string{}
		for k, v := range env {
			values[k] = v
		}
		for k := range secretWant {
			values[k] = "a-placeholder-secret-value-0123456789"
		}
		if err := load(func(k string) (string, bool) { v, ok := values[k]; return v, ok }); err != nil {
			t.Errorf("%s: the settings terraform sets do not load: %v", r.Name, err)
		}
		if v, ok := env["GOOGLE_CLOUD_PROJECT"]; ok && v != testProject {
			t.Errorf("%s: GOOGLE_CLOUD_PROJECT = %q, want the project", r.Name, v)
		}
		if v, ok := env["FIRESTORE_DATABASE"]; ok && v != m.instance("google_firestore_database.main", "").str("name") {
			t.Errorf("%s: FIRESTORE_DATABASE = %q, not the database terraform creates", r.Name, v)
		}
		if v, ok := env["SPECSYNC_REGISTRIES"]; ok && v != "/workspace/serverless_function_source_code/"+referenceRegistries {
			t.Errorf("%s: SPECSYNC_REGISTRIES = %q, want the registries file inside the uploaded source", r.Name, v)
		}
		if v, ok := env["SPECSYNC_TOPIC"]; ok && v != workTopic.str("name") {
			t.Errorf("%s: SPECSYNC_TOPIC = %q, not the topic the reconcile subscription reads", r.Name, v)
		}
		if v, ok := env["SPECSYNC_CHANGES_TOPIC"]; ok && v != changesTopicOf(t, m).str("name") {
			t.Errorf("%s: SPECSYNC_CHANGES_TOPIC = %q, not the catalog-changes topic", r.Name, v)
		}
		if v, ok := env["SPECSYNC_COMMIT_TOPIC"]; ok && v != commitTopicOf(t, m).str("name") {
			t.Errorf("%s: SPECSYNC_COMMIT_TOPIC = %q, not the topic of the ordered commit subscription", r.Name, v)
		}
		if v, ok := env["SPECSYNC_OPERATION_RETENTION"]; ok {
			retention[r.Name] = v
		}
		for _, k := range g.EnvRefs {
			if v, ok := env[k]; ok && v != referenceEnv[k] {
				t.Errorf("%s: %s = %q, want registry_env's %q", r.Name, k, v, referenceEnv[k])
			}
		}
	}
	var rs []string
	for _, v := range retention {
		rs = append(rs, v)
	}
	if len(rs) < 2 || len(slicesDistinct(rs)) != 1 {
		t.Errorf("SPECSYNC_OPERATION_RETENTION must be set, and equal, wherever it is read: %v", retention)
	}
}

func slicesDistinct(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}
