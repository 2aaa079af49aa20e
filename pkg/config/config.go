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
	"time"

	yaml3 "go.yaml.in/yaml/v3"

	"sigs.k8s.io/yaml"

	"github.com/specsync/specsync/examples"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/registry"
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
	// Type is oci, http, dir, dockerhub, ghcr or helm; the block of the
	// same name configures it.
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

	OCI  *OCI  `json:"oci,omitempty"`
	HTTP *HTTP `json:"http,omitempty"`
	Dir  *Dir  `json:"dir,omitempty"`

	DockerHub *DockerHub `json:"dockerhub,omitempty"`
	GHCR      *GHCR      `json:"ghcr,omitempty"`
	Helm      *Helm      `json:"helm,omitempty"`
	// Hook, when set, gives the registry a webhook (hook.go).
	Hook *Hook `json:"hook,omitempty"`
}

// OCI configures an OCI Distribution registry.
type OCI struct {
	Host string `json:"host"`
	// Prefix scopes the registry to the repositories under a path of the
	// host (Artifact Registry: PROJECT/REPOSITORY); entry names,
	// repositories, allow and deny are relative to it.
	Prefix       string        `json:"prefix,omitempty"`
	Insecure     bool          `json:"insecure,omitempty"`
	Repositories []string      `json:"repositories,omitempty"`
	Tag          string        `json:"tag,omitempty"`
	PageSize     int           `json:"page_size,omitempty"`
	Concurrency  int           `json:"concurrency,omitempty"`
	Timeout      Duration      `json:"timeout,omitempty"`
	Auth         registry.Auth `json:"auth,omitempty"`
}

// HTTP configures an index document served over HTTP(S).
type HTTP struct {
	URL      string        `json:"url"`
	Timeout  Duration      `json:"timeout,omitempty"`
	MaxBytes int64         `json:"max_bytes,omitempty"`
	Auth     registry.Auth `json:"auth,omitempty"`
}

// Dir configures a directory of spec files.
type Dir struct {
	// Path is relative to the registries file's directory.
	Path string `json:"path,omitempty"`
	// Embedded serves the example registry compiled into the binary.
	Embedded bool `json:"embedded,omitempty"`
}

// DockerHub configures a Docker Hub namespace, listed through Docker
// Hub's API; its images are read as an OCI registry's are.
type DockerHub struct {
	// Namespace is the user or organization ("library": the official
	// images).
	Namespace   string   `json:"namespace"`
	Tag         string   `json:"tag,omitempty"`
	PageSize    int      `json:"page_size,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Timeout     Duration `json:"timeout,omitempty"`
	// Auth is anonymous (public repositories) or basic: a Docker ID and
	// a personal access token.
	Auth registry.Auth `json:"auth,omitempty"`
	// APIURL and Host replace Docker Hub's API and registry (a mirror,
	// tests); Insecure talks plain HTTP to Host.
	APIURL   string `json:"api_url,omitempty"`
	Host     string `json:"host,omitempty"`
	Insecure bool   `json:"insecure,omitempty"`
}

// GHCR configures the container packages of a GitHub user or
// organization on ghcr.io, listed through GitHub's REST API; their
// images are read as an OCI registry's are.
type GHCR struct {
	Owner string `json:"owner"`
	// OwnerType is user or org.
	OwnerType   string   `json:"owner_type"`
	Tag         string   `json:"tag,omitempty"`
	PageSize    int      `json:"page_size,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Timeout     Duration `json:"timeout,omitempty"`
	// Auth is required: token (a personal access token (classic) with
	// read:packages), or basic (the GitHub user name and the token).
	Auth registry.Auth `json:"auth,omitempty"`
	// APIURL and Host replace GitHub's API and ghcr.io (GitHub Enterprise
	// Server, a mirror, tests); Insecure talks plain HTTP to Host.
	APIURL   string `json:"api_url,omitempty"`
	Host     string `json:"host,omitempty"`
	Insecure bool   `json:"insecure,omitempty"`
}

// Helm configures Helm charts, each chart a service: a chart repository
// (url, its index.yaml) or the charts in an OCI registry (host, with
// prefix, insecure, repositories and page_size as the oci block has
// them); exactly one of url and host.
type Helm struct {
	URL          string   `json:"url,omitempty"`
	Host         string   `json:"host,omitempty"`
	Prefix       string   `json:"prefix,omitempty"`
	Insecure     bool     `json:"insecure,omitempty"`
	Repositories []string `json:"repositories,omitempty"`
	PageSize     int      `json:"page_size,omitempty"`
	// Prereleases lets a prerelease version be the one a chart offers.
	Prereleases bool     `json:"prereleases,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Timeout     Duration `json:"timeout,omitempty"`
	// MaxBytes bounds a chart repository's index; MaxChartBytes a chart
	// archive, MaxChartUnpackedBytes what it unpacks to.
	MaxBytes              int64         `json:"max_bytes,omitempty"`
	MaxChartBytes         int64         `json:"max_chart_bytes,omitempty"`
	MaxChartUnpackedBytes int64         `json:"max_chart_unpacked_bytes,omitempty"`
	Auth                  registry.Auth `json:"auth,omitempty"`
}

// Duration is a time.Duration written as "30s", "2m".
type Duration time.Duration

// UnmarshalJSON accepts a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as \"30s\": %w", err)
	}
	if v < 0 {
		return fmt.Errorf("duration %q must not be negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

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
			return fail(fmt.Errorf("%s: %w", where, err))
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

// build checks one registry's own settings and builds its source.
func build(r Registry, dirs dirs) (registry.Source, error) {
	if r.MaxMarkShare != nil && (*r.MaxMarkShare <= 0 || *r.MaxMarkShare > 1) {
		return nil, fmt.Errorf("max_mark_share %v must be in (0, 1]", *r.MaxMarkShare)
	}
	if r.Hook != nil {
		if err := r.Hook.Validate(); err != nil {
			return nil, err
		}
	}
	filter, err := registry.NewFilter(r.Allow, r.Deny)
	if err != nil {
		return nil, err
	}
	var out registry.Source
	blocks := 0
	for _, present := range []bool{r.OCI != nil, r.HTTP != nil, r.Dir != nil, r.DockerHub != nil, r.GHCR != nil, r.Helm != nil} {
		if present {
			blocks++
		}
	}
	if blocks != 1 {
		return nil, fmt.Errorf("exactly one of the oci, http, dir, dockerhub, ghcr and helm blocks is required, found %d", blocks)
	}
	switch r.Type {
	case "oci":
		if r.OCI == nil {
			return nil, errors.New("type oci needs an oci block")
		}
		if err := r.OCI.Auth.Validate(); err != nil {
			return nil, fmt.Errorf("oci.auth: %w", err)
		}
		out, err = registry.NewOCI(registry.OCIConfig{
			Host: r.OCI.Host, Prefix: r.OCI.Prefix, Insecure: r.OCI.Insecure, Repositories: r.OCI.Repositories, Tag: r.OCI.Tag,
			Filter: filter, Auth: r.OCI.Auth, PageSize: r.OCI.PageSize, Concurrency: r.OCI.Concurrency,
			Timeout: time.Duration(r.OCI.Timeout),
		})
	case "http":
		if r.HTTP == nil {
			return nil, errors.New("type http needs an http block")
		}
		if err := r.HTTP.Auth.Validate(); err != nil {
			return nil, fmt.Errorf("http.auth: %w", err)
		}
		out, err = registry.NewHTTP(registry.HTTPConfig{
			URL: r.HTTP.URL, Filter: filter, Auth: r.HTTP.Auth, Timeout: time.Duration(r.HTTP.Timeout), MaxBytes: r.HTTP.MaxBytes,
		})
	case "dir":
		if r.Dir == nil {
			return nil, errors.New("type dir needs a dir block")
		}
		var fsys fs.FS
		var root string
		switch {
		case r.Dir.Embedded && r.Dir.Path != "":
			return nil, errors.New("dir: set either path or embedded, not both")
		case r.Dir.Embedded:
			sub, serr := fs.Sub(examples.Registry, examples.RegistryDir)
			if serr != nil {
				return nil, serr
			}
			fsys, root = sub, "embedded:examples"
		case r.Dir.Path != "":
			var derr error
			if fsys, root, derr = dirs(r.Dir.Path); derr != nil {
				return nil, derr
			}
		default:
			return nil, errors.New("dir: set path or embedded")
		}
		out, err = registry.NewDir(registry.DirConfig{FS: fsys, Root: root, Filter: filter})
	case "dockerhub":
		if r.DockerHub == nil {
			return nil, errors.New("type dockerhub needs a dockerhub block")
		}
		h := r.DockerHub
		// The dockerhub, ghcr and helm sources name their block in their
		// errors themselves (dockerhub.namespace, helm: ...), which config
		// check locates: returned as they are.
		src, err := registry.NewDockerHub(registry.DockerHubConfig{
			Namespace: h.Namespace, APIURL: h.APIURL, Host: h.Host, Insecure: h.Insecure, Tag: h.Tag, Filter: filter,
			Auth: h.Auth, PageSize: h.PageSize, Concurrency: h.Concurrency, Timeout: time.Duration(h.Timeout),
		})
		if err != nil {
			return nil, err
		}
		return src, nil
	case "ghcr":
		if r.GHCR == nil {
			return nil, errors.New("type ghcr needs a ghcr block")
		}
		g := r.GHCR
		src, err := registry.NewGHCR(registry.GHCRConfig{
			Owner: g.Owner, OwnerType: g.OwnerType, APIURL: g.APIURL, Host: g.Host, Insecure: g.Insecure, Tag: g.Tag,
			Filter: filter, Auth: g.Auth, PageSize: g.PageSize, Concurrency: g.Concurrency, Timeout: time.Duration(g.Timeout),
		})
		if err != nil {
			return nil, err
		}
		return src, nil
	case "helm":
		if r.Helm == nil {
			return nil, errors.New("type helm needs a helm block")
		}
		if err := r.Helm.Auth.Validate(); err != nil {
			return nil, fmt.Errorf("helm.auth: %w", err)
		}
		return buildHelm(r.Helm, filter)
	case "":
		return nil, errors.New("type is required (oci, http, dir, dockerhub, ghcr or helm)")
	default:
		return nil, fmt.Errorf("type %q is not one of oci, http, dir, dockerhub, ghcr, helm", r.Type)
	}
	// The oci, http and dir sources name their block in their errors
	// ("oci: host is required"): returned as they are, not as "oci: oci: ...".
	if err != nil {
		return nil, err
	}
	return out, nil
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

// buildHelm checks a helm block and builds its source. Its errors name
// the block's fields, so that `config check` reports them at their line.
func buildHelm(h *Helm, filter *registry.Filter) (registry.Source, error) {
	switch {
	case h.URL == "" && h.Host == "":
		return nil, errors.New("set helm.url (a chart repository) or helm.host (charts in an OCI registry)")
	case h.URL != "" && h.Host != "":
		return nil, errors.New("set either helm.url (a chart repository) or helm.host (charts in an OCI registry), not both")
	case h.URL != "":
		for _, f := range []struct {
			name string
			set  bool
		}{{"helm.prefix", h.Prefix != ""}, {"helm.insecure", h.Insecure}, {"helm.repositories", len(h.Repositories) > 0}, {"helm.page_size", h.PageSize != 0}} {
			if f.set {
				return nil, fmt.Errorf("%s is for charts in an OCI registry (helm.host), not a chart repository (helm.url)", f.name)
			}
		}
	case h.MaxBytes != 0:
		return nil, errors.New("helm.max_bytes bounds a chart repository's index (helm.url); charts in an OCI registry (helm.host) have none")
	}
	src, err := registry.NewHelm(registry.HelmConfig{
		URL: h.URL, Host: h.Host, Prefix: h.Prefix, Insecure: h.Insecure, Repositories: h.Repositories, PageSize: h.PageSize,
		Prereleases: h.Prereleases, Filter: filter, Auth: h.Auth, Concurrency: h.Concurrency, Timeout: time.Duration(h.Timeout),
		MaxIndexBytes: h.MaxBytes, MaxChartBytes: h.MaxChartBytes, MaxChartUnpackedBytes: h.MaxChartUnpackedBytes,
	})
	if err != nil {
		return nil, err
	}
	return src, nil
}
