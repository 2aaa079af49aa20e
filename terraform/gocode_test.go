//go:build deploycheck

package terraform_test

// What the Go code says, read for the checks: the functions it registers
// and what each does at cold start, the settings each loader reads, the
// credentials and where they may come from, and what it makes of the
// reference registries file.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/settings"
)

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
// itself), whether it runs reconciles
// (which fetch registries with their credentials) and whether it serves
// the registries' webhooks (hooks.New, which checks their secrets).
type reach struct {
	Loaders           []string
	LoadsRegistries   bool
	FetchesRegistries bool
	ServesHooks       bool
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
					if x, ok := fun.X.(*ast.Ident); ok && x.Name == "hooks" && fun.Sel.Name == "New" {
						r.ServesHooks = true
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

// functionsByEntryPoint maps each function (a Cloud Run service built from
// the source) to its entry point; they are the functions the code
// registers, the hooks function only when a registry has a hook block.
func functionsByEntryPoint(t *testing.T, m *module) map[string]*instance {
	t.Helper()
	out := map[string]*instance{}
	for _, fn := range m.ofType("google_cloud_run_v2_service") {
		bc := fn.one("build_config")
		if bc == nil {
			t.Fatalf("%s has no build_config: not built from the source", fn.addr())
		}
		ep := bc.str("function_target")
		if _, dup := out[ep]; dup {
			t.Errorf("two functions with entry point %s", ep)
		}
		out[ep] = fn
	}
	var got, want []string
	for ep := range out {
		got = append(got, ep)
	}
	hooks := false
	if v, ok := m.outVals["hook_urls"]; !ok || v == cty.NilVal || !v.IsKnown() {
		t.Fatal("the plan has no hook_urls output")
	} else {
		hooks = !v.IsNull() && v.LengthInt() > 0
	}
	for _, r := range parseFunctions(t).regs {
		if r.Name == "Hooks" && !hooks {
			continue
		}
		want = append(want, r.Name)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("functions deployed with entry points %v; the code registers %v (functions/functions.go; Hooks only with a hook block)", got, want)
	}
	return out
}

// container is a function's one container.
func container(t *testing.T, fn *instance) *block {
	t.Helper()
	tpl := fn.one("template")
	if tpl == nil || tpl.one("containers") == nil {
		t.Fatalf("%s: want a template with one container", fn.addr())
	}
	return tpl.one("containers")
}

// envOf is a function's environment: plain values, and the variables
// filled from Secret Manager (name -> secret id, with the version).
func envOf(t *testing.T, fn *instance) (plain map[string]string, secret map[string]string) {
	t.Helper()
	plain, secret = map[string]string{}, map[string]string{}
	for _, e := range container(t, fn).Blocks["env"] {
		name := e.str("name")
		if _, dup := plain[name]; dup {
			t.Errorf("%s: %s is set twice", fn.addr(), name)
		}
		if _, dup := secret[name]; dup {
			t.Errorf("%s: %s is set twice", fn.addr(), name)
		}
		if vs := e.one("value_source"); vs != nil {
			ref := vs.one("secret_key_ref")
			if ref == nil {
				t.Errorf("%s: %s has a value source that is not a secret", fn.addr(), name)
				continue
			}
			if ref.str("version") != "latest" {
				t.Errorf("%s: %s pins secret version %s; use latest, so rotation needs no redeploy", fn.addr(), name, ref.str("version"))
			}
			secret[name] = ref.str("secret")
			continue
		}
		plain[name] = e.str("value")
	}
	return plain, secret
}

// mountsOf is a function's mounted secret files: path -> secret id.
func mountsOf(t *testing.T, fn *instance) map[string]string {
	t.Helper()
	volumes := map[string]*block{}
	for _, v := range fn.one("template").Blocks["volumes"] {
		volumes[v.str("name")] = v
	}
	out := map[string]string{}
	for _, vm := range container(t, fn).Blocks["volume_mounts"] {
		v := volumes[vm.str("name")]
		if v == nil || v.one("secret") == nil {
			t.Errorf("%s: the mount %s is not of a secret volume", fn.addr(), vm.str("mount_path"))
			continue
		}
		for _, it := range v.one("secret").Blocks["items"] {
			if it.str("version") != "latest" {
				t.Errorf("%s: the volume at %s pins version %s; mount latest, so rotation needs no redeploy", fn.addr(), vm.str("mount_path"), it.str("version"))
			}
			out[vm.str("mount_path")+"/"+it.str("path")] = v.one("secret").str("secret")
		}
	}
	if len(out) != len(volumes) {
		t.Errorf("%s: %d secret files mounted from %d volumes: every volume is mounted, one file each", fn.addr(), len(out), len(volumes))
	}
	return out
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

// goRegistries is what the Go code makes of the reference registries file:
// the ${VAR}s it needs, the credentials it reads to fetch, and the
// webhooks' secrets (with the registries that have a hook).
type goRegistries struct {
	EnvRefs, SecretEnvs, SecretFiles []string
	HookSecretEnvs, HookSecretFiles  []string
	Hooks                            []string
}

func loadGoRegistries(t *testing.T) goRegistries {
	t.Helper()
	g := goRegistriesOf(t, filepath.Join("..", referenceRegistries), referenceEnv)
	if len(g.SecretEnvs) == 0 || len(g.SecretFiles) == 0 {
		t.Fatalf("%s no longer names an *_env and a *_file credential; the secret checks need both", referenceRegistries)
	}
	if len(g.HookSecretEnvs) == 0 || len(g.HookSecretFiles) == 0 {
		t.Fatalf("%s no longer has a hook with a secret_env and one with a secret_file; the hook secret checks need both", referenceRegistries)
	}
	return g
}

var envMu sync.Mutex

// goRegistriesOf is what the Go code makes of a registries file, loaded
// with env as the only ${VAR} values.
func goRegistriesOf(t *testing.T, path string, env map[string]string) goRegistries {
	t.Helper()
	// The environment is the process's: one load at a time, and the
	// variables gone again after it (tests run in parallel).
	envMu.Lock()
	defer envMu.Unlock()
	for k, v := range env {
		os.Setenv(k, v)
		defer os.Unsetenv(k)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the Go config does not load %s with the test's registry_env: %v", path, err)
	}
	var g goRegistries
	// Every variable of env is needed: without it the file fails to load.
	for k := range env {
		os.Unsetenv(k)
		if _, err := config.Load(path); err == nil {
			t.Errorf("%s loads without %s: the test's registry_env is not what the file references", path, k)
		}
		os.Setenv(k, env[k])
		g.EnvRefs = append(g.EnvRefs, k)
	}
	for _, r := range cfg.File.Registries {
		// The credentials are what the source's kind declares
		// (registry.Kind.Credentials), not a hand list.
		kind, ok := registry.LookupKind(r.Type)
		if !ok {
			t.Fatalf("%s: type %s is not registered", r.Name, r.Type)
		}
		envs, files, err := registry.CredentialRefs(kind, r.Block())
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		auths := []struct{ env, file []string }{{envs, files}}
		if r.Verify != nil {
			// A verify block's keys and trusted root are read by the
			// reconcile function as credentials are (pkg/verify).
			venvs, vfiles := r.Verify.SecretRefs()
			auths = append(auths, struct{ env, file []string }{venvs, vfiles})
		}
		if h := r.Hook; h != nil {
			g.Hooks = append(g.Hooks, r.Name)
			if h.SecretEnv != "" {
				g.HookSecretEnvs = append(g.HookSecretEnvs, h.SecretEnv)
			}
			if h.SecretFile != "" {
				g.HookSecretFiles = append(g.HookSecretFiles, h.SecretFile)
			}
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
	sort.Strings(g.HookSecretEnvs)
	sort.Strings(g.HookSecretFiles)
	return g
}
