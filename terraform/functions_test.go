//go:build deploycheck

package terraform_test

// The functions: every function the code registers is deployed, built
// from exactly the module's source, reads exactly the settings terraform
// sets, and sees the registries file as the Go code does.

import (
	"archive/zip"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/settings"
)

func TestFunctionsAreBuiltFromTheModuleSource(t *testing.T) {
	t.Parallel()
	m := planOf(t, reference(t))
	p := parseFunctions(t)
	fns := functionsByEntryPoint(t, m)

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
	repo := m.instance("google_artifact_registry_repository.functions", "")
	if bucket == nil || object == nil || repo == nil {
		t.Fatal("want google_storage_bucket.source, google_storage_bucket_object.source and google_artifact_registry_repository.functions")
	}
	for _, r := range p.regs {
		fn := fns[r.Name]
		bc := fn.one("build_config")
		if got := bc.str("base_image"); !strings.HasSuffix(got, "/runtimes/"+runtime) {
			t.Errorf("%s: base image %q, want the %s runtime (go.mod)", fn.addr(), got, runtime)
		}
		if got, want := bc.str("source_location"), "gs://"+bucket.str("name")+"/"+object.str("name"); got != want {
			t.Errorf("%s: built from %q, not the uploaded source archive %q", fn.addr(), got, want)
		}
		if bc.str("service_account") == "" {
			t.Errorf("%s: no build service account (the default one may lack permissions or have too many)", fn.addr())
		}
		c := container(t, fn)
		if img := c.str("image"); img != bc.str("image_uri") || !strings.Contains(img, "/"+repo.str("repository_id")+"/") || !strings.Contains(img, ":"+strings.TrimSuffix(strings.TrimPrefix(object.str("name"), "specsync-source-"), ".zip")) {
			t.Errorf("%s: runs image %q, built to %q: want the image built from this source (tagged with its digest) in the functions' repository", fn.addr(), img, bc.str("image_uri"))
		}
		tpl := fn.one("template")
		for _, a := range []string{"timeout", "service_account", "max_instance_request_concurrency"} {
			if tpl.str(a) == "" {
				t.Errorf("%s: template.%s is not set", fn.addr(), a)
			}
		}
		if lim := c.one("resources"); lim == nil || stringMap(lim.Attrs["limits"])["memory"] == "" || stringMap(lim.Attrs["limits"])["cpu"] == "" {
			t.Errorf("%s: no cpu and memory limits", fn.addr())
		}
	}
	if !strings.HasPrefix(object.str("name"), "specsync-source-") {
		t.Error("the source object is not named by the archive's content (a changed source would not redeploy)")
	}

	// The archive holds exactly the files source_files.txt lists: no
	// binary, test artifact or untracked file of the checkout.
	want := sourceFiles(t)
	z, err := zip.OpenReader(filepath.Join(m.dir, ".terraform", "specsync", "source.zip"))
	if err != nil {
		t.Fatalf("the source archive: %v", err)
	}
	defer z.Close()
	var got []string
	for _, f := range z.File {
		got = append(got, f.Name)
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the source archive holds %d files, source_files.txt lists %d: %v", len(got), len(want), diffStrings(got, want))
	}

	// The CloudEvent function is reached only through its push
	// subscriptions; the HTTP ones at their URL.
	for _, r := range p.regs {
		fn := fns[r.Name]
		targeted := false
		for _, sub := range m.ofType("google_pubsub_subscription") {
			if pc := sub.one("push_config"); pc != nil && pc.one("oidc_token") != nil && pc.one("oidc_token").str("audience") == firstAudience(fn) {
				targeted = true
			}
		}
		switch r.Kind {
		case "CloudEvent":
			if !targeted {
				t.Errorf("%s is a CloudEvent function but no push subscription delivers to it", r.Name)
			}
			if got := fn.str("ingress"); got != "INGRESS_TRAFFIC_INTERNAL_ONLY" {
				t.Errorf("%s: ingress %s, want INGRESS_TRAFFIC_INTERNAL_ONLY (only Pub/Sub calls it)", r.Name, got)
			}
		case "HTTP":
			if targeted {
				t.Errorf("%s is an HTTP function but a push subscription delivers to it", r.Name)
			}
		}
	}
}

func firstAudience(fn *instance) string {
	var auds []string
	if v := fn.Attrs["custom_audiences"]; v.IsKnown() && !v.IsNull() {
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			auds = append(auds, e.AsString())
		}
	}
	if len(auds) != 1 {
		return ""
	}
	return auds[0]
}

// TestEnvironmentMatchesSettings: each function's environment is exactly
// what its settings loader reads (plus the registries file's ${VAR}s and
// credentials where it loads the file), each value in the form the code
// accepts; secrets come from Secret Manager, digests from their variables.
func TestEnvironmentMatchesSettings(t *testing.T) {
	t.Parallel()
	for _, sc := range []struct {
		scenario
		file string            // the registries file, for the Go code's reading
		env  map[string]string // its ${VAR}s
	}{
		{reference(t), filepath.Join("..", referenceRegistries), referenceEnv},
		{outside, "", nil},
		{domain, "", nil},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			m := planOf(t, sc.scenario)
			path := sc.file
			if path == "" {
				path = writeTemp(t, sc.scenario)
			}
			g := goRegistriesOf(t, path, sc.env)
			checkEnvironment(t, m, g, sc.env)
		})
	}
}

// writeTemp writes a scenario's registries file (and its spec
// directories) where the Go code can load it.
func writeTemp(t *testing.T, sc scenario) string {
	t.Helper()
	dir := t.TempDir()
	files := sc.files
	if len(sc.outside) > 0 {
		files = sc.outside
	}
	for name, body := range files {
		if err := writeFile(filepath.Join(dir, name), body); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "registries.yaml")
}

func checkEnvironment(t *testing.T, m *module, g goRegistries, refEnv map[string]string) {
	p := parseFunctions(t)
	fns := functionsByEntryPoint(t, m)
	workTopic := workTopicOf(t, m)
	retention := map[string]string{}
	secretIDs := map[string]string{} // secret id -> key
	for _, s := range m.ofType("google_secret_manager_secret") {
		secretIDs[s.str("secret_id")] = s.Key
	}

	for _, r := range p.regs {
		fn := fns[r.Name]
		if fn == nil {
			continue // not deployed here (checked by functionsByEntryPoint)
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
		env, secretEnv := envOf(t, fn)

		// Credentials the function checks callers against: of the sources
		// it reads, terraform sets exactly one, each the way it must be
		// served (the secret itself from Secret Manager only, its digest
		// from the digest variable, its file from a mounted volume).
		secretWant := map[string]bool{}
		handled := map[string]bool{}
		files := map[string]string{} // mounted path -> the key of the secret it holds
		for _, cred := range credentialSources(t, rc.Loaders[0], load) {
			var set []string
			for _, src := range cred.sources {
				delete(want, src)
				handled[src] = true
				_, plain := env[src]
				_, secret := secretEnv[src]
				if plain || secret {
					set = append(set, src)
				}
			}
			if len(set) != 1 {
				t.Errorf("%s: of %v terraform sets %v; want exactly one", r.Name, cred.sources, set)
				continue
			}
			src := set[0]
			_, fromSecret := secretEnv[src]
			switch strings.TrimPrefix(src, cred.key) {
			case "":
				if !fromSecret {
					t.Errorf("%s: %s is a plain environment variable; it is a secret (its value would be in the state)", r.Name, src)
				}
			case settings.SuffixSHA256:
				if fromSecret {
					t.Errorf("%s: %s comes from Secret Manager; a digest comes from its variable", r.Name, src)
				}
				if got, wantDigest := env[src], sha256Hex(testCredentials[cred.key]); got != wantDigest {
					t.Errorf("%s: %s = %q, want the digest variable's value %q", r.Name, src, got, wantDigest)
				}
			case settings.SuffixFile:
				if fromSecret {
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
				t.Errorf("%s: %s is a plain environment variable; it is a secret (its value would be in the state)", r.Name, k)
			}
		}
		for k, id := range secretEnv {
			if handled[k] {
				continue
			}
			got[k] = true
			if !secretWant[k] {
				t.Errorf("%s: %s comes from Secret Manager but the function does not read it as a secret", r.Name, k)
			}
			if secretIDs[id] != k {
				t.Errorf("%s: %s is filled from the secret %s, which holds %s", r.Name, k, id, secretIDs[id])
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
		for path, id := range mountsOf(t, fn) {
			mounted[path] = secretIDs[id]
		}
		if !reflect.DeepEqual(mounted, files) && !(len(mounted) == 0 && len(files) == 0) {
			t.Errorf("%s: secret files mounted %v, want %v", r.Name, mounted, files)
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
		if v, ok := env["FIRESTORE_DATABASE"]; ok && v != m.instance("google_firestore_database.main", "0").str("name") {
			t.Errorf("%s: FIRESTORE_DATABASE = %q, not the database terraform creates", r.Name, v)
		}
		if v, ok := env["SPECSYNC_REGISTRIES"]; ok {
			bundle := m.instance("google_storage_bucket_object.config", "")
			if v != "gs://"+bundle.str("bucket")+"/"+bundle.str("name") {
				t.Errorf("%s: SPECSYNC_REGISTRIES = %q, want the config bundle terraform uploads", r.Name, v)
			}
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
		if v, ok := env["SPECSYNC_SCHEDULER_AUDIENCE"]; ok && v != firstAudience(fn) {
			t.Errorf("%s: SPECSYNC_SCHEDULER_AUDIENCE = %q, not the audience its service accepts (%q)", r.Name, v, firstAudience(fn))
		}
		if v, ok := env["SPECSYNC_OPERATION_RETENTION"]; ok {
			retention[r.Name] = v
		}
		for _, k := range g.EnvRefs {
			if v, ok := env[k]; ok && v != refEnv[k] {
				t.Errorf("%s: %s = %q, want registry_env's %q", r.Name, k, v, refEnv[k])
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

// The config bundle terraform uploads is one the functions load: the
// registries file as written, with the spec files of its dir sources, so
// a bundled spec reaches the catalog with no file beside the function.
func TestConfigBundleLoadsInTheFunctions(t *testing.T) {
	t.Parallel()
	m := planOf(t, outside)
	obj := m.instance("google_storage_bucket_object.config", "")
	if obj == nil || obj.str("content") == "" {
		t.Fatal("no config bundle with a known content in the plan")
	}
	cfg, err := config.ParseBundle([]byte(obj.str("content")), "plan")
	if err != nil {
		t.Fatalf("the bundle terraform uploads does not load: %v", err)
	}
	b, ok := cfg.Lookup("bundled")
	if !ok {
		t.Fatal("the bundle has no registry bundled")
	}
	l, err := b.Source.Fetch(context.Background(), registry.FetchOptions{})
	if err != nil {
		t.Fatalf("the dir source of the bundle: %v", err)
	}
	if len(l.Entries) != 1 || l.Entries[0].Spec == nil || l.Entries[0].Spec.Name != "bundled-redis" {
		t.Errorf("the bundled dir source offers %+v, want the spec file shipped beside the registries file", l.Entries)
	}
}
