//go:build deploycheck

package terraform_test

// The deploy check's harness: the module planned by the real terraform
// with the real hashicorp/google and hashicorp/archive providers, offline
// (a filesystem mirror of the providers, a placeholder access token,
// `plan -refresh=false`), for root modules a team would write (scenarios_test.go),
// each plan read back as JSON (`terraform show -json`). The provider checks
// every resource against its real schema and computes what it would
// create; the tests then read the planned resources as instances with
// attributes and nested blocks, the way the code's side is read in
// gocode_test.go, and compare the two.
//
// Needs terraform (>= 1.11) on PATH (or SPECSYNC_TERRAFORM, which `make
// deploy-check` sets from `scripts/setup terraform`) and a directory of
// provider archives with their `mirror` script (SPECSYNC_TF_PROVIDERS; by
// default the workplace's shared folder beside the checkout has one, and
// CI gets a copy of it there). Without them the tests fail, never skip.
// Scenarios whose plan reads Pub/Sub topics read them from the Pub/Sub
// emulator (PUBSUB_EMULATOR_HOST): run through `make deploy-check`.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// tools is how terraform runs here: the binary, and the environment that
// makes it install the providers from the offline mirror.
type tools struct {
	terraform string
	env       []string
	err       error
	// lock is the dependency lock file the warm-up init wrote; every
	// scenario starts with it. Terraform takes a provider from the plugin
	// cache only when a lock entry's checksum matches it: without one,
	// init removes the cache entry and installs it again, and two
	// scenarios doing that at once fail with "file exists" (the cache has
	// no locking).
	lock []byte
	// cached are the cache's provider directories as the warm-up left
	// them: an init that replaced one raced the others.
	cached map[string]os.FileInfo
}

var (
	toolsOnce sync.Once
	tf        tools
)

func terraformTools(t *testing.T) tools {
	t.Helper()
	toolsOnce.Do(func() { tf = findTools() })
	if tf.err != nil {
		t.Fatalf("the deploy check cannot run: %v", tf.err)
	}
	return tf
}

func findTools() tools {
	bin := os.Getenv("SPECSYNC_TERRAFORM")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("terraform"); err != nil {
			return tools{err: fmt.Errorf("terraform is not on PATH: run `scripts/setup terraform`, or set SPECSYNC_TERRAFORM")}
		}
	}
	providers := os.Getenv("SPECSYNC_TF_PROVIDERS")
	if providers == "" {
		// The workplace's shared folder, beside the checkout.
		repo, _ := filepath.Abs("..")
		providers = filepath.Join(filepath.Dir(repo), "shared", "terraform")
	}
	if _, err := os.Stat(filepath.Join(providers, "mirror")); err != nil {
		return tools{err: fmt.Errorf("no offline providers at %s (%v): set SPECSYNC_TF_PROVIDERS to a directory with the provider archives and their mirror script", providers, err)}
	}
	// The mirror (the providers unpacked) outlives the test run: unpacking
	// them takes longer than a plan.
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "specsync", "terraform-mirror")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return tools{err: err}
	}
	out, err := exec.Command(filepath.Join(providers, "mirror"), dir).Output()
	if err != nil {
		return tools{err: fmt.Errorf("%s/mirror %s: %v", providers, dir, err)}
	}
	// The plugin cache is this run's own, and filled once before the
	// scenarios' inits run in parallel: terraform's plugin cache is not
	// safe for concurrent writers, but inits that find a provider there
	// with a matching lock entry only link it.
	pluginCache, err := os.MkdirTemp("", "specsync-plugin-cache-")
	if err != nil {
		return tools{err: err}
	}
	planDirs.dirs = append(planDirs.dirs, pluginCache)
	tl := tools{terraform: bin, env: append(os.Environ(),
		"TF_CLI_CONFIG_FILE="+strings.TrimSpace(string(out)),
		"TF_PLUGIN_CACHE_DIR="+pluginCache,
		"TF_IN_AUTOMATION=1",
		"CHECKPOINT_DISABLE=1",
		// The plan is offline: the provider needs a token, never uses it
		// (data sources it reads come from the Pub/Sub emulator).
		"GOOGLE_OAUTH_ACCESS_TOKEN=offline-placeholder",
		"GOOGLE_PROJECT=",
	)}
	warm, err := os.MkdirTemp("", "specsync-plugin-warm-")
	if err != nil {
		return tools{err: err}
	}
	defer os.RemoveAll(warm)
	versions, err := os.ReadFile("versions.tf")
	if err != nil {
		return tools{err: err}
	}
	if err := os.WriteFile(filepath.Join(warm, "versions.tf"), versions, 0o644); err != nil {
		return tools{err: err}
	}
	if out, err := tl.run(warm, "init", "-backend=false", "-input=false", "-no-color"); err != nil {
		return tools{err: fmt.Errorf("terraform init with the offline mirror: %v\n%s", err, out)}
	}
	if tl.lock, err = os.ReadFile(filepath.Join(warm, ".terraform.lock.hcl")); err != nil {
		return tools{err: fmt.Errorf("the warm-up init wrote no lock file: %v", err)}
	}
	if tl.cached, err = cacheEntries(pluginCache); err != nil {
		return tools{err: err}
	}
	return tl
}

// cacheEntries are the provider directories of a plugin cache
// (HOST/NAMESPACE/TYPE/VERSION/PLATFORM), by path.
func cacheEntries(cache string) (map[string]os.FileInfo, error) {
	dirs, err := filepath.Glob(filepath.Join(cache, "*", "*", "*", "*", "*"))
	if err != nil || len(dirs) == 0 {
		return nil, fmt.Errorf("the warm-up init cached no provider in %s (%v)", cache, err)
	}
	entries := map[string]os.FileInfo{}
	for _, d := range dirs {
		// Lstat: an entry installed from the unpacked mirror is a symbolic
		// link to it, and a replaced one is a new link to the same place.
		fi, err := os.Lstat(d)
		if err != nil {
			return nil, err
		}
		entries[d] = fi
	}
	return entries, nil
}

// cacheUntouched says which cache entry an init replaced, if any.
func (tl tools) cacheUntouched() error {
	for d, before := range tl.cached {
		now, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("terraform init removed the plugin cache entry %s (%v): scenarios' inits would race on it; each must start with the warm-up's lock file", d, err)
		}
		if !os.SameFile(before, now) || !now.ModTime().Equal(before.ModTime()) {
			return fmt.Errorf("terraform init replaced the plugin cache entry %s: scenarios' inits would race on it; each must start with the warm-up's lock file", d)
		}
	}
	return nil
}

// planDirs are the scenarios' root modules, removed when the run ends.
var planDirs struct {
	sync.Mutex
	dirs []string
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range planDirs.dirs {
		if os.Getenv("SPECSYNC_KEEP_PLANS") != "" {
			fmt.Println("kept", d)
			continue
		}
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// run runs terraform in dir and returns its combined output.
func (tl tools) run(dir string, args ...string) (string, error) {
	cmd := exec.Command(tl.terraform, args...)
	cmd.Dir = dir
	cmd.Env = tl.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// scenario is a root module that calls the module.
type scenario struct {
	name string
	// shipped: examples/deploy as shipped (its main.tf, registries.yaml
	// and terraform.tfvars), with the two digests every user generates.
	shipped bool
	// Otherwise a root module of the test's: the module block's arguments
	// (HCL, besides source, project_id and the digests) and files beside
	// main.tf (registries.yaml, spec directories).
	args  string
	files map[string]string
	// outside: files written to a directory of their own, away from the
	// root module and the repository; "$OUTSIDE" in args names it.
	outside map[string]string
	// topics: gcr topics created in the Pub/Sub emulator before the plan
	// ("PROJECT/TOPIC"); with any, the provider reads Pub/Sub from it.
	topics []string
	// emulator: the plan reads Pub/Sub from the emulator even with no
	// topic to create (a topic that must be missing).
	emulator bool
	// overrideDigests: args set the two digests themselves.
	overrideDigests bool
	// root is more of the root module (variables of its own); env, more
	// of terraform's environment (TF_VAR_... for those).
	root string
	env  []string
}

// planned is one scenario's plan, computed once per test run.
type planned struct {
	once sync.Once
	m    *module
	out  string
	err  error
}

var (
	plansMu sync.Mutex
	plans   = map[string]*planned{}
)

// planOf plans a scenario (once per run, whichever test asks first) and
// returns the module as planned; a plan that fails fails the test.
func planOf(t *testing.T, sc scenario) *module {
	t.Helper()
	p := planFor(t, sc)
	if p.err != nil {
		t.Fatalf("scenario %s does not plan: %v\n%s", sc.name, p.err, p.out)
	}
	return p.m
}

// planFailure plans a scenario that must not plan, and returns what
// terraform said.
func planFailure(t *testing.T, sc scenario) string {
	t.Helper()
	p := planFor(t, sc)
	if p.err == nil {
		t.Fatalf("scenario %s plans; it must fail", sc.name)
	}
	return p.out
}

func planFor(t *testing.T, sc scenario) *planned {
	t.Helper()
	tl := terraformTools(t)
	plansMu.Lock()
	p, ok := plans[sc.name]
	if !ok {
		p = &planned{}
		plans[sc.name] = p
	}
	plansMu.Unlock()
	p.once.Do(func() { p.m, p.out, p.err = plan(tl, sc) })
	return p
}

// The digests of the test's credentials (secrets_test.go).
func testDigests() (broker, admin string) {
	return sha256Hex(testCredentials["SPECSYNC_BROKER_PASSWORD"]), strings.ToUpper(sha256Hex(testCredentials["SPECSYNC_ADMIN_TOKEN"]))
}

func plan(tl tools, sc scenario) (*module, string, error) {
	dir, err := os.MkdirTemp("", "specsync-plan-"+sc.name+"-")
	if err != nil {
		return nil, "", err
	}
	// Kept until the run ends: tests read what the plan wrote (the source
	// archive).
	planDirs.Lock()
	planDirs.dirs = append(planDirs.dirs, dir)
	planDirs.Unlock()
	outside, err := os.MkdirTemp("", "specsync-outside-"+sc.name+"-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(outside)
	for name, body := range sc.outside {
		if err := writeFile(filepath.Join(outside, name), body); err != nil {
			return nil, "", err
		}
	}
	moduleDir, _ := filepath.Abs(".")
	// A relative source: terraform uses a local module in place (with the
	// repository around it), as a Git source's subdirectory is.
	rel, err := filepath.Rel(dir, moduleDir)
	if err != nil {
		return nil, "", err
	}
	broker, admin := testDigests()
	var providerExtra string
	if len(sc.topics) > 0 || sc.emulator {
		host := os.Getenv("PUBSUB_EMULATOR_HOST")
		if host == "" {
			return nil, "", fmt.Errorf("scenario %s reads Pub/Sub topics from the emulator, and PUBSUB_EMULATOR_HOST is not set: run through `make deploy-check`", sc.name)
		}
		for _, tp := range sc.topics {
			if err := createTopic(host, tp); err != nil {
				return nil, "", err
			}
		}
		providerExtra = fmt.Sprintf("  pubsub_custom_endpoint = \"http://%s/v1/\"\n", host)
	}
	// Every scenario exports the module's outputs for the tests.
	export := "output \"specsync\" {\n  value = module.specsync\n}\n"
	var args []string
	if sc.shipped {
		src, _ := filepath.Abs("../examples/deploy")
		for _, f := range []string{"main.tf", "registries.yaml", "terraform.tfvars"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				return nil, "", err
			}
			if err := writeFile(filepath.Join(dir, f), string(b)); err != nil {
				return nil, "", err
			}
		}
		// Override files (terraform's own mechanism): the state stays
		// local, the module is this checkout's.
		override := fmt.Sprintf("terraform {\n  backend \"local\" {}\n}\n\nmodule \"specsync\" {\n  source = %q\n}\n\nprovider \"google\" {\n%s}\n", rel, providerExtra)
		if err := writeFile(filepath.Join(dir, "specsync_override.tf"), override); err != nil {
			return nil, "", err
		}
		if err := writeFile(filepath.Join(dir, "specsync_test_outputs.tf"), export); err != nil {
			return nil, "", err
		}
		args = []string{"-var", "broker_password_sha256=" + broker, "-var", "admin_token_sha256=" + admin}
	} else {
		for name, body := range sc.files {
			if err := writeFile(filepath.Join(dir, name), body); err != nil {
				return nil, "", err
			}
		}
		digests := fmt.Sprintf("  broker_password_sha256 = %q\n  admin_token_sha256     = %q\n", broker, admin)
		if sc.overrideDigests {
			digests = ""
		}
		main := fmt.Sprintf(`terraform {
  backend "local" {}
}

provider "google" {
  project = %q
  region  = "europe-west1"
%s}

module "specsync" {
  source     = %q
  project_id = %q
%s%s
}

%s
%s`, testProject, providerExtra, rel, testProject, digests, strings.ReplaceAll(sc.args, "$OUTSIDE", outside), export, sc.root)
		if err := writeFile(filepath.Join(dir, "main.tf"), main); err != nil {
			return nil, "", err
		}
	}
	var log strings.Builder
	tl.env = append(append([]string(nil), tl.env...), sc.env...)
	step := func(args ...string) (string, error) {
		out, err := tl.run(dir, args...)
		fmt.Fprintf(&log, "$ terraform %s\n%s\n", strings.Join(args, " "), out)
		return out, err
	}
	// As a team's root module does, the scenario has a lock file (the
	// versions the offline mirror holds), so init links from the cache.
	if err := os.WriteFile(filepath.Join(dir, ".terraform.lock.hcl"), tl.lock, 0o644); err != nil {
		return nil, "", err
	}
	if _, err := step("init", "-input=false", "-no-color"); err != nil {
		return nil, log.String(), fmt.Errorf("terraform init: %w", err)
	}
	if err := tl.cacheUntouched(); err != nil {
		return nil, log.String(), err
	}
	if _, err := step("validate", "-no-color"); err != nil {
		return nil, log.String(), fmt.Errorf("terraform validate: %w", err)
	}
	planArgs := append([]string{"plan", "-refresh=false", "-input=false", "-lock=false", "-no-color", "-out=plan.bin"}, args...)
	if _, err := step(planArgs...); err != nil {
		return nil, log.String(), fmt.Errorf("terraform plan: %w", err)
	}
	js, err := tl.run(dir, "show", "-json", "plan.bin")
	if err != nil {
		return nil, log.String() + js, fmt.Errorf("terraform show -json: %w", err)
	}
	m, err := readPlan([]byte(js))
	if err != nil {
		return nil, log.String(), err
	}
	m.dir, m.json = dir, js
	return m, log.String(), nil
}

// flat is terraform's output with its line wrapping undone: every run of
// white space one space.
func flat(out string) string {
	return strings.Join(strings.Fields(out), " ")
}

func writeFile(path, body string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(body), 0o644)
}

// createTopic creates PROJECT/TOPIC in the Pub/Sub emulator (its REST
// surface, as the provider talks to it); one that exists is fine.
func createTopic(host, projectTopic string) error {
	project, topic, _ := strings.Cut(projectTopic, "/")
	req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://%s/v1/projects/%s/topics/%s", host, project, topic), strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("create topic %s in the emulator: %w", projectTopic, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("create topic %s in the emulator: %s", projectTopic, resp.Status)
	}
	return nil
}

// module is the module as planned: its resources (the module's own
// addresses, module.specsync. stripped) and its outputs.
type module struct {
	dir       string
	json      string               // terraform show -json
	resources map[string]*resource // "type.name" and "data.type.name"
	order     []string             // resource keys in plan order
	outVals   map[string]cty.Value // the module's outputs (known ones)
}

// resource is one resource or data block and its planned instances.
type resource struct {
	Mode, Type, Name string // Mode is "resource" or "data"
	Instances        map[string]*instance
}

func (r *resource) key() string {
	if r.Mode == "data" {
		return "data." + r.Type + "." + r.Name
	}
	return r.Type + "." + r.Name
}

// instance is one planned instance: its known attributes (unknown ones,
// computed at apply, read as unknown values), its nested blocks, and the
// action planned for it.
type instance struct {
	Res     *resource
	Key     string
	Actions []string
	Attrs   map[string]cty.Value
	Blocks  map[string][]*block
}

func (i *instance) addr() string {
	if i.Key == "" {
		return i.Res.key()
	}
	return fmt.Sprintf("%s[%q]", i.Res.key(), i.Key)
}

// block is a planned nested block.
type block struct {
	Attrs  map[string]cty.Value
	Blocks map[string][]*block
}

func (b *block) str(name string) string    { return asString(b.Attrs[name]) }
func (i *instance) str(name string) string { return asString(i.Attrs[name]) }

func (b *block) one(name string) *block {
	if bs := b.Blocks[name]; len(bs) == 1 {
		return bs[0]
	}
	return nil
}

func (i *instance) one(name string) *block {
	if bs := i.Blocks[name]; len(bs) == 1 {
		return bs[0]
	}
	return nil
}

// unknown reports whether the plan leaves an attribute to apply time.
func (i *instance) unknown(name string) bool {
	v, ok := i.Attrs[name]
	return ok && !v.IsKnown()
}

func asString(v cty.Value) string {
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		if v != cty.NilVal && v.IsKnown() && !v.IsNull() && (v.Type() == cty.Number || v.Type() == cty.Bool) {
			s, _ := ctyjson.Marshal(v, v.Type())
			return string(s)
		}
		return ""
	}
	return v.AsString()
}

func stringMap(v cty.Value) map[string]string {
	out := map[string]string{}
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || !v.CanIterateElements() {
		return out
	}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		out[asString(k)] = asString(e)
	}
	return out
}

// readPlan reads `terraform show -json` of a plan.
func readPlan(js []byte) (*module, error) {
	var p struct {
		ResourceChanges []struct {
			ModuleAddress    string `json:"module_address"`
			Mode, Type, Name string
			Index            any
			Change           struct {
				Actions      []string
				After        json.RawMessage
				AfterUnknown json.RawMessage `json:"after_unknown"`
			}
		} `json:"resource_changes"`
		OutputChanges map[string]struct {
			After        json.RawMessage
			AfterUnknown json.RawMessage `json:"after_unknown"`
		} `json:"output_changes"`
	}
	if err := json.Unmarshal(js, &p); err != nil {
		return nil, fmt.Errorf("read the plan: %w", err)
	}
	m := &module{resources: map[string]*resource{}, outVals: map[string]cty.Value{}}
	for _, rc := range p.ResourceChanges {
		if rc.ModuleAddress != "module.specsync" {
			continue
		}
		r := &resource{Mode: map[string]string{"managed": "resource", "data": "data"}[rc.Mode], Type: rc.Type, Name: rc.Name}
		if old, ok := m.resources[r.key()]; ok {
			r = old
		} else {
			r.Instances = map[string]*instance{}
			m.resources[r.key()] = r
			m.order = append(m.order, r.key())
		}
		key := ""
		switch ix := rc.Index.(type) {
		case string:
			key = ix
		case float64:
			key = fmt.Sprint(int(ix))
		}
		var after, unknown any
		_ = json.Unmarshal(rc.Change.After, &after)
		_ = json.Unmarshal(rc.Change.AfterUnknown, &unknown)
		inst := &instance{Res: r, Key: key, Actions: rc.Change.Actions}
		b := toBlock(after, unknown)
		inst.Attrs, inst.Blocks = b.Attrs, b.Blocks
		r.Instances[key] = inst
	}
	if o, ok := p.OutputChanges["specsync"]; ok {
		var after, unknown any
		_ = json.Unmarshal(o.After, &after)
		_ = json.Unmarshal(o.AfterUnknown, &unknown)
		m.outVals = toBlock(after, unknown).Attrs
	}
	return m, nil
}

// toBlock turns a planned object into attributes and nested blocks: a
// list of objects is a list of blocks (the plan does not say which is
// which; the module has no list-of-object attributes the tests read).
func toBlock(v, unknown any) *block {
	b := &block{Attrs: map[string]cty.Value{}, Blocks: map[string][]*block{}}
	obj, _ := v.(map[string]any)
	unk, _ := unknown.(map[string]any)
	for k, val := range obj {
		if list, ok := val.([]any); ok && len(list) > 0 {
			if _, isObj := list[0].(map[string]any); isObj {
				ul, _ := unk[k].([]any)
				for i, e := range list {
					var ue any
					if i < len(ul) {
						ue = ul[i]
					}
					b.Blocks[k] = append(b.Blocks[k], toBlock(e, ue))
				}
				continue
			}
		}
		b.Attrs[k] = ctyOf(val, unk[k])
	}
	for k, u := range unk {
		if _, done := b.Attrs[k]; done {
			continue
		}
		if u == true {
			b.Attrs[k] = cty.DynamicVal
		} else if um, ok := u.(map[string]any); ok && len(um) > 0 {
			b.Attrs[k] = ctyOf(map[string]any{}, um)
		} else if ul, ok := u.([]any); ok && len(b.Blocks[k]) == 0 && len(ul) > 0 {
			// Nested blocks known only at apply.
			for _, ue := range ul {
				b.Blocks[k] = append(b.Blocks[k], toBlock(map[string]any{}, ue))
			}
		}
	}
	return b
}

// ctyOf is a planned value with its unknown parts (after_unknown) as
// unknown values: a map whose values are known only at apply time has its
// keys in after_unknown alone.
func ctyOf(v, unknown any) cty.Value {
	if unknown == true {
		return cty.DynamicVal
	}
	switch v := v.(type) {
	case map[string]any:
		um, _ := unknown.(map[string]any)
		attrs := map[string]cty.Value{}
		for k, e := range v {
			attrs[k] = ctyOf(e, um[k])
		}
		for k, u := range um {
			if _, ok := attrs[k]; !ok {
				attrs[k] = ctyOf(nil, u)
			}
		}
		return cty.ObjectVal(attrs)
	case []any:
		ul, _ := unknown.([]any)
		var elems []cty.Value
		for i, e := range v {
			var u any
			if i < len(ul) {
				u = ul[i]
			}
			elems = append(elems, ctyOf(e, u))
		}
		return cty.TupleVal(elems)
	case nil:
		if um, ok := unknown.(map[string]any); ok {
			return ctyOf(map[string]any{}, um)
		}
		return cty.NullVal(cty.DynamicPseudoType)
	}
	raw, _ := json.Marshal(v)
	return jsonValue(raw)
}

func jsonValue(raw []byte) cty.Value {
	ty, err := ctyjson.ImpliedType(raw)
	if err != nil {
		return cty.NilVal
	}
	v, err := ctyjson.Unmarshal(raw, ty)
	if err != nil {
		return cty.NilVal
	}
	return v
}

// ofType lists every instance of a resource type, in plan order.
func (m *module) ofType(typ string) []*instance {
	var out []*instance
	for _, k := range m.order {
		r := m.resources[k]
		if r.Mode != "resource" || r.Type != typ {
			continue
		}
		keys := make([]string, 0, len(r.Instances))
		for key := range r.Instances {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			out = append(out, r.Instances[key])
		}
	}
	return out
}

// instance returns one instance: addr is "type.name" or "data.type.name".
func (m *module) instance(addr, key string) *instance {
	if r := m.resources[addr]; r != nil {
		return r.Instances[key]
	}
	return nil
}

func ctyFromGo(v any) cty.Value {
	raw, _ := json.Marshal(v)
	return jsonValue(raw)
}
