package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/mod/semver"

	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/verify/policy"
)

// Helm defaults.
const (
	DefaultHelmTimeout     = 60 * time.Second
	DefaultHelmConcurrency = 8
	// DefaultHelmIndexMaxBytes bounds a chart repository's index.yaml.
	// Indexes of big public repositories run to megabytes (every version
	// of every chart); a bigger one is a fetch error.
	DefaultHelmIndexMaxBytes = 16 << 20
	// DefaultHelmChartMaxBytes bounds one chart archive as downloaded.
	DefaultHelmChartMaxBytes = 4 << 20
	// DefaultHelmChartMaxUnpackedBytes bounds what one chart archive
	// unpacks to (every file and tar header read), so a small archive
	// cannot expand into gigabytes.
	DefaultHelmChartMaxUnpackedBytes = 32 << 20
)

// HelmConfig configures a source of Helm charts, each chart one service:
// the charts of a chart repository (URL: its index.yaml over HTTP(S)), or
// the charts in an OCI registry (Host, with Prefix and Repositories as an
// OCI source has them). Exactly one of URL and Host is set.
type HelmConfig struct {
	// URL is a chart repository's URL, as `helm repo add` takes it: its
	// index is index.yaml under it, and chart URLs the index gives
	// relative are resolved against it, as helm resolves them.
	URL string

	// Host is an OCI registry's host[:port] holding charts as Helm 3
	// pushes them (`helm push CHART oci://HOST/PREFIX`): one repository
	// per chart, one tag per version ("+" written "_").
	Host string
	// Prefix, Insecure, Repositories and PageSize are as OCIConfig's:
	// entry names are repository paths relative to Prefix; empty
	// Repositories lists the catalog API under Prefix.
	Prefix       string
	Insecure     bool
	Repositories []string
	PageSize     int

	// Prereleases lets a prerelease version (1.2.0-rc.1) be the one
	// offered; by default a chart offers its highest release version.
	Prereleases bool

	Filter *Filter
	// Auth: for a chart repository, sent as the Authorization header to
	// the repository's own scheme, host and port only (chart URLs on
	// another host get no credentials, as helm sends none without
	// --pass-credentials), auth type google only for a repository in
	// Cloud Storage (https://storage.googleapis.com/BUCKET/...); for an
	// OCI registry, as an OCI source's, google included.
	Auth Auth
	// Concurrency bounds the charts read in parallel (default 8).
	Concurrency int
	// Timeout bounds the whole fetch, archives included (default 60s).
	Timeout time.Duration
	// MaxIndexBytes bounds a chart repository's index (default 16 MiB).
	MaxIndexBytes int64
	// MaxChartBytes bounds a chart archive (default 4 MiB), and
	// MaxChartUnpackedBytes what it unpacks to (default 32 MiB); a bigger
	// one is that chart's error.
	MaxChartBytes         int64
	MaxChartUnpackedBytes int64

	// Client replaces a chart repository's default HTTP client (tests,
	// proxies).
	Client *http.Client
	// Transport replaces remote.DefaultTransport for an OCI registry
	// (tests).
	Transport http.RoundTripper
	// Verify, when set, offers only entries signed as it says: for
	// charts in an OCI registry, their manifests' signatures
	// (oci_verify.go); for a chart repository, its charts' provenance
	// files (verify.provenance, helm_prov.go).
	Verify *policy.Policy
	// Backoff replaces the retry of OCI requests (zero: 200ms, doubling,
	// 3 steps; tests shorten it).
	Backoff remote.Backoff
}

// Helm lists the charts of a chart repository or of an OCI registry. Each
// chart is one entry, named after the chart (in an OCI registry, its
// repository path relative to the prefix): the spec its highest version
// makes (see chartSpec), or that entry's error. A chart with no version
// to offer (none released, only prereleases, deprecated, a library
// chart) offers nothing.
//
// Like the http source, a chart repository's index that cannot be read
// whole (unreachable, 4xx/5xx, truncated, oversized, not an index) fails
// the fetch, and a 304 to the ETag of the last fetch is an unchanged
// listing. A chart whose archive cannot be downloaded or read, or whose
// Chart.yaml, schema or annotations are broken, is that entry's error and
// keeps its last good version. In an OCI registry, as in the oci source, a
// fetch in which every selected repository fails to load fails whole.
type Helm struct {
	cfg HelmConfig
	// repo is the parsed URL of a chart repository (nil for an OCI
	// registry); index its index.yaml.
	repo  *url.URL
	index string
	// nameOpts and backoff are an OCI registry's, and google its token
	// source for auth type google (google.go).
	nameOpts []name.Option
	backoff  remote.Backoff
	google   *googleTokens

	mu sync.Mutex
	// cache maps a chart version's digest (the index's digest of the
	// archive, or the OCI manifest digest) to what it holds. A digest
	// names its content, so an entry never goes stale; it is pruned to
	// the digests of the last complete fetch.
	cache map[string]chartContent
	// verified are the chart manifests (oci_verify.go) or archives
	// (helm_prov.go) verified.
	verified verifiedDigests
}

// NewHelm checks cfg and fills in defaults.
func NewHelm(cfg HelmConfig) (*Helm, error) {
	var probs problems
	cfg.URL, cfg.Host = strings.TrimSpace(cfg.URL), strings.TrimSpace(cfg.Host)
	switch {
	case cfg.URL == "" && cfg.Host == "":
		probs.add(errors.New("set helm.url (a chart repository) or helm.host (charts in an OCI registry)"))
	case cfg.URL != "" && cfg.Host != "":
		probs.add(errors.New("set either helm.url (a chart repository) or helm.host (charts in an OCI registry), not both"))
	}
	formOK := len(probs) == 0
	for _, f := range []struct {
		name string
		v    int64
	}{{"concurrency", int64(cfg.Concurrency)}, {"timeout", int64(cfg.Timeout)}, {"max_bytes", cfg.MaxIndexBytes},
		{"max_chart_bytes", cfg.MaxChartBytes}, {"max_chart_unpacked_bytes", cfg.MaxChartUnpackedBytes}} {
		if f.v < 0 {
			shown := fmt.Sprint(f.v)
			if f.name == "timeout" {
				shown = cfg.Timeout.String()
			}
			probs.add(fmt.Errorf("helm.%s %s must not be negative", f.name, shown))
		}
	}
	authOK := !probs.add(cfg.Auth.validate("helm"))
	h := &Helm{cache: map[string]chartContent{}}
	switch {
	case !formOK:
	case cfg.URL != "":
		probs.add(h.checkRepository(&cfg, authOK))
	default:
		probs.add(h.checkOCI(&cfg, authOK))
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultHelmConcurrency
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultHelmTimeout
	}
	if cfg.MaxChartBytes == 0 {
		cfg.MaxChartBytes = DefaultHelmChartMaxBytes
	}
	if cfg.MaxChartUnpackedBytes == 0 {
		cfg.MaxChartUnpackedBytes = DefaultHelmChartMaxUnpackedBytes
	}
	h.cfg = cfg
	return h, nil
}

// String names the source for logs; it shows no credential.
func (h *Helm) String() string {
	where := "oci://" + join(h.cfg.Host, h.cfg.Prefix)
	if h.repo != nil {
		where = RedactURL(h.repo)
	}
	return "helm " + where + " (auth " + h.cfg.Auth.String() + ")"
}

// Fetch lists the charts. See Source.
func (h *Helm) Fetch(ctx context.Context, opts FetchOptions) (*Listing, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	if h.repo != nil {
		return h.fetchRepository(ctx, opts)
	}
	return h.fetchOCI(ctx, opts)
}

// chartVersion is one version of a chart as a listing names it.
type chartVersion struct {
	// version is the chart version as written (an OCI tag with "_" read
	// back as "+").
	version string
	// deprecated is what the index says of the version.
	deprecated bool
	// urls and digest are a chart repository's: where the archive is and
	// its SHA-256 ("" when the index gives none).
	urls   []string
	digest string
	// tag is an OCI registry's.
	tag string
}

// chartOutcome is what one chart offers: an entry, nothing, or (pending)
// a version looked up but not yet read.
type chartOutcome struct {
	name  string
	entry *Entry
	// unreachable marks a failure to talk to the registry about the
	// chart, as opposed to a problem with what it holds.
	unreachable bool
	// key is the cache key of the version read, to keep in the cache.
	key string
	// upstream is the chart's Upstream (helmUpstream), known from the
	// listing before the archive is read: "" when the listing names no
	// digest of it (an index entry without one).
	upstream string
	// quiet: the version read at upstream offers nothing (deprecated in
	// its Chart.yaml, a library chart, not a chart at all).
	quiet bool
	// pending: looked up, to be read (or given back from a hint); v is
	// the version chosen, ref where it is read, at (OCI) or url (a chart
	// repository) how to read it.
	pending bool
	v       chartVersion
	ref     string
	at      name.Digest
	url     *url.URL
	// fatal is a signature lookup that failed: the fetch's failure.
	fatal error
}

// unreached is the entry of a chart whose registry could not be talked to
// about it (allFailed), nil for any other outcome.
func (o chartOutcome) unreached() *Entry {
	if o.unreachable {
		return o.entry
	}
	return nil
}

// helmReadVersion names how this code reads a chart version into an
// entry (Chart.yaml, values.schema.json and annotations into a spec,
// pkg/spec's parsing and digest), as ociReadVersion does for images:
// change it whenever the same archive would give another entry, so that
// every chart is read again once.
const helmReadVersion = "1"

// helmUpstream is the Upstream of a chart version: the repository it is
// offered from (part of the spec), the version the listing chose and
// the digest that names its content (the OCI manifest's, or the archive's
// SHA-256 the index gives).
func helmUpstream(repository, version, digest string) string {
	return "helm" + helmReadVersion + " " + repository + " " + version + "@" + digest
}

// pick chooses the version a chart offers: the highest semantic version
// (prereleases only when configured). Versions that are not semantic
// versions are passed over, as helm passes them over; a chart none of
// whose versions is one is an error, and one whose only versions are
// prereleases offers nothing (ok false, err nil).
func (h *Helm) pick(versions []chartVersion) (chartVersion, bool, error) {
	var best *chartVersion
	valid := 0
	for i := range versions {
		v := &versions[i]
		sv := "v" + strings.TrimPrefix(v.version, "v")
		if !spec.IsSemver(sv[1:]) {
			continue
		}
		valid++
		if semver.Prerelease(sv) != "" && !h.cfg.Prereleases {
			continue
		}
		if best == nil {
			best = v
			continue
		}
		bv := "v" + strings.TrimPrefix(best.version, "v")
		// Versions that differ only in build metadata compare equal;
		// the text decides, so the choice does not depend on order.
		if c := cmp.Or(semver.Compare(sv, bv), strings.Compare(v.version, best.version)); c > 0 {
			best = v
		}
	}
	switch {
	case best != nil:
		return *best, true, nil
	case valid > 0 || len(versions) == 0:
		return chartVersion{}, false, nil
	}
	shown := make([]string, 0, 3)
	for _, v := range versions[:min(3, len(versions))] {
		shown = append(shown, fmt.Sprintf("%q", v.version))
	}
	return chartVersion{}, false, fmt.Errorf("none of its %d versions (%s) is a semantic version MAJOR.MINOR.PATCH", len(versions), strings.Join(shown, ", "))
}

// collect runs load for every chart, Concurrency at a time, and makes the
// listing: entries in name order, the cache pruned to what was read.
func (h *Helm) collect(ctx context.Context, names []string, load func(ctx context.Context, name string) chartOutcome) ([]chartOutcome, error) {
	outcomes := make([]chartOutcome, len(names))
	each(h.cfg.Concurrency, len(names), func(i int) { outcomes[i] = load(ctx, names[i]) })
	// A chart that timed out is not a problem of that chart: the listing
	// as a whole is incomplete.
	if err := ctx.Err(); err != nil {
		return nil, timedOut(ctx, h.cfg.Timeout, err)
	}
	return outcomes, nil
}

// listing makes the listing of outcomes and prunes the cache to the keys
// they read.
func (h *Helm) listing(outcomes []chartOutcome, secrets []string) *Listing {
	entries, quiet := []Entry{}, []Entry(nil)
	keep := map[string]bool{}
	for _, o := range outcomes {
		if o.key != "" {
			keep[o.key] = true
		}
		switch {
		case o.entry != nil:
			entries = append(entries, redacted(*o.entry, secrets))
		case o.quiet:
			quiet = append(quiet, Entry{Name: o.name, Ref: o.ref, Upstream: o.upstream})
		}
	}
	byName := func(a, b Entry) int { return strings.Compare(a.Name, b.Name) }
	slices.SortStableFunc(entries, byName)
	slices.SortStableFunc(quiet, byName)
	pruneCache(&h.mu, h.cache, keep)
	h.verified.prune(keep)
	return &Listing{Entries: entries, Quiet: quiet, Digest: ListingDigest(slices.Concat(entries, quiet))}
}

// settle finishes a fetch whose charts were looked up (the chosen
// version and its digest, from the index or a HEAD): as the oci source
// does, a listing whose upstream digests sum to opts.PreviousDigest is
// NotModified, unread; otherwise each pending chart is taken from the
// cache, given back from the run's hint at the same Upstream (asked once,
// only when the cache does not know some chart), or read.
func (h *Helm) settle(ctx context.Context, looked []chartOutcome, opts FetchOptions, secrets []string,
	read func(context.Context, chartOutcome) chartOutcome) (*Listing, error) {
	if opts.PreviousDigest != "" {
		known := true
		var entries []Entry
		keep := map[string]bool{}
		for _, o := range looked {
			switch {
			case o.entry != nil:
				entries = append(entries, redacted(*o.entry, secrets))
			case o.pending && o.upstream == "":
				known = false
			case o.pending:
				entries = append(entries, Entry{Name: o.name, Ref: o.ref, Upstream: o.upstream})
				keep[o.key] = true
			}
		}
		if d := ListingDigest(entries); known && d == opts.PreviousDigest {
			pruneCache(&h.mu, h.cache, keep)
			return &Listing{Entries: []Entry{}, Digest: d, NotModified: true}, nil
		}
	}
	var hints map[string]Hint
	if opts.Hints != nil && slices.ContainsFunc(looked, func(o chartOutcome) bool {
		_, cached := h.cached(o.key)
		return o.pending && o.upstream != "" && !cached
	}) {
		var err error
		if hints, err = opts.Hints(ctx); err != nil {
			return nil, fmt.Errorf("the run's hints: %w", err)
		}
	}
	outcomes := make([]chartOutcome, len(looked))
	each(h.cfg.Concurrency, len(looked), func(i int) {
		o := looked[i]
		if !o.pending {
			outcomes[i] = o
			return
		}
		if _, cached := h.cached(o.key); !cached && o.upstream != "" {
			if hint, ok := hints[o.name]; ok && hint.Upstream == o.upstream {
				out := chartOutcome{name: o.name, ref: o.ref, upstream: o.upstream, quiet: hint.Quiet()}
				if !out.quiet {
					out.entry = &Entry{Name: o.name, Ref: o.ref, Upstream: o.upstream, Hint: &hint}
				}
				outcomes[i] = out
				return
			}
		}
		outcomes[i] = read(ctx, o)
	})
	if err := ctx.Err(); err != nil {
		return nil, timedOut(ctx, h.cfg.Timeout, err)
	}
	// As in the oci source, a registry that fails every chart is down;
	// a chart repository's archives failing are each chart's error (the
	// index, read whole, is what shows a repository down).
	if err := allFailed(outcomes); err != nil && h.repo == nil {
		return nil, err
	}
	// A signature lookup that failed fails the fetch (the first by name).
	var fatal *chartOutcome
	for i, o := range outcomes {
		if o.fatal != nil && (fatal == nil || o.name < fatal.name) {
			fatal = &outcomes[i]
		}
	}
	if fatal != nil {
		return nil, fatal.fatal
	}
	return h.listing(outcomes, secrets), nil
}

// readOutcome is what a pending chart's content offers: its entry, at
// its Upstream, or nothing (quiet when the Upstream names it).
func (h *Helm) readOutcome(o chartOutcome, c chartContent, repository string) chartOutcome {
	out := chartOutcome{name: o.name, key: o.key, ref: o.ref, upstream: o.upstream}
	if !c.notChart {
		out.entry = h.offer(o.name, o.ref, o.v, c, repository)
	}
	if out.entry == nil {
		out.quiet = o.upstream != ""
		return out
	}
	out.entry.Upstream = o.upstream
	return out
}

// cached returns what the cache holds for key ("" is never cached).
func (h *Helm) cached(key string) (chartContent, bool) {
	if key == "" {
		return chartContent{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.cache[key]
	return c, ok
}

func (h *Helm) remember(key string, c chartContent) {
	if key == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cache[key] = c
}

// offer turns what a chart version holds into its entry: nil when it
// offers nothing (deprecated, a library chart).
func (h *Helm) offer(entry, ref string, v chartVersion, c chartContent, repository string) *Entry {
	e := &Entry{Name: entry, Ref: ref}
	fail := func(err error) *Entry {
		e.Err = fmt.Errorf("chart %s version %s: %w", entry, v.version, err)
		return e
	}
	if c.err != nil {
		return fail(c.err)
	}
	if c.meta.Deprecated || c.meta.Type == "library" {
		return nil
	}
	// The archive must be the chart and version the listing says it is:
	// a mismatch is a broken repository, and serving either would be a
	// guess.
	if base := entry[strings.LastIndex(entry, "/")+1:]; c.meta.Name != base {
		return fail(fmt.Errorf("the archive holds chart %q, not %q", c.meta.Name, base))
	}
	if c.meta.Version != v.version {
		return fail(fmt.Errorf("the archive's Chart.yaml says version %q", c.meta.Version))
	}
	s, err := chartSpec(c, repository)
	if err != nil {
		return fail(err)
	}
	e.Spec = s
	return e
}

// RedactURL shows a URL without its user information, query and
// fragment, which may hold credentials (a token in a query string): what
// refs, errors, logs and the status page carry.
func RedactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.String()
}

func init() {
	Register(Kind{Type: "helm", New: func() Block { return new(HelmBlock) }, Credentials: AuthCredentials, Order: 60})
}

// HelmBlock is the registries file's helm block: Helm charts, each chart
// a service: a chart repository (url, its index.yaml) or the charts in an
// OCI registry (host, with prefix, insecure, repositories and page_size as
// the oci block has them); exactly one of url and host.
type HelmBlock struct {
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
	MaxBytes              int64 `json:"max_bytes,omitempty"`
	MaxChartBytes         int64 `json:"max_chart_bytes,omitempty"`
	MaxChartUnpackedBytes int64 `json:"max_chart_unpacked_bytes,omitempty"`
	Auth                  Auth  `json:"auth,omitempty"`
}

// Build checks the block and builds its source. Its errors name the
// block's fields, so that `config check` reports them at their line.
func (h *HelmBlock) Build(bc BuildContext) (Source, error) {
	return NewHelm(HelmConfig{
		URL: h.URL, Host: h.Host, Prefix: h.Prefix, Insecure: h.Insecure, Repositories: h.Repositories, PageSize: h.PageSize,
		Prereleases: h.Prereleases, Filter: bc.Filter, Auth: h.Auth, Concurrency: h.Concurrency, Timeout: time.Duration(h.Timeout),
		MaxIndexBytes: h.MaxBytes, MaxChartBytes: h.MaxChartBytes, MaxChartUnpackedBytes: h.MaxChartUnpackedBytes,
		Verify: bc.Verify,
	})
}

// Describe is the chart repository's URL, or oci:// and the host.
func (h *HelmBlock) Describe() Description {
	if h.URL != "" {
		return Description{Location: safeURL(h.URL), Auth: authType(h.Auth)}
	}
	return Description{Location: "oci://" + hostPath(h.Host, h.Prefix), Auth: authType(h.Auth)}
}
