package terraform_test

// What can be checked of the module without terraform (these run in every
// `go test`; the plans of the deploy check are in the files built with
// -tags deploycheck): its shape (formatted, one file per concern, every
// variable typed, described and validated), the list of files the
// functions are built from, and the docs that name its variables and the
// functions' settings.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/specsync/specsync/pkg/settings"
	"github.com/specsync/specsync/pkg/telemetry"
)

// tfFiles is the module's source, parsed: every top-level block by file.
type tfFiles struct {
	bodies    map[string]*hclsyntax.Body
	variables map[string]*hclsyntax.Block
	outputs   map[string]*hclsyntax.Block
	resources map[string]string // "type.name" or "data.type.name" -> file
}

func parseTF(t *testing.T, dir string) tfFiles {
	t.Helper()
	f := tfFiles{bodies: map[string]*hclsyntax.Body{}, variables: map[string]*hclsyntax.Block{}, outputs: map[string]*hclsyntax.Block{}, resources: map[string]string{}}
	names, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	if len(names) == 0 {
		t.Fatalf("no .tf files in %s", dir)
	}
	p := hclparse.NewParser()
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		hf, diags := p.ParseHCL(src, name)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		base := filepath.Base(name)
		body := hf.Body.(*hclsyntax.Body)
		f.bodies[base] = body
		for _, b := range body.Blocks {
			switch b.Type {
			case "variable":
				f.variables[b.Labels[0]] = b
			case "output":
				f.outputs[b.Labels[0]] = b
			case "resource":
				f.resources[b.Labels[0]+"."+b.Labels[1]] = base
			case "data":
				f.resources["data."+b.Labels[0]+"."+b.Labels[1]] = base
			}
		}
	}
	return f
}

func TestFormatting(t *testing.T) {
	var names []string
	for _, pattern := range []string{"*.tf", "../examples/deploy/*.tf", "../examples/deploy/*.tfvars"} {
		more, _ := filepath.Glob(pattern)
		names = append(names, more...)
	}
	if len(names) < 10 {
		t.Fatalf("found %d .tf files; the pattern is broken", len(names))
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

// One file per concern, and each resource in the file of its concern; a
// module: no provider or backend block.
func TestOneFilePerConcern(t *testing.T) {
	f := parseTF(t, ".")
	want := []string{"apis.tf", "config.tf", "events.tf", "firestore.tf", "functions.tf", "iam.tf", "monitoring.tf", "outputs.tf", "pubsub.tf", "registries.tf", "scheduler.tf", "secrets.tf", "source.tf", "variables.tf", "versions.tf"}
	var got []string
	for name := range f.bodies {
		got = append(got, name)
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	for addr, file := range f.resources {
		typ := strings.Split(strings.TrimPrefix(addr, "data."), ".")[0]
		if home := homeOf(typ); home == "" {
			t.Errorf("%s (%s): no home file for its type; add it to homeOf", addr, file)
		} else if !contains(strings.Split(home, ","), file) {
			t.Errorf("%s is in %s, want %s", addr, file, home)
		}
	}
	for name, b := range f.bodies {
		for _, blk := range b.Blocks {
			if blk.Type == "variable" && name != "variables.tf" || blk.Type == "output" && name != "outputs.tf" {
				t.Errorf("%s %s is in %s", blk.Type, blk.Labels[0], name)
			}
			if blk.Type == "provider" {
				t.Errorf("%s has a provider block: a module takes its providers from the root module", name)
			}
			if blk.Type == "terraform" {
				for _, inner := range blk.Body.Blocks {
					if inner.Type == "backend" || inner.Type == "cloud" {
						t.Errorf("%s has a %s block: the state is the root module's", name, inner.Type)
					}
				}
			}
		}
	}
}

// homeOf is the file (or files) of a resource type's concern.
func homeOf(typ string) string {
	rules := []struct{ match, file string }{
		{"google_secret_manager_secret_iam_member", "secrets.tf"}, // per-secret access, next to the secrets
		{"_iam_", "iam.tf"},
		{"google_service_account", "iam.tf"},
		{"google_project_service", "apis.tf"},
		{"google_project", "iam.tf"},
		{"google_firestore_", "firestore.tf"},
		{"google_pubsub_topic", "pubsub.tf,events.tf"},
		{"google_pubsub_subscription", "pubsub.tf,events.tf"},
		{"google_cloud_run_v2_service", "functions.tf"},
		{"google_artifact_registry_repository", "source.tf"},
		{"google_storage_bucket_object", "source.tf,config.tf"},
		{"google_storage_bucket", "source.tf,config.tf"},
		{"archive_file", "source.tf"},
		{"google_cloud_scheduler_", "scheduler.tf"},
		{"google_logging_metric", "monitoring.tf"},
		{"google_monitoring_", "monitoring.tf"},
		{"google_secret_manager_", "secrets.tf"},
		{"terraform_data", "registries.tf"},
	}
	for _, r := range rules {
		if strings.Contains(typ, r.match) {
			return r.file
		}
	}
	return ""
}

func TestVariablesTypedDescribedValidated(t *testing.T) {
	f := parseTF(t, ".")
	for name, b := range f.variables {
		ty, ok := b.Body.Attributes["type"]
		if !ok {
			t.Errorf("variable %s has no type", name)
		}
		if d, ok := b.Body.Attributes["description"]; !ok {
			t.Errorf("variable %s has no description", name)
		} else if v, _ := d.Expr.Value(nil); v.IsKnown() && len(v.AsString()) < 20 {
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
}

func hclKeyword(a *hclsyntax.Attribute) string {
	if st, ok := a.Expr.(*hclsyntax.ScopeTraversalExpr); ok {
		return st.Traversal.RootName()
	}
	return ""
}

// sourceFiles is source_files.txt: the files the functions are built from.
func sourceFiles(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("source_files.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

var update = os.Getenv("SPECSYNC_UPDATE_SOURCE_FILES") != ""

// TestSourceFiles: source_files.txt lists exactly what the build of the
// root package needs (go.mod, go.sum, and the Go and embedded files of
// every package of this module it imports), and every listed file is
// tracked by git, so that the upload never carries a file of one checkout
// only. SPECSYNC_UPDATE_SOURCE_FILES=1 rewrites it.
func TestSourceFiles(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if eq .Module.Path "github.com/specsync/specsync"}}{{$d:=.Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}`, "..").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, _ := filepath.Abs("..")
	want := []string{"go.mod", "go.sum"}
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			rel, err := filepath.Rel(root, l)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, filepath.ToSlash(rel))
		}
	}
	sort.Strings(want)
	if update {
		text := "# The files the functions are built from (terraform/source.tf uploads exactly these).\n" +
			"# Generated: SPECSYNC_UPDATE_SOURCE_FILES=1 go test ./terraform -run TestSourceFiles\n" + strings.Join(want, "\n") + "\n"
		if err := os.WriteFile("source_files.txt", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := sourceFiles(t); !reflect.DeepEqual(got, want) {
		t.Errorf("source_files.txt is not what the build needs (%s); regenerate it: SPECSYNC_UPDATE_SOURCE_FILES=1 go test ./terraform -run TestSourceFiles", diffStrings(got, want))
	}
	// Tracked by git, where there is a repository (a release tarball has none).
	if _, err := os.Stat("../.git"); err == nil {
		tracked, err := exec.Command("git", "-C", "..", "ls-files").Output()
		if err != nil {
			t.Fatalf("git ls-files: %v", err)
		}
		in := map[string]bool{}
		for _, l := range strings.Split(string(tracked), "\n") {
			in[l] = true
		}
		for _, f := range want {
			if !in[f] {
				t.Errorf("%s is built into the functions but not tracked by git: commit it, or the deployed build differs from the repository's", f)
			}
		}
	}
}

// TestNoTerraformWorkingState: no .terraform directory and no dependency
// lock file is tracked. A root module's lock holds the checksums of the
// providers its author installed: one written here names the providers
// built for the offline mirror, and a team that copied the example would
// have its init refuse the registry's own builds.
func TestNoTerraformWorkingState(t *testing.T) {
	if _, err := os.Stat("../.git"); err != nil {
		t.Skip("not a git checkout (a release tarball): nothing is tracked")
	}
	tracked, err := exec.Command("git", "-C", "..", "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(string(tracked), "\n") {
		if strings.Contains("/"+f, "/.terraform/") || filepath.Base(f) == ".terraform.lock.hcl" {
			t.Errorf("%s is terraform's working state of one checkout: remove it from git (.gitignore lists it)", f)
		}
	}
}

func diffStrings(got, want []string) string {
	g, w := map[string]bool{}, map[string]bool{}
	for _, s := range got {
		g[s] = true
	}
	for _, s := range want {
		w[s] = true
	}
	var extra, missing []string
	for s := range g {
		if !w[s] {
			extra = append(extra, s)
		}
	}
	for s := range w {
		if !g[s] {
			missing = append(missing, s)
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	return "listed but not needed: " + strings.Join(extra, ", ") + "; needed but not listed: " + strings.Join(missing, ", ")
}

// The deployment guide walks through what terraform needs, with the
// variables and outputs it really has.
func TestDeployGuide(t *testing.T) {
	guide, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(guide)
	f := parseTF(t, ".")
	mustMention := []string{"examples/deploy", "terraform init", "terraform apply", "?ref=", "gcloud secrets versions add",
		"registries_file", "registry_env", "/bootstrap", "last_operation", "Prerequisites", "Cost",
		"Register the broker with a platform", "Add a registry", "Trigger a bootstrap by hand",
		"openssl rand", "| sha256sum", "broker_password_sha256", "admin_token_sha256", "Rotating",
		"public_access", "invoker_iam_disabled", "artifact_registry_events", "create_firestore_database", "bootstrap_invokers",
		"make deploy-check"}
	for _, name := range []string{"broker_url", "bootstrap_url", "secrets", "hook_urls"} {
		if _, ok := f.outputs[name]; !ok {
			t.Errorf("the module has no output %s", name)
		}
		mustMention = append(mustMention, name)
	}
	for _, s := range mustMention {
		if !strings.Contains(section, s) {
			t.Errorf("docs/deploy.md does not mention %q", s)
		}
	}
	for _, v := range regexp.MustCompile("`([a-z_]+)\\s*=").FindAllStringSubmatch(section, -1) {
		if _, ok := f.variables[v[1]]; !ok && v[1] != "source" {
			t.Errorf("docs/deploy.md sets %s, which is not a variable", v[1])
		}
	}
	// And every variable its hcl snippets set: terraform.tfvars lines at
	// the left margin, or a module block's first level (an indented key
	// deeper down is part of a value, a view's name).
	set := 0
	for _, block := range regexp.MustCompile("(?s)```hcl\n(.*?)```").FindAllStringSubmatch(section, -1) {
		key := regexp.MustCompile(`(?m)^([a-z_]+)\s*=`)
		if strings.Contains(block[1], `module "specsync"`) {
			key = regexp.MustCompile(`(?m)^  ([a-z_]+)\s*=`)
		}
		for _, v := range key.FindAllStringSubmatch(block[1], -1) {
			if v[1] == "source" {
				continue
			}
			set++
			if _, ok := f.variables[v[1]]; !ok {
				t.Errorf("an hcl snippet of docs/deploy.md sets %s, which is not a variable of the module", v[1])
			}
		}
	}
	if set < 5 {
		t.Errorf("found %d variables set in docs/deploy.md's hcl blocks; the pattern is broken", set)
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
	components := map[string]string{"LoadBootstrap": "bootstrap", "LoadReconcile": "reconcile", "LoadCatalog": "catalog", "LoadHooks": "hooks"}
	all := []string{"bootstrap", "catalog", "hooks", "reconcile"}
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
				fns = append(fns, all...)
			case "bootstrap", "reconcile", "catalog", "hooks":
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

// loaders are the settings loaders, by name; a loader the code calls that is
// not here fails the deploy check.
var loaders = map[string]func(settings.Lookup) error{
	"LoadBootstrap": func(l settings.Lookup) error { _, err := settings.LoadBootstrap(l); return err },
	"LoadHooks":     func(l settings.Lookup) error { _, err := settings.LoadHooks(l); return err },
	"LoadReconcile": func(l settings.Lookup) error { _, err := settings.LoadReconcile(l); return err },
	"LoadCatalog":   func(l settings.Lookup) error { _, err := settings.LoadCatalog(l); return err },
}

// keysRead is the exact set of environment variables a loader asks for.
func keysRead(load func(settings.Lookup) error) map[string]bool {
	keys := map[string]bool{}
	_ = load(func(k string) (string, bool) { keys[k] = true; return "", false })
	return keys
}

// secretSettings are the settings that hold secrets; they must come from
// Secret Manager, never from a plain environment variable. Each may also be
// given as its SHA-256 digest (KEY_SHA256) or a file (KEY_FILE) where the
// code reads those.
var secretSettings = map[string]bool{"SPECSYNC_ADMIN_TOKEN": true, "SPECSYNC_BROKER_PASSWORD": true}

// testCredentials are the credentials whose digests the tests give the
// module.
var testCredentials = map[string]string{
	"SPECSYNC_ADMIN_TOKEN":     "test-admin-token-0123456789abcdef",
	"SPECSYNC_BROKER_PASSWORD": "test-broker-password-0123456789ab",
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func contains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// template is an attribute's expression as written: its literal parts and
// its references, "${type.name[\"key\"].attr}", in order. For values the
// plan leaves to apply time (a service's URL and what is built from it),
// the module's source is what can be checked.
func template(t *testing.T, f tfFiles, resourceAddr string, path ...string) string {
	t.Helper()
	for _, body := range f.bodies {
		for _, b := range body.Blocks {
			var addr string
			switch b.Type {
			case "resource":
				addr = b.Labels[0] + "." + b.Labels[1]
			case "output":
				addr = "output." + b.Labels[0]
			case "locals":
				if name, ok := strings.CutPrefix(resourceAddr, "local."); ok && len(path) == 0 {
					if a, ok := b.Body.Attributes[name]; ok {
						return renderExpr(a.Expr)
					}
				}
				continue
			default:
				continue
			}
			if addr != resourceAddr {
				continue
			}
			cur := b.Body
			for i, p := range path {
				if i == len(path)-1 {
					a, ok := cur.Attributes[p]
					if !ok {
						t.Fatalf("%s has no %s", resourceAddr, strings.Join(path, "."))
					}
					return renderExpr(a.Expr)
				}
				var next *hclsyntax.Body
				for _, nb := range cur.Blocks {
					if nb.Type == p {
						next = nb.Body
					}
				}
				if next == nil {
					t.Fatalf("%s has no block %s", resourceAddr, strings.Join(path[:i+1], "."))
				}
				cur = next
			}
		}
	}
	t.Fatalf("no %s in the module", resourceAddr)
	return ""
}

func renderExpr(e hclsyntax.Expression) string {
	switch e := e.(type) {
	case *hclsyntax.TemplateExpr:
		var sb strings.Builder
		for _, p := range e.Parts {
			if lit, ok := p.(*hclsyntax.LiteralValueExpr); ok && lit.Val.Type().FriendlyName() == "string" {
				sb.WriteString(lit.Val.AsString())
				continue
			}
			sb.WriteString("${" + renderExpr(p) + "}")
		}
		return sb.String()
	case *hclsyntax.TemplateWrapExpr:
		return "${" + renderExpr(e.Wrapped) + "}"
	case *hclsyntax.ScopeTraversalExpr:
		return renderTraversal(e.Traversal)
	case *hclsyntax.RelativeTraversalExpr:
		return renderExpr(e.Source) + renderTraversal(e.Traversal)
	case *hclsyntax.IndexExpr:
		return renderExpr(e.Collection) + "[" + renderExpr(e.Key) + "]"
	case *hclsyntax.FunctionCallExpr:
		var args []string
		for _, a := range e.Args {
			args = append(args, renderExpr(a))
		}
		return e.Name + "(" + strings.Join(args, ", ") + ")"
	case *hclsyntax.ObjectConsExpr:
		var items []string
		for _, it := range e.Items {
			items = append(items, renderExpr(it.KeyExpr)+" = "+renderExpr(it.ValueExpr))
		}
		return "{" + strings.Join(items, "; ") + "}"
	case *hclsyntax.ObjectConsKeyExpr:
		if tr, ok := e.Wrapped.(*hclsyntax.ScopeTraversalExpr); ok && !e.ForceNonLiteral {
			return renderTraversal(tr.Traversal)
		}
		return renderExpr(e.Wrapped)
	case *hclsyntax.ForExpr:
		return "for " + e.ValVar + " : " + renderExpr(e.ValExpr)
	case *hclsyntax.LiteralValueExpr:
		if e.Val.Type().FriendlyName() == "string" {
			return strconv.Quote(e.Val.AsString())
		}
	}
	return "?"
}

func renderTraversal(tr hcl.Traversal) string {
	var sb strings.Builder
	for _, s := range tr {
		switch s := s.(type) {
		case hcl.TraverseRoot:
			sb.WriteString(s.Name)
		case hcl.TraverseAttr:
			sb.WriteString("." + s.Name)
		case hcl.TraverseIndex:
			if s.Key.Type().FriendlyName() == "string" {
				sb.WriteString("[" + strconv.Quote(s.Key.AsString()) + "]")
			} else {
				sb.WriteString("[?]")
			}
		}
	}
	return sb.String()
}

// localStrings is a local that is a literal list of strings.
func localStrings(t *testing.T, f tfFiles, name string) []string {
	t.Helper()
	for _, body := range f.bodies {
		for _, b := range body.Blocks {
			if b.Type != "locals" {
				continue
			}
			if a, ok := b.Body.Attributes[name]; ok {
				expr := a.Expr
				// toset([...]) and tolist([...]): the list inside.
				if call, ok := expr.(*hclsyntax.FunctionCallExpr); ok && (call.Name == "toset" || call.Name == "tolist") && len(call.Args) == 1 {
					expr = call.Args[0]
				}
				v, diags := expr.Value(nil)
				if diags.HasErrors() || !v.CanIterateElements() {
					t.Fatalf("local.%s is not a literal list: %s", name, diags)
				}
				var out []string
				for it := v.ElementIterator(); it.Next(); {
					_, e := it.Element()
					out = append(out, e.AsString())
				}
				return out
			}
		}
	}
	t.Fatalf("no local.%s", name)
	return nil
}

// Every API a resource needs is enabled, and every resource waits for them
// (through depends_on, or what it references): on a new project a
// resource created before its API is on fails the apply.
func TestAPIs(t *testing.T) {
	f := parseTF(t, ".")
	needs := []struct {
		prefix string
		apis   []string
	}{
		{"google_cloud_run_v2_", []string{"run", "cloudbuild", "artifactregistry", "logging"}},
		{"google_firestore_", []string{"firestore"}},
		{"google_pubsub_", []string{"pubsub"}},
		{"google_secret_manager_", []string{"secretmanager"}},
		{"google_cloud_scheduler_", []string{"cloudscheduler"}},
		{"google_storage_", []string{"storage"}},
		{"google_service_account", []string{"iam"}},
		{"google_project_iam_", []string{"cloudresourcemanager"}},
		{"google_project", []string{"cloudresourcemanager"}},
		{"google_artifact_registry_", []string{"artifactregistry"}},
		{"google_logging_", []string{"logging"}},
		{"google_monitoring_", []string{"monitoring"}},
	}
	enabled := map[string]bool{}
	for _, api := range localStrings(t, f, "apis") {
		enabled[strings.TrimSuffix(api, ".googleapis.com")] = true
	}
	// No resource needs these, the functions do: their spans go to the
	// Telemetry API (pkg/telemetry), which refuses them while it is off,
	// and Cloud Trace keeps and shows them.
	host, _, _ := strings.Cut(telemetry.TelemetryAPI, ":")
	for _, api := range []string{strings.TrimSuffix(host, ".googleapis.com"), "cloudtrace"} {
		if !enabled[api] {
			t.Errorf("the functions' spans need %s.googleapis.com, which is not enabled", api)
		}
	}
	deps := dependencies(f)
	for addr := range f.resources {
		typ := strings.Split(strings.TrimPrefix(addr, "data."), ".")[0]
		if !strings.HasPrefix(typ, "google_") || typ == "google_project_service" {
			continue
		}
		known := false
		for _, n := range needs {
			if strings.HasPrefix(typ, n.prefix) {
				known = true
				for _, api := range n.apis {
					if !enabled[api] {
						t.Errorf("%s needs %s.googleapis.com, which is not enabled", addr, api)
					}
				}
				break
			}
		}
		if !known {
			t.Errorf("%s: no API known for %s; add it to this test", addr, typ)
		}
		// Another project's topic is read at plan time, on purpose: its
		// API is that project's, not the module's to enable.
		if addr == "data.google_pubsub_topic.gcr_other" {
			continue
		}
		if !reaches(deps, addr, "google_project_service.enabled") {
			t.Errorf("%s does not wait for the APIs (directly or through what it references)", addr)
		}
	}
}

// dependencies maps each resource, data source and local of the module to
// the resources, data sources and locals its body references.
func dependencies(f tfFiles) map[string][]string {
	out := map[string][]string{}
	refs := func(body hclsyntax.Node) []string {
		var found []string
		hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
			if st, ok := n.(*hclsyntax.ScopeTraversalExpr); ok {
				found = append(found, nodeOf(st.Traversal))
			}
			return nil
		})
		return found
	}
	for _, body := range f.bodies {
		for _, b := range body.Blocks {
			switch b.Type {
			case "resource":
				out[b.Labels[0]+"."+b.Labels[1]] = refs(b.Body)
			case "data":
				out["data."+b.Labels[0]+"."+b.Labels[1]] = refs(b.Body)
			case "locals":
				for name, a := range b.Body.Attributes {
					out["local."+name] = refs(a.Expr)
				}
			}
		}
	}
	return out
}

// nodeOf is what a traversal refers to: "local.x", "data.t.n", "t.n", or
// its root (var, each, ...).
func nodeOf(tr hcl.Traversal) string {
	parts := []string{tr.RootName()}
	for _, s := range tr[1:] {
		a, ok := s.(hcl.TraverseAttr)
		if !ok {
			break
		}
		parts = append(parts, a.Name)
	}
	switch {
	case parts[0] == "local" && len(parts) > 1:
		return "local." + parts[1]
	case parts[0] == "data" && len(parts) > 2:
		return "data." + parts[1] + "." + parts[2]
	case strings.HasPrefix(parts[0], "google_") || parts[0] == "terraform_data":
		if len(parts) > 1 {
			return parts[0] + "." + parts[1]
		}
	}
	return parts[0]
}

func reaches(deps map[string][]string, from, to string) bool {
	seen := map[string]bool{}
	var walk func(n string) bool
	walk = func(n string) bool {
		if n == to {
			return true
		}
		if seen[n] {
			return false
		}
		seen[n] = true
		for _, d := range deps[n] {
			if walk(d) {
				return true
			}
		}
		return false
	}
	return walk(from)
}
