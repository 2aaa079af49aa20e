// Package config loads the registries file: which registries specsync
// reconciles, how to reach them and how carefully to delete. Everything is
// checked at load time; a config that loads builds every source.
//
// The functions read it through a Source (source.go): a file, or a config
// bundle (bundle.go: the file and its dir sources' spec files, as
// terraform writes them to Cloud Storage) that is read again when it
// changes.
//
// It knows the file and the sources (pkg/registry), nothing of the store
// or the cloud (a bundle's object is read by pkg/config/gcs), so the
// operator CLI's `config check` runs it offline; pkg/reconcile turns a
// loaded file into the registries a run reconciles (reconcile.FromConfig;
// reconcile.LoadRegistries, which classifies a bad file as invalid).
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"

	"sigs.k8s.io/yaml"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/verify/policy"
)

// File is the registries file.
type File struct {
	Registries []Registry `json:"registries"`
}

// Registry is one entry of the registries file.
type Registry struct {
	// Name identifies the registry: a DNS label (lowercase letters, digits,
	// hyphens, at most 63), unique in the file. Derived spec ids depend on
	// it, so renaming a registry re-identifies its specs without own ids.
	Name string `json:"name"`
	// Type is a registered kind of source (registry.Register: oci, http,
	// dir, dockerhub, ghcr, helm, git); the block of the same name configures
	// it.
	Type string `json:"type"`
	// Allow and Deny are regular expressions matched against the whole
	// entry name (repository path, index entry name, file name). Deny wins;
	// an empty Allow allows everything.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// MaxMarkShare is the largest share of the registry's active specs one
	// run may mark for deletion (unset: the reconcile's default, 0.5,
	// reconcile.DefaultMaxMarkShare); a run that would mark more
	// marks nothing. AllowMassDeletion turns the guard off, including the
	// always-on guard against an empty listing.
	MaxMarkShare      *float64 `json:"max_mark_share,omitempty"`
	AllowMassDeletion bool     `json:"allow_mass_deletion,omitempty"`

	// Hook, when set, gives the registry a webhook (hook.go).
	Hook *Hook `json:"hook,omitempty"`
	// Verify, when set, publishes only entries signed as it says
	// (pkg/verify/policy; checked in verify.go).
	Verify *policy.Policy `json:"verify,omitempty"`

	// Blocks are the source blocks the entry has, by type: the block of
	// each registered kind (registry.Register) the entry names, decoded
	// into that kind's block. A loaded file has exactly one, of Type.
	Blocks map[string]registry.Block `json:"-"`
}

// Block is the registry's source block: the one of its type.
func (r Registry) Block() registry.Block { return r.Blocks[r.Type] }

// registryFields is Registry without its methods, for decoding the
// fields every registry has.
type registryFields Registry

// UnmarshalJSON decodes the fields every registry has and the block of
// each registered kind, refusing unknown fields in both.
func (r *Registry) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var blocks map[string]registry.Block
	common := map[string]json.RawMessage{}
	for k, v := range raw {
		kind, ok := registry.LookupKind(k)
		if !ok {
			common[k] = v
			continue
		}
		if string(v) == "null" {
			continue // an empty block is no block
		}
		blk := kind.New()
		if err := decodeStrict(v, blk); err != nil {
			return err
		}
		if blocks == nil {
			blocks = map[string]registry.Block{}
		}
		blocks[k] = blk
	}
	c, err := json.Marshal(common)
	if err != nil {
		return err
	}
	var f registryFields
	if err := decodeStrict(c, &f); err != nil {
		return err
	}
	*r = Registry(f)
	r.Blocks = blocks
	return nil
}

// MarshalJSON writes the fields and the blocks.
func (r Registry) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(registryFields(r))
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, blk := range r.Blocks {
		if m[k], err = json.Marshal(blk); err != nil {
			return nil, err
		}
	}
	return json.Marshal(m)
}

func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// Duration is a time.Duration written as "30s", "2m".
type Duration = registry.Duration

var (
	envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// Load reads and checks a registries file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("registries file: %w", err)
	}
	return Parse(data, path, filepath.Dir(path))
}

// Config is a loaded, checked registries file with a source built for
// every registry.
type Config struct {
	File       File
	Registries []Built
}

// Built is one registry of a loaded file: its entry, and the source built
// from it.
type Built struct {
	Registry
	Source registry.Source
}

// Lookup returns the registry with that name.
func (c *Config) Lookup(name string) (Built, bool) {
	for _, r := range c.Registries {
		if r.Name == name {
			return r, true
		}
	}
	return Built{}, false
}

// Names lists the registry names in file order.
func (c *Config) Names() []string {
	out := make([]string, len(c.Registries))
	for i, r := range c.Registries {
		out[i] = r.Name
	}
	return out
}

// Parse checks a registries file's content. ${VAR} references are
// replaced by environment variables first (a missing one is an error);
// use them for hosts and URLs, and the *_env / *_file auth fields for
// secrets, which are read only when a registry is fetched.
func Parse(data []byte, source, baseDir string) (*Config, error) {
	return parse(data, source, localDirs(baseDir))
}

// dirs opens the directory of a dir source's path: the files and the
// name its refs start with (the directory on disk, the bundle's
// directory). Its errors name dir.path.
type dirs func(path string) (fsys fs.FS, root string, err error)

// localDirs opens dir sources' paths on disk, relative to baseDir (the
// registries file's directory).
func localDirs(baseDir string) dirs {
	return func(p string) (fs.FS, string, error) {
		abs := p
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(baseDir, abs)
		}
		if info, err := os.Stat(abs); err != nil || !info.IsDir() {
			return nil, "", fmt.Errorf("dir.path %q is not a readable directory", p)
		}
		return os.DirFS(abs), abs, nil
	}
}

// parse is Parse with dir sources read from dirs.
func parse(data []byte, source string, dirs dirs) (*Config, error) {
	fail := func(err error) (*Config, error) {
		return nil, fmt.Errorf("registries file %s: %w", source, err)
	}
	expanded, missing, err := expandEnv(data)
	if err != nil {
		return fail(err)
	}
	if len(missing) > 0 {
		var names []string
		for _, m := range missing {
			if !slices.Contains(names, m.Name) {
				names = append(names, m.Name)
			}
		}
		return fail(fmt.Errorf("environment variables not set: %s", strings.Join(names, ", ")))
	}
	var f File
	if err := yaml.UnmarshalStrict(expanded, &f); err != nil {
		return fail(err)
	}
	if len(f.Registries) == 0 {
		return fail(errors.New("registries: at least one registry is required"))
	}
	cfg := &Config{File: f}
	seen := map[string]int{}
	for i, r := range f.Registries {
		where := fmt.Sprintf("registries[%d]", i)
		if r.Name != "" {
			where += fmt.Sprintf(" (%s)", r.Name)
		}
		if !api.IsRegistryName(r.Name) {
			return fail(fmt.Errorf("%s: name %q must be a DNS label: lowercase letters, digits and hyphens, starting with a letter, at most 63", where, r.Name))
		}
		if j, dup := seen[r.Name]; dup {
			return fail(fmt.Errorf("%s: name %q is already used by registries[%d]", where, r.Name, j))
		}
		seen[r.Name] = i
		src, err := build(r, dirs)
		if err != nil {
			return fail(&registryError{where: where, errs: flatten(err)})
		}
		cfg.Registries = append(cfg.Registries, Built{Registry: r, Source: src})
	}
	return cfg, nil
}

// unsetRef is a ${VAR} reference to a variable the environment does not
// have, where the file has it.
type unsetRef struct {
	Name         string
	Line, Column int
}

// expandEnv replaces the ${VAR} references in the scalars of a YAML
// document with the environment's values (see parseExpanded) and returns
// it as YAML again, with the references it could not resolve.
func expandEnv(data []byte) ([]byte, []unsetRef, error) {
	doc, missing, err := parseExpanded(data)
	if err != nil {
		return nil, nil, err
	}
	if len(doc.Content) == 0 {
		return data, missing, nil
	}
	out, err := yaml3.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("expand environment variables: %w", err)
	}
	return out, missing, nil
}

// envMark stands in for a ${VAR} reference while the file is parsed: a
// plain word, so the reference may stand anywhere a value may, in block
// and flow style alike (a bare "${" would end a flow mapping).
var envMark = regexp.MustCompile(`__specsync_env_([0-9]+)__`)

// parseExpanded parses a registries file with its ${VAR} references
// replaced by the environment's values in the scalars (keys and values),
// never in comments: a comment that mentions a variable is no reference
// to it. A plain scalar is read again after the replacement (as if the
// value had been written there); a quoted one stays a string. It returns
// the references it could not resolve, where they are in the file; the
// tree keeps the file's lines.
func parseExpanded(data []byte) (*yaml3.Node, []unsetRef, error) {
	var names []string
	marked := envRef.ReplaceAllStringFunc(string(data), func(m string) string {
		names = append(names, envRef.FindStringSubmatch(m)[1])
		return fmt.Sprintf("__specsync_env_%d__", len(names)-1)
	})
	var doc yaml3.Node
	if err := yaml3.Unmarshal([]byte(marked), &doc); err != nil {
		return nil, nil, fmt.Errorf("not valid YAML: %w", err)
	}
	lines := strings.Split(string(data), "\n")
	var missing []unsetRef
	var walk func(n *yaml3.Node)
	walk = func(n *yaml3.Node) {
		if n.Kind == yaml3.ScalarNode && envMark.MatchString(n.Value) {
			n.Value = envMark.ReplaceAllStringFunc(n.Value, func(m string) string {
				k, _ := strconv.Atoi(envMark.FindStringSubmatch(m)[1])
				v, ok := os.LookupEnv(names[k])
				if !ok {
					u := unsetRef{Name: names[k], Line: n.Line, Column: n.Column}
					if n.Line-1 < len(lines) {
						if c := strings.Index(lines[n.Line-1], "${"+names[k]+"}"); c >= 0 {
							u.Column = c + 1
						}
					}
					missing = append(missing, u)
				}
				return v
			})
			if n.Style == 0 {
				n.Tag = plainTag(n.Value)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	return &doc, missing, nil
}

// build checks one registry's own settings and builds its source. It
// reports every problem it finds (errors.Join), each naming its field, so
// that `config check` can put each at its line; a check that needs
// another to pass (the block needs its type) runs only after it.
func build(r Registry, dirs dirs) (registry.Source, error) {
	var probs []error
	if r.MaxMarkShare != nil && (*r.MaxMarkShare <= 0 || *r.MaxMarkShare > 1) {
		probs = append(probs, fmt.Errorf("max_mark_share %v must be in (0, 1]", *r.MaxMarkShare))
	}
	if r.Hook != nil {
		if err := r.Hook.Validate(); err != nil {
			probs = append(probs, err)
		}
		if f := r.Hook.SecretFile; f != "" && !filepath.IsAbs(f) {
			probs = append(probs, relativeFile("hook.secret_file", f, "the hooks"))
		}
	}
	filter, err := registry.NewFilter(r.Allow, r.Deny)
	if err != nil {
		probs = append(probs, err)
	}
	types := registry.Types()
	kind, known := registry.LookupKind(r.Type)
	before := len(probs)
	switch {
	case len(r.Blocks) != 1:
		probs = append(probs, fmt.Errorf("exactly one of the %s blocks is required, found %d", joinLast(types, "and"), len(r.Blocks)))
	case r.Type == "":
		probs = append(probs, fmt.Errorf("type is required (%s)", joinLast(types, "or")))
	case !known:
		probs = append(probs, fmt.Errorf("type %q is not one of %s", r.Type, strings.Join(types, ", ")))
	case r.Block() == nil:
		probs = append(probs, fmt.Errorf("type %s needs %s %s block", r.Type, article(r.Type), r.Type))
	}
	if len(probs) > before || r.Block() == nil {
		return nil, errors.Join(probs...)
	}
	if err := checkVerify(r); err != nil {
		probs = append(probs, err)
	}
	probs = append(probs, relativeCredentialFiles(kind, r.Block())...)
	// A source names its block's fields in its errors ("oci.host ...",
	// "helm.url"), which config check locates: kept as they are.
	src, err := r.Block().Build(registry.BuildContext{Filter: filter, OpenDir: dirs, Verify: r.Verify})
	if err != nil {
		probs = append(probs, err)
	}
	if len(probs) > 0 {
		return nil, errors.Join(probs...)
	}
	return src, nil
}

// relativeCredentialFiles are the problems of a block's credential files
// (its kind's Credentials ending in _file) given relative: terraform
// mounts each secret file at its absolute path (registries.tf refuses a
// relative one at plan time), and the function has no directory a
// relative one would be read from.
func relativeCredentialFiles(k registry.Kind, b registry.Block) []error {
	raw, err := json.Marshal(b)
	if err != nil {
		return []error{err}
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return []error{err}
	}
	var probs []error
	for _, p := range k.Credentials {
		if !strings.HasSuffix(p, "_file") {
			continue
		}
		var v any = doc
		for _, part := range strings.Split(p, ".") {
			m, _ := v.(map[string]any)
			v = m[part]
		}
		if f, _ := v.(string); f != "" && !filepath.IsAbs(f) {
			probs = append(probs, relativeFile(k.Type+"."+p, f, "the reconcile"))
		}
	}
	return probs
}

func relativeFile(field, file, function string) error {
	return fmt.Errorf("%s %q must be an absolute path: a secret file is mounted at its path in %s function, and terraform refuses a relative one", field, file, function)
}

// plainTag is the tag YAML gives v written as a plain scalar: !!int for
// 50, !!bool for true, !!str for a host name.
func plainTag(v string) string {
	var n yaml3.Node
	if err := yaml3.Unmarshal([]byte(v), &n); err != nil || len(n.Content) != 1 || n.Content[0].Kind != yaml3.ScalarNode {
		return "!!str"
	}
	return n.Content[0].Tag
}

// article is "an" before a type spoken with a vowel first (oci, http),
// else "a".
func article(typ string) string {
	if typ != "" && (strings.ContainsRune("aeiou", rune(typ[0])) || strings.HasPrefix(typ, "http")) {
		return "an"
	}
	return "a"
}

// joinLast lists words as a sentence does: "a, b and c".
func joinLast(words []string, last string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + last + " " + words[len(words)-1]
}

// registryError is every problem of one registry: its text lists them
// ("registries[0] (a): x; y"), and Unwrap gives each, which `config
// check` reports at its own line.
type registryError struct {
	where string
	errs  []error
}

func (e *registryError) Error() string {
	msgs := make([]string, len(e.errs))
	for i, err := range e.errs {
		msgs[i] = err.Error()
	}
	return e.where + ": " + strings.Join(msgs, "; ")
}

func (e *registryError) Unwrap() []error { return e.errs }

// flatten is the errors err joins (errors.Join, at any depth), or err.
func flatten(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}
