package terraform_test

// Checks of terraform/ against the code, without terraform: formatting,
// the functions the code registers, the settings each function reads, the
// store's queries and expiring fields, least privilege, the scheduler, the
// reconcile trigger, secrets, variables, outputs and the docs. Each one
// fails when the terraform and the code drift apart.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/settings"
	"github.com/specsync/specsync/pkg/store"
)

const (
	testProject = "specsync-test"
	// The reference registries file shows every field, credentials of
	// every kind and a ${VAR} reference: the richest input for the module.
	referenceRegistries = "examples/registries.reference.yaml"
)

var referenceEnv = map[string]string{"REFERENCE_REGISTRY_HOST": "registry.example.com"}

func inputs(extra map[string]cty.Value) map[string]cty.Value {
	in := map[string]cty.Value{
		"project_id":             cty.StringVal(testProject),
		"registries_file":        cty.StringVal(referenceRegistries),
		"registry_env":           ctyFromGo(referenceEnv),
		"broker_password_sha256": cty.StringVal(sha256Hex(testCredentials["SPECSYNC_BROKER_PASSWORD"])),
		// Upper case, as some tools print it: the module normalises it.
		"admin_token_sha256": cty.StringVal(strings.ToUpper(sha256Hex(testCredentials["SPECSYNC_ADMIN_TOKEN"]))),
	}
	for k, v := range extra {
		in[k] = v
	}
	return in
}

// evaluated loads the module with the test's inputs; any evaluation error
// fails the test.
func evaluated(t *testing.T, extra map[string]cty.Value) *module {
	t.Helper()
	m, err := loadModule(".", inputs(extra))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, e := range m.errs {
		t.Error(e)
	}
	if t.Failed() {
		t.FailNow()
	}
	return m
}

func TestFormatting(t *testing.T) {
	names, _ := filepath.Glob("*.tf")
	more, _ := filepath.Glob("*.tfvars")
	names = append(names, more...)
	if len(names) == 0 {
		t.Fatal("no .tf files")
	}
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := hclwrite.Format(src); !bytes.Equal(got, src) {
			t.Errorf("%s is not formatted as `terraform fmt` would (hclwrite.Format); formatted:\n%s", name, got)
		}
	}
}

// One file per concern, and each resource in the file of its concern.
func TestOneFilePerConcern(t *testing.T) {
	m := evaluated(t, nil)
	want := []string{"apis.tf", "firestore.tf", "functions.tf", "iam.tf", "outputs.tf", "pubsub.tf", "scheduler.tf", "secrets.tf", "variables.tf", "versions.tf"}
	var got []string
	for name := range m.files {
		got = append(got, name)
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	for _, k := range m.order {
		r := m.resources[k]
		if file := homeOf(r.Type); file == "" {
			t.Errorf("%s (%s): no home file for its type; add it to homeOf", k, r.File)
		} else if r.File != file {
			t.Errorf("%s is in %s, want %s", k, r.File, file)
		}
	}
	if len(m.bodies["variables.tf"].Blocks) == 0 || len(m.bodies["outputs.tf"].Blocks) == 0 {
		t.Error("variables.tf and outputs.tf must hold the variables and outputs")
	}
	for name, b := range m.bodies {
		for _, blk := range b.Blocks {
			if blk.Type == "variable" && name != "variables.tf" || blk.Type == "output" && name != "outputs.tf" {
				t.Errorf("%s %s is in %s", blk.Type, blk.Labels[0], name)
			}
		}
	}
}

// homeOf is the file of a resource type's concern.
func homeOf(typ string) string {
	rules := []struct{ match, file string }{
		{"google_secret_manager_secret_iam_member", "secrets.tf"}, // per-secret access, next to the secrets
		{"_iam_", "iam.tf"},
		{"google_service_account", "iam.tf"},
		{"google_project_service", "apis.tf"},
		{"google_project", "iam.tf"},
		{"google_firestore_", "firestore.tf"},
		{"google_pubsub_", "pubsub.tf"},
		{"google_cloudfunctions2_", "functions.tf"},
		{"google_storage_", "functions.tf"},
		{"archive_file", "functions.tf"},
		{"google_cloud_scheduler_", "scheduler.tf"},
		{"google_secret_manager_", "secrets.tf"},
		{"terraform_data", "secrets.tf"},
	}
	for _, r := range rules {
		if strings.Contains(typ, r.match) {
			return r.file
		}
	}
	return ""
}

// registration is a function the code registers with functions-framework-go.
type registration struct {
	Name, Kind, Handler string // Kind: HTTP or CloudEvent
}

// functionsPackage is the parsed functions/ package (entry points and wiring).
type functionsPackage struct {
	fset  *token.FileSet
	regs  []registration
	funcs map[string]*ast.FuncDecl
}

func parseFunctions(t *testing.T) *functionsPackage {
	t.Helper()
	p := &functionsPackage{fset: token.NewFileSet(), funcs: map[string]*ast.FuncDecl{}}
	names, _ := filepath.Glob("../functions/*.go")
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil {
				continue
			}
			if fd.Name.Name == "init" {
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok || len(call.Args) != 2 {
						return true
					}
					if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "functions" {
						return true
					}
					if sel.Sel.Name != "HTTP" && sel.Sel.Name != "CloudEvent" {
						t.Errorf("functions.%s registration: unknown kind, update this test", sel.Sel.Name)
						return true
					}
					lit, ok := call.Args[0].(*ast.BasicLit)
					handler, ok2 := call.Args[1].(*ast.Ident)
					if !ok || !ok2 {
						t.Errorf("%s: register functions with a literal name and a named handler", p.fset.Position(call.Pos()))
						return true
					}
					name, _ := strconv.Unquote(lit.Value)
					p.regs = append(p.regs, registration{Name: name, Kind: sel.Sel.Name, Handler: handler.Name})
					return true
				})
				continue
			}
			p.funcs[fd.Name.Name] = fd
		}
	}
	if len(p.regs) == 0 {
		t.Fatal("no function registration found in functions/functions.go")
	}
	return p
}

// reach walks the package-local calls from a handler and reports what the
// function does at cold start: the settings loaders it calls, whether it
// loads the registries file (reconcile.LoadRegistries, or config.Load
// itself) and whether it runs reconciles
// (which fetch registries with their credentials).
type reach struct {
	Loaders           []string
	LoadsRegistries   bool
	FetchesRegistries bool
}

func (p *functionsPackage) reach(handler string) reach {
	var r reach
	seen := map[string]bool{}
	var walk func(name string)
	walk = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		fd, ok := p.funcs[name]
		if !ok {
			return
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				switch fun := n.Fun.(type) {
				case *ast.Ident:
					walk(fun.Name)
				case *ast.SelectorExpr:
					if x, ok := fun.X.(*ast.Ident); ok && x.Name == "settings" && strings.HasPrefix(fun.Sel.Name, "Load") {
						r.Loaders = append(r.Loaders, fun.Sel.Name)
					}
					if x, ok := fun.X.(*ast.Ident); ok && (x.Name == "config" && strings.HasPrefix(fun.Sel.Name, "Load") ||
						x.Name == "reconcile" && fun.Sel.Name == "LoadRegistries") {
						r.LoadsRegistries = true
					}
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "reconcile" && n.Sel.Name == "Runner" {
					r.FetchesRegistries = true
				}
			}
			return true
		})
	}
	walk(handler)
	return r
}

// loaders are the settings loaders, by name; a loader the code calls that is
// not here fails the test.
var loaders = map[string]func(settings.Lookup) error{
	"LoadBootstrap": func(l settings.Lookup) error { _, err := settings.LoadBootstrap(l); return err },
	"LoadReconcile": func(l settings.Lookup) error { _, err := settings.LoadReconcile(l); return err },
	"LoadCatalog":   func(l settings.Lookup) error { _, err := settings.LoadCatalog(l); return err },
}

// keysRead is the exact set of environment variables a loader asks for.
func keysRead(load func(settings.Lookup) error) map[string]bool {
	keys := map[string]bool{}
	_ = load(func(k string) (string, bool) { keys[k] = true; return "", false })
	return keys
}

// functionsByEntryPoint maps each terraform function to its entry point.
func functionsByEntryPoint(t *testing.T, m *module) map[string]*instance {
	t.Helper()
	out := map[string]*instance{}
	for _, fn := range m.ofType("google_cloudfunctions2_function") {
		bc := fn.one("build_config")
		if bc == nil {
			t.Fatalf("%s has no build_config", fn.addr())
		}
		ep := bc.str("entry_point")
		if _, dup := out[ep]; dup {
			t.Errorf("two functions with entry point %s", ep)
		}
		out[ep] = fn
	}
	var got, want []string
	for ep := range out {
		got = append(got, ep)
	}
	for _, r := range parseFunctions(t).regs {
		want = append(want, r.Name)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("function resources have entry points %v; the code registers %v (functions/functions.go)", got, want)
	}
	return out
}

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

// secretSettings are the settings that hold secrets; they must come from
// Secret Manager, never from a plain environment variable. Each may also be
// given as its SHA-256 digest (KEY_SHA256) or a file (KEY_FILE) where the
// code reads those.
var secretSettings = map[string]bool{"SPECSYNC_ADMIN_TOKEN": true, "SPECSYNC_BROKER_PASSWORD": true}

// testCredentials are the credentials whose digests the tests give the
// module (inputs).
var testCredentials = map[string]string{
	"SPECSYNC_ADMIN_TOKEN":     "test-admin-token-0123456789abcdef",
	"SPECSYNC_BROKER_PASSWORD": "test-broker-password-0123456789ab",
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// credential is one secret a function checks callers against and the
// settings it can come from.
type credential struct {
	key     string
	sources []string
}

// credentialSources are the credentials a loader reads, each with the
// sources it reads for it. That at most one source may be set is checked
// against the loader, so the table cannot claim alternatives the code does
// not treat as such.
func credentialSources(t *testing.T, loader string, load func(settings.Lookup) error) []credential {
	t.Helper()
	read := keysRead(load)
	example := map[string]string{"": "a-placeholder-secret-value-0123456789", settings.SuffixSHA256: sha256Hex("x"), settings.SuffixFile: "/secrets/x"}
	var out []credential
	for _, key := range keysOf(secretSettings) {
		c := credential{key: key}
		for _, suffix := range []string{"", settings.SuffixSHA256, settings.SuffixFile} {
			if read[key+suffix] {
				c.sources = append(c.sources, key+suffix)
			}
		}
		if len(c.sources) == 0 {
			continue
		}
		for i, a := range c.sources {
			for _, b := range c.sources[i+1:] {
				both := map[string]string{a: example[strings.TrimPrefix(a, key)], b: example[strings.TrimPrefix(b, key)]}
				err := load(func(k string) (string, bool) { v, ok := both[k]; return v, ok })
				if err == nil || !strings.Contains(err.Error(), "set only one of "+a+", "+b) {
					t.Errorf("settings.%s accepts both %s and %s (%v); the test treats them as alternatives", loader, a, b, err)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// secretIDOf is the Secret Manager id of the secret keyed key.
func secretIDOf(t *testing.T, m *module, key string) string {
	t.Helper()
	s := m.instance("google_secret_manager_secret.credential", key)
	if s == nil {
		t.Fatalf("no secret for %s", key)
	}
	return s.str("secret_id")
}

// goRegistries is what the Go code makes of the reference registries file:
// the ${VAR}s it needs and the credentials it reads.
type goRegistries struct {
	EnvRefs, SecretEnvs, SecretFiles []string
}

func loadGoRegistries(t *testing.T) goRegistries {
	t.Helper()
	for k, v := range referenceEnv {
		t.Setenv(k, v)
	}
	path := filepath.Join("..", referenceRegistries)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the Go config does not load %s with the test's registry_env: %v", referenceRegistries, err)
	}
	var g goRegistries
	// Every variable of referenceEnv is needed: without it the file fails
	// to load.
	for k := range referenceEnv {
		os.Unsetenv(k)
		if _, err := config.Load(path); err == nil {
			t.Errorf("%s loads without %s: the test's registry_env is not what the file references", referenceRegistries, k)
		}
		os.Setenv(k, referenceEnv[k])
		g.EnvRefs = append(g.EnvRefs, k)
	}
	for _, r := range cfg.File.Registries {
		var auths []struct{ env, file []string }
		if r.OCI != nil {
			a := r.OCI.Auth
			auths = append(auths, struct{ env, file []string }{[]string{a.UsernameEnv, a.PasswordEnv, a.TokenEnv}, []string{a.PasswordFile, a.TokenFile}})
		}
		if r.HTTP != nil {
			a := r.HTTP.Auth
			auths = append(auths, struct{ env, file []string }{[]string{a.UsernameEnv, a.PasswordEnv, a.TokenEnv}, []string{a.PasswordFile, a.TokenFile}})
		}
		for _, a := range auths {
			for _, e := range a.env {
				if e != "" {
					g.SecretEnvs = append(g.SecretEnvs, e)
				}
			}
			for _, f := range a.file {
				if f != "" {
					g.SecretFiles = append(g.SecretFiles, f)
				}
			}
		}
	}
	sort.Strings(g.EnvRefs)
	sort.Strings(g.SecretEnvs)
	sort.Strings(g.SecretFiles)
	if len(g.SecretEnvs) == 0 || len(g.SecretFiles) == 0 {
		t.Fatalf("%s no longer names an *_env and a *_file credential; the secret checks need both", referenceRegistries)
	}
	return g
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
// (the commit trigger) or without (the reconcile trigger).
func pushSubscriptionOf(t *testing.T, m *module, ordered bool) *instance {
	t.Helper()
	var found []*instance
	for _, sub := range m.ofType("google_pubsub_subscription") {
		if sub.one("push_config") != nil && isTrue(sub.Attrs["enable_message_ordering"]) == ordered {
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
	return v.IsKnown() && !v.IsNull() && v.Type() == cty.Bool && v.True()
}

// The store's queries (pkg/store/queries.go, itself checked against the
// store's code) and the module's composite indexes match both ways.
func TestEveryQueryHasItsIndex(t *testing.T) {
	m := evaluated(t, nil)
	queriesOnlyInStore(t)
	type field struct{ Path, Mode string } // Mode: ASCENDING, DESCENDING, CONTAINS
	var indexes [][]field
	var indexColl []string
	used := map[int]bool{}
	db := m.instance("google_firestore_database.main", "")
	for _, ix := range m.ofType("google_firestore_index") {
		if ix.str("database") != db.str("name") {
			t.Errorf("%s is not on the module's database", ix.addr())
		}
		if s := ix.str("query_scope"); s != "" && s != "COLLECTION" {
			t.Errorf("%s: query_scope %s; the store runs no collection-group query", ix.addr(), s)
		}
		var fs []field
		for _, f := range ix.Blocks["fields"] {
			mode := f.str("order")
			if f.str("array_config") == "CONTAINS" {
				mode = "CONTAINS"
			}
			fs = append(fs, field{f.str("field_path"), mode})
		}
		if n := len(fs); n > 0 && fs[n-1].Path == store.DocumentIDField {
			fs = fs[:n-1]
		}
		indexes = append(indexes, fs)
		indexColl = append(indexColl, ix.str("collection"))
	}
	exempt := map[string]bool{} // collection/field without single-field indexes
	for _, f := range m.ofType("google_firestore_field") {
		if ic := f.one("index_config"); ic != nil && len(ic.Blocks["indexes"]) == 0 {
			exempt[f.str("collection")+"/"+f.str("field")] = true
		}
	}
	for _, q := range store.Queries {
		var eq, rng []field
		var order []field
		fields := map[string]bool{}
		for _, f := range q.Filters {
			fields[f.Field] = true
			switch f.Op {
			case store.OpEqual, store.OpIn:
				eq = append(eq, field{f.Field, "ASCENDING"})
			case store.OpArrayContains, store.OpArrayContainsAny:
				eq = append(eq, field{f.Field, "CONTAINS"})
			default:
				rng = append(rng, field{f.Field, "ASCENDING"})
			}
		}
		for _, o := range q.OrderBy {
			if o.Field == store.DocumentIDField {
				continue
			}
			fields[o.Field] = true
			order = append(order, field{o.Field, o.Direction})
		}
		for f := range fields {
			if exempt[q.Collection+"/"+f] {
				t.Errorf("query %s filters or orders on %s/%s, whose single-field indexes firestore.tf exempts", q.Func, q.Collection, f)
			}
		}
		if len(fields) <= 1 {
			continue // served by automatic single-field indexes
		}
		// The composite index Firestore asks for: equalities first (any
		// order), then the orderings, then inequalities not ordered on.
		tail := append([]field(nil), order...)
		for _, r := range rng {
			ordered := false
			for _, o := range order {
				ordered = ordered || o.Path == r.Path
			}
			if !ordered {
				tail = append(tail, r)
			}
		}
		found := false
		for i, ix := range indexes {
			if indexColl[i] != q.Collection || len(ix) != len(eq)+len(tail) {
				continue
			}
			head := map[field]bool{}
			for _, f := range ix[:len(eq)] {
				if f.Mode == "DESCENDING" {
					f.Mode = "ASCENDING" // equality is served either way
				}
				head[f] = true
			}
			ok := true
			for _, f := range eq {
				ok = ok && head[f]
			}
			ok = ok && reflect.DeepEqual(ix[len(eq):], tail) || ok && len(tail) == 0 && len(ix) == len(eq)
			if ok {
				found, used[i] = true, true
			}
		}
		if !found {
			t.Errorf("query %s (%s, filters %v, order %v) has no composite index in firestore.tf; want fields %v then %v", q.Func, q.Collection, q.Filters, q.OrderBy, eq, tail)
		}
	}
	for i := range indexes {
		if !used[i] {
			t.Errorf("composite index on %s %v serves no query in store.Queries: remove it or declare the query", indexColl[i], indexes[i])
		}
	}
}

// queriesOnlyInStore fails for a Firestore query in deployed code outside
// pkg/store, where store.Queries (and so the indexes) would not see it.
func queriesOnlyInStore(t *testing.T) {
	t.Helper()
	queryMethods := map[string]bool{"Where": true, "WherePath": true, "WhereEntity": true, "OrderBy": true, "OrderByPath": true,
		"FindNearest": true, "FindNearestPath": true, "CollectionGroup": true, "Pipeline": true}
	fset := token.NewFileSet()
	for _, dir := range []string{"../pkg", "../functions"} {
		err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if info.IsDir() && filepath.ToSlash(path) == "../pkg/store" {
				return filepath.SkipDir
			}
			if info.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			usesFirestore := false
			for _, imp := range f.Imports {
				usesFirestore = usesFirestore || imp.Path.Value == `"cloud.google.com/go/firestore"`
			}
			if !usesFirestore {
				return nil
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && queryMethods[sel.Sel.Name] {
						t.Errorf("%s: a Firestore query (%s) outside pkg/store: move it to the store and declare it in store.Queries, so its index is deployed", fset.Position(call.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// expiring maps the Go types whose documents carry an expires_at timestamp
// to their TTL policy. A new type with such a field fails until it is
// mapped here and its policy is added to firestore.tf (or it is listed as
// nested, where a TTL would delete the enclosing document).
var expiring = map[string]struct{ Collection, Field string }{
	"api.Operation":   {store.OperationsCollection, "expires_at"},
	"store.Change":    {store.ChangesCollection, "expires_at"},
	"store.Tombstone": {store.TombstonesCollection, "expires_at"},
}

var nestedExpiry = map[string]string{
	"api.Lease": "registries/{name}.lease: a TTL on it would delete the registry's status",
}

func TestTTLPolicies(t *testing.T) {
	m := evaluated(t, nil)
	// Every struct field tagged firestore:"expires_at" in the module's Go code.
	fset := token.NewFileSet()
	var typesFound []string
	err := filepath.Walk("..", func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() && (info.Name() == ".git" || info.Name() == "terraform") {
			return filepath.SkipDir
		}
		if info.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fl := range st.Fields.List {
				if fl.Tag == nil {
					continue
				}
				tag, _ := strconv.Unquote(fl.Tag.Value)
				if name, _, _ := strings.Cut(reflect.StructTag(tag).Get("firestore"), ","); name == "expires_at" {
					typesFound = append(typesFound, f.Name.Name+"."+ts.Name.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, typ := range typesFound {
		if e, ok := expiring[typ]; ok {
			want[e.Collection+"/"+e.Field] = true
			continue
		}
		if _, ok := nestedExpiry[typ]; ok {
			continue
		}
		t.Errorf("%s has a firestore expires_at field: add its TTL policy to firestore.tf and map it in this test's expiring (or nestedExpiry)", typ)
	}
	for typ := range expiring {
		if !contains(typesFound, typ) {
			t.Errorf("%s no longer has an expires_at field; update expiring and firestore.tf", typ)
		}
	}
	// The field the code writes is the one mapped.
	if f, ok := reflect.TypeOf(api.Operation{}).FieldByName("ExpiresAt"); !ok || f.Tag.Get("firestore") != expiring["api.Operation"].Field {
		t.Error("api.Operation.ExpiresAt is not stored as expires_at")
	}
	got := map[string]bool{}
	for _, f := range m.ofType("google_firestore_field") {
		if f.one("ttl_config") == nil {
			continue
		}
		key := f.str("collection") + "/" + f.str("field")
		got[key] = true
		for _, data := range []string{store.SpecsCollection, store.InstancesCollection, store.RegistriesCollection, store.MetaCollection} {
			if f.str("collection") == data {
				t.Errorf("%s: a TTL policy on %s would delete data", f.addr(), key)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TTL policies %v, want %v", got, want)
	}
}

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
			out = append(out, binding{Scope: s, Role: inst.str("role"), Member: inst.str("member"), Addr: inst.addr()})
		}
	}
	return out
}

func TestLeastPrivilege(t *testing.T) {
	m := evaluated(t, nil)
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
	registrySecrets := map[string]bool{}
	for _, s := range m.ofType("google_secret_manager_secret") {
		if !secretSettings[s.Key] {
			registrySecrets["secret:"+s.str("secret_id")] = true
		}
	}
	for _, r := range p.regs {
		acct := accounts[r.Name]
		mounted := secretsOf(r.Name)
		accessible := map[string]bool{}
		hasFirestore := false
		for _, b := range held[acct] {
			switch {
			case b.Scope == "project" && b.Role == "roles/datastore.user":
				hasFirestore = true
			case b.Scope == "project":
				t.Errorf("%s: %s holds project role %s; functions get Firestore (roles/datastore.user) and nothing else project-wide", b.Addr, r.Name, b.Role)
			case b.Role == "roles/secretmanager.secretAccessor" && strings.HasPrefix(b.Scope, "secret:"):
				accessible[b.Scope] = true
			case b.Role == "roles/pubsub.publisher" && r.Name == "Bootstrap" && b.Scope == "topic:"+workTopic.str("name"):
			case b.Role == "roles/pubsub.publisher" && r.Name == "Reconcile" && b.Scope == "topic:"+changesTopic.str("name"):
			case b.Role == "roles/pubsub.publisher" && r.Name == "Reconcile" && b.Scope == "topic:"+commitTopic.str("name"):
			default:
				t.Errorf("%s: %s may not hold %s on %s", b.Addr, r.Name, b.Role, b.Scope)
			}
		}
		if !hasFirestore {
			t.Errorf("%s has no roles/datastore.user", r.Name)
		}
		if !reflect.DeepEqual(accessible, mounted) && !(len(accessible) == 0 && len(mounted) == 0) {
			t.Errorf("%s can read secrets %v but mounts %v: each secret is readable by the functions that use it and only those", r.Name, keysOf(accessible), keysOf(mounted))
		}
		rc := p.reach(r.Handler)
		for s := range accessible {
			if registrySecrets[s] && !rc.FetchesRegistries {
				t.Errorf("%s does not fetch registries but can read the registry secret %s", r.Name, s)
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
		if b.Role == "roles/datastore.owner" || (b.Scope == "project" && b.Role != "roles/datastore.user") {
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

func TestSecrets(t *testing.T) {
	m := evaluated(t, nil)
	g := loadGoRegistries(t)
	var got []string
	for _, s := range m.ofType("google_secret_manager_secret") {
		got = append(got, s.Key)
		if s.one("replication") == nil {
			t.Errorf("%s has no replication", s.addr())
		}
	}
	want := append([]string{"SPECSYNC_ADMIN_TOKEN", "SPECSYNC_BROKER_PASSWORD"}, append(g.SecretEnvs, g.SecretFiles...)...)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("secrets %v, want %v (the credentials and every registry credential the config names)", got, want)
	}
	// Created empty: no version unless asked, and never a value in the state.
	if n := len(m.ofType("google_secret_manager_secret_version")); n != 0 {
		t.Errorf("%d secret versions by default; secrets are created empty", n)
	}
	for name, body := range m.bodies {
		walkAttrs(body, func(a *hclsyntax.Attribute) {
			if a.Name == "secret_data" {
				t.Errorf("%s: secret_data would store a value in the state; use secret_data_wo", name)
			}
		})
	}
	sv := m.variables["secret_values"]
	for _, flag := range []string{"ephemeral", "sensitive"} {
		a, ok := sv.Body.Attributes[flag]
		if v, _ := a.Expr.Value(nil); !ok || v.False() {
			t.Errorf("variable secret_values must be %s", flag)
		}
	}
	// With write_secrets, one write-only version per secret named.
	values := map[string]string{}
	for _, k := range want {
		values[k] = "value-of-" + k + "-0123456789"
		if c, ok := testCredentials[k]; ok {
			values[k] = c // must match the digest the catalog gets
		}
	}
	w := evaluated(t, map[string]cty.Value{"write_secrets": ctyFromGo(want), "secret_values": ctyFromGo(values)})
	versions := w.ofType("google_secret_manager_secret_version")
	if len(versions) != len(want) {
		t.Errorf("%d initial versions, want %d", len(versions), len(want))
	}
	for _, v := range versions {
		if v.str("secret_data_wo") != values[v.Key] {
			t.Errorf("%s does not write its secret's value", v.addr())
		}
	}
	for name, v := range w.outVals {
		for _, secret := range values {
			if strings.Contains(v.GoString(), secret) {
				t.Errorf("output %s exposes a secret value", name)
			}
		}
	}
	// A written credential whose digest is not the one the catalog checks
	// would lock every caller out: the plan fails instead.
	for key, variable := range map[string]string{"SPECSYNC_BROKER_PASSWORD": "broker_password_sha256", "SPECSYNC_ADMIN_TOKEN": "admin_token_sha256"} {
		wrong := map[string]string{key: testCredentials[key] + "-not-the-hashed-one"}
		bad, err := loadModule(".", inputs(map[string]cty.Value{"write_secrets": ctyFromGo([]string{key}), "secret_values": ctyFromGo(wrong)}))
		if err != nil {
			t.Fatal(err)
		}
		if joined := strings.Join(bad.errs, "\n"); !strings.Contains(joined, key) || !strings.Contains(joined, variable) {
			t.Errorf("writing a %s that does not match %s does not fail the plan: %v", key, variable, bad.errs)
		}
	}
	// The digests are plain inputs: not secrets (the catalog's environment
	// holds them), so not marked sensitive, which would only hide them
	// from the plan while suggesting they need protecting.
	for _, name := range []string{"broker_password_sha256", "admin_token_sha256"} {
		v, ok := m.variables[name]
		if !ok {
			t.Errorf("no variable %s", name)
			continue
		}
		for _, flag := range []string{"sensitive", "ephemeral"} {
			if a, ok := v.Body.Attributes[flag]; ok {
				if val, _ := a.Expr.Value(nil); val.True() {
					t.Errorf("variable %s is %s; a digest is neither", name, flag)
				}
			}
		}
		if _, ok := v.Body.Attributes["default"]; ok {
			t.Errorf("variable %s has a default; every deployment needs its own credentials", name)
		}
	}
	// A secret that does not exist cannot be written.
	bad, err := loadModule(".", inputs(map[string]cty.Value{"write_secrets": ctyFromGo([]string{"NO_SUCH_SECRET"}), "secret_values": ctyFromGo(map[string]string{"NO_SUCH_SECRET": "x"})}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(bad.errs, "\n"), "NO_SUCH_SECRET") {
		t.Errorf("writing an unknown secret does not fail the plan: %v", bad.errs)
	}
}

func walkAttrs(b *hclsyntax.Body, f func(*hclsyntax.Attribute)) {
	for _, a := range b.Attributes {
		f(a)
	}
	for _, nb := range b.Blocks {
		walkAttrs(nb.Body, f)
	}
}

func TestVariablesTypedDescribedValidated(t *testing.T) {
	m := evaluated(t, nil)
	for name, b := range m.variables {
		ty, ok := b.Body.Attributes["type"]
		if !ok {
			t.Errorf("variable %s has no type", name)
		}
		if d, ok := b.Body.Attributes["description"]; !ok {
			t.Errorf("variable %s has no description", name)
		} else if v, _ := d.Expr.Value(nil); len(asString(v)) < 20 {
			t.Errorf("variable %s: describe it", name)
		}
		validations := 0
		for _, vb := range b.Body.Blocks {
			if vb.Type == "validation" {
				validations++
			}
		}
		isBool := ok && hclKeyword(ty) == "bool"
		if validations == 0 && !isBool {
			t.Errorf("variable %s is not validated", name)
		}
	}
	// Bad values are refused at plan time.
	for name, bad := range map[string]cty.Value{
		"project_id":                      cty.StringVal("Not A Project"),
		"name_prefix":                     cty.StringVal("this-prefix-is-too-long"),
		"registries_file":                 cty.StringVal("../outside.yaml"),
		"log_level":                       cty.StringVal("verbose"),
		"reconcile_max_delivery_attempts": cty.NumberIntVal(1),
		"lease_ttl_seconds":               cty.NumberIntVal(60),
		"reconcile_service":               ctyFromGo(map[string]any{"timeout_seconds": 900}),
		"catalog_service":                 ctyFromGo(map[string]any{"cpu": "0.5", "concurrency": 80}),
		"bootstrap_schedule":              cty.StringVal("hourly"),
		"registry_env":                    ctyFromGo(map[string]string{"REFERENCE_REGISTRY_HOST": "h", "SPECSYNC_TOPIC": "x"}),
		"broker_password_sha256":          cty.StringVal(testCredentials["SPECSYNC_BROKER_PASSWORD"]),            // the password, not its digest
		"admin_token_sha256":              cty.StringVal(sha256Hex("") + "  -"),                                  // sha256sum's whole line
		"broker_password_previous_sha256": cty.StringVal(sha256Hex(testCredentials["SPECSYNC_BROKER_PASSWORD"])), // the current one again
	} {
		bm, err := loadModule(".", inputs(map[string]cty.Value{name: bad}))
		if err != nil {
			t.Fatal(err)
		}
		failed := false
		for _, e := range bm.errs {
			failed = failed || strings.Contains(e, "variable "+name+" validation")
		}
		if !failed {
			t.Errorf("variable %s accepts %#v", name, bad)
		}
	}
	// The digest of nothing (a credential variable that was not set when
	// it was hashed) is refused too.
	for _, name := range []string{"broker_password_sha256", "admin_token_sha256"} {
		bm, err := loadModule(".", inputs(map[string]cty.Value{name: cty.StringVal(sha256Hex(""))}))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(bm.errs, "\n"), "variable "+name+" validation") {
			t.Errorf("variable %s accepts the digest of an empty string", name)
		}
	}
}

func hclKeyword(a *hclsyntax.Attribute) string {
	if st, ok := a.Expr.(*hclsyntax.ScopeTraversalExpr); ok {
		return st.Traversal.RootName()
	}
	return ""
}

// Nothing that holds data is destroyed by default.
func TestDataIsProtected(t *testing.T) {
	m := evaluated(t, nil)
	db := m.instance("google_firestore_database.main", "")
	if db == nil {
		t.Fatal("no google_firestore_database.main")
	}
	if db.str("type") != "FIRESTORE_NATIVE" {
		t.Errorf("Firestore type %s, want FIRESTORE_NATIVE", db.str("type"))
	}
	if db.str("deletion_policy") != "ABANDON" {
		t.Error("terraform destroy would delete the Firestore database (deletion_policy)")
	}
	if db.str("delete_protection_state") != "DELETE_PROTECTION_ENABLED" {
		t.Error("the Firestore database is not delete-protected by default")
	}
	for _, s := range m.ofType("google_secret_manager_secret") {
		if v := s.Attrs["deletion_protection"]; v == cty.NilVal || !v.True() {
			t.Errorf("%s is not protected from deletion by default", s.addr())
		}
	}
	for _, s := range m.ofType("google_project_service") {
		if v := s.Attrs["disable_on_destroy"]; v == cty.NilVal || v.True() {
			t.Errorf("%s would disable its API on destroy", s.addr())
		}
	}
	for _, b := range m.ofType("google_storage_bucket") {
		if v := b.Attrs["force_destroy"]; v != cty.NilVal && v.True() {
			t.Errorf("%s: force_destroy", b.addr())
		}
	}
}

// Every API a resource needs is enabled, and every resource waits for them.
func TestAPIs(t *testing.T) {
	m := evaluated(t, nil)
	needs := []struct {
		prefix string
		apis   []string
	}{
		{"google_cloudfunctions2_", []string{"cloudfunctions", "run", "cloudbuild", "artifactregistry", "logging"}},
		{"google_cloud_run_v2_", []string{"run"}},
		{"google_firestore_", []string{"firestore"}},
		{"google_pubsub_", []string{"pubsub"}},
		{"google_secret_manager_", []string{"secretmanager"}},
		{"google_cloud_scheduler_", []string{"cloudscheduler"}},
		{"google_storage_", []string{"storage"}},
		{"google_service_account", []string{"iam"}},
		{"google_project_iam_", []string{"cloudresourcemanager"}},
		{"google_project", []string{"cloudresourcemanager"}},
	}
	enabled := map[string]bool{}
	for _, s := range m.ofType("google_project_service") {
		enabled[strings.TrimSuffix(s.str("service"), ".googleapis.com")] = true
	}
	for _, k := range m.order {
		r := m.resources[k]
		if !strings.HasPrefix(r.Type, "google_") || r.Type == "google_project_service" {
			continue
		}
		known := false
		for _, n := range needs {
			if strings.HasPrefix(r.Type, n.prefix) {
				known = true
				for _, api := range n.apis {
					if !enabled[api] {
						t.Errorf("%s needs %s.googleapis.com, which is not enabled", k, api)
					}
				}
				break
			}
		}
		if !known {
			t.Errorf("%s: no API known for %s; add it to this test", k, r.Type)
		}
		if !m.dependsOn(k, "google_project_service.enabled") {
			t.Errorf("%s does not wait for the APIs (directly or through what it references)", k)
		}
	}
}

func TestOutputs(t *testing.T) {
	m := evaluated(t, nil)
	fns := functionsByEntryPoint(t, m)
	want := map[string]string{
		"broker_url":            fns["Catalog"].one("service_config").str("uri"),
		"bootstrap_url":         fns["Bootstrap"].one("service_config").str("uri"),
		"reconcile_topic":       workTopicOf(t, m).str("id"),
		"catalog_changes_topic": m.instance("google_pubsub_topic.catalog_changes", "").str("id"),
		"commit_topic":          commitTopicOf(t, m).str("id"),
	}
	for name, w := range want {
		v, ok := m.outVals[name]
		if !ok {
			t.Errorf("no output %s", name)
			continue
		}
		if asString(v) != w {
			t.Errorf("output %s = %q, want %q", name, asString(v), w)
		}
	}
	for name, b := range m.outputs {
		if _, ok := b.Body.Attributes["description"]; !ok {
			t.Errorf("output %s has no description", name)
		}
	}
}

// The deployment guide walks through what terraform needs, with the
// variables and outputs it really has.
func TestDeployGuide(t *testing.T) {
	guide, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(guide)
	m := evaluated(t, nil)
	mustMention := []string{"terraform init", "terraform plan", "terraform apply", "gcloud secrets versions add", "registries_file", "registry_env", "/bootstrap", "last_operation", "Prerequisites", "Cost",
		"Register the broker with a platform", "Add a registry", "Trigger a bootstrap by hand",
		"openssl rand", "| sha256sum", "broker_password_sha256", "admin_token_sha256", "Rotating"}
	for name := range m.outputs {
		if name == "broker_url" || name == "bootstrap_url" || name == "secrets" {
			mustMention = append(mustMention, name)
		}
	}
	for _, s := range mustMention {
		if !strings.Contains(section, s) {
			t.Errorf("docs/deploy.md does not mention %q", s)
		}
	}
	for _, v := range regexp.MustCompile("`([a-z_]+)\\s*=").FindAllStringSubmatch(section, -1) {
		if _, ok := m.variables[v[1]]; !ok {
			t.Errorf("docs/deploy.md sets %s, which is not a variable", v[1])
		}
	}
}

// The settings table (docs/configuration.md) lists every variable a
// function reads, with exactly the functions that read it, and none that
// no function reads.
func TestSettingsTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Settings (environment)\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Settings (environment)" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	components := map[string]string{"LoadBootstrap": "bootstrap", "LoadReconcile": "reconcile", "LoadCatalog": "catalog"}
	readBy := map[string][]string{}
	for name, load := range loaders {
		c, ok := components[name]
		if !ok {
			t.Fatalf("settings.%s: which function is it? add it to components", name)
		}
		for k := range keysRead(load) {
			readBy[k] = append(readBy[k], c)
		}
	}
	listed := map[string][]string{}
	names := regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "`") {
			continue
		}
		var fns []string
		for _, f := range strings.Split(cells[2], ",") {
			switch f = strings.TrimSpace(f); f {
			case "all":
				fns = append(fns, "bootstrap", "reconcile", "catalog")
			case "bootstrap", "reconcile", "catalog":
				fns = append(fns, f)
			}
		}
		if len(fns) == 0 {
			continue // not a function's setting (the local stack's)
		}
		sort.Strings(fns)
		for _, m := range names.FindAllStringSubmatch(cells[1], -1) {
			if _, dup := listed[m[1]]; dup {
				t.Errorf("the settings table lists %s twice", m[1])
			}
			listed[m[1]] = fns
		}
	}
	if len(listed) == 0 {
		t.Fatal("no rows parsed from the settings table: the check would be vacuous")
	}
	for k, fns := range readBy {
		sort.Strings(fns)
		if got, ok := listed[k]; !ok {
			t.Errorf("the settings table does not list %s (read by %s)", k, strings.Join(fns, ", "))
		} else if !reflect.DeepEqual(got, fns) {
			t.Errorf("the settings table says %s is read by %s; it is read by %s", k, strings.Join(got, ", "), strings.Join(fns, ", "))
		}
	}
	for k := range listed {
		if _, ok := readBy[k]; !ok {
			t.Errorf("the settings table lists %s, which no function reads", k)
		}
	}
}
