package registry

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/verify/policy"
)

// OCI defaults.
const (
	DefaultOCITag         = "latest"
	DefaultOCIPageSize    = 100
	DefaultOCIConcurrency = 8
	DefaultOCITimeout     = 60 * time.Second
)

// OCIConfig configures an OCI Distribution (Docker Registry v2) source.
type OCIConfig struct {
	// Host is the registry host[:port], without a scheme or path.
	Host string
	// Prefix scopes the source to the repositories under one path of the
	// host (Artifact Registry's PROJECT/REPOSITORY, a Docker Hub
	// namespace): only those are listed, and entry names, Repositories,
	// allow and deny are relative to it, so the same registry moved to
	// another project keeps its entry names.
	Prefix string
	// Insecure talks plain HTTP (local registries). Loopback and RFC 1918
	// hosts get HTTP anyway, as go-containerregistry decides.
	Insecure bool
	// Repositories lists the repositories to read (relative to Prefix);
	// empty means every repository the catalog API (or Lister) lists.
	Repositories []string
	// Lister, when set, lists the repositories instead of the catalog API:
	// registries without one (Docker Hub, GHCR) list them through an API
	// of their own. Manifests and labels still come through the OCI path.
	Lister RepositoryLister
	// Tag is the tag whose image carries the current spec (default
	// "latest").
	Tag    string
	Filter *Filter
	Auth   Auth
	// PageSize is the catalog page size (default 100).
	PageSize int
	// Concurrency bounds parallel repository fetches (default 8).
	Concurrency int
	// Timeout bounds the whole fetch (default 60s).
	Timeout time.Duration
	// Transport replaces remote.DefaultTransport (tests).
	Transport http.RoundTripper
	// Verify, when set, offers only entries whose manifest is signed as
	// it says (oci_verify.go).
	Verify *policy.Policy
}

// RepositoryLister lists a registry's repositories where the catalog API
// cannot: full repository paths on the host (Prefix included). Like a
// catalog, it lists everything or fails: a partial list would read as
// repositories having disappeared. creds are the credentials the fetch
// read for its pulls (Auth, read once): the listing uses the same ones, so
// a secret rotated during a fetch cannot list with one and pull with
// another.
type RepositoryLister interface {
	ListRepositories(ctx context.Context, creds authn.AuthConfig) ([]string, error)
}

// OCI lists the spec images of an OCI registry: one entry per repository
// whose tag points at an image (or index) with a spec label. A repository
// without the tag, or whose image has no spec label, offers nothing; one
// that cannot be read is that entry's error, unless every selected
// repository fails, which fails the fetch (the registry is down or refuses
// the credentials, and with an explicit repository list nothing else would
// tell).
type OCI struct {
	cfg      OCIConfig
	nameOpts []name.Option
	// backoff is defaultOCIBackoff (tests shorten it).
	backoff remote.Backoff
	// google holds the token source of auth type google (google.go).
	google *googleTokens

	mu sync.Mutex
	// cache maps a manifest digest to what it offers. A digest names its
	// content, so an entry never goes stale; it is pruned to the digests
	// of the last complete fetch so it cannot outgrow the registry.
	cache map[string]ociResult
	// verified are the digests verified (oci_verify.go), pruned as cache.
	verified verifiedDigests
}

// ociResult is what one manifest offers, kept as the raw label so that
// every fetch returns a freshly parsed spec nobody else holds.
type ociResult struct {
	offers    bool // has a spec label (or is a spec artifact)
	label     string
	platforms []spec.Platform
	// artifact says the spec is an artifact's document, not a label;
	// problem is what makes a spec artifact unreadable as one (it is
	// content-addressed, so it is that entry's error for good).
	artifact bool
	problem  string
}

// NewOCI checks cfg and fills in defaults.
func NewOCI(cfg OCIConfig) (*OCI, error) {
	var probs problems
	cfg.Host = strings.TrimSpace(cfg.Host)
	var opts []name.Option
	hostOK := false
	if cfg.Host == "" {
		probs.add(fieldErrorf("oci", "host is required"))
	} else {
		var err error
		opts, err = checkOCIHost("oci", cfg.Host, cfg.Insecure)
		hostOK = !probs.add(err)
	}
	if cfg.PageSize < 0 {
		probs.add(fieldErrorf("oci", "page_size %d must not be negative", cfg.PageSize))
	}
	if cfg.Concurrency < 0 {
		probs.add(fieldErrorf("oci", "concurrency %d must not be negative", cfg.Concurrency))
	}
	if cfg.Timeout < 0 {
		probs.add(fieldErrorf("oci", "timeout %s must not be negative", cfg.Timeout))
	}
	if cfg.Tag == "" {
		cfg.Tag = DefaultOCITag
	}
	if hostOK {
		var err error
		prefixOK := true
		if cfg.Prefix, err = repositoryPrefix(cfg.Host, cfg.Prefix, opts); err != nil {
			prefixOK = !probs.add(fieldErrorf("oci", "prefix %q is not a repository path: %w", cfg.Prefix, err))
		}
		if _, err := name.NewTag(cfg.Host+"/x:"+cfg.Tag, opts...); err != nil {
			probs.add(fieldErrorf("oci", "tag %q: %w", cfg.Tag, err))
		}
		if prefixOK {
			probs.add(checkRepositories("oci", cfg.Host, cfg.Prefix, cfg.Repositories, opts))
		}
	}
	cfg.Repositories = slices.Clone(cfg.Repositories)
	authOK := !probs.add(cfg.Auth.validate("oci"))
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultOCIPageSize
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultOCIConcurrency
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultOCITimeout
	}
	if cfg.Transport == nil {
		cfg.Transport = remote.DefaultTransport
	}
	var google *googleTokens
	if hostOK && authOK {
		var err error
		google, err = checkGoogleOCI("oci", cfg.Auth, cfg.Host, cfg.Insecure, &cfg.Transport)
		probs.add(err)
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	return &OCI{
		cfg:      cfg,
		nameOpts: opts,
		backoff:  defaultOCIBackoff,
		google:   google,
		cache:    map[string]ociResult{},
	}, nil
}

// The checks and the fetch machinery below are the oci source's and Helm's
// OCI form's alike (a helm block with host): block names the registries
// file's block in messages ("oci: ...", "helm: ...").

// String names the source for logs; it shows no credential.
func (o *OCI) String() string {
	return "oci " + join(o.cfg.Host, o.cfg.Prefix) + " (auth " + o.cfg.Auth.String() + ")"
}

// path is the repository path on the host of an entry.
func (o *OCI) path(entry string) string { return join(o.cfg.Prefix, entry) }

// entryOf is the entry a repository path on the host stands for, if it
// lies under the prefix.
func (o *OCI) entryOf(path string) (string, bool) { return entryUnder(o.cfg.Prefix, path) }

// ociReadVersion names how this code reads an image into an entry: the
// label or the spec artifact it takes the spec from, the platforms, and
// the spec's parsing, validation and digest (pkg/spec). It is part of
// every OCI entry's Upstream, so that a release that reads an image
// differently reads every image again: a recorded listing digest or hint
// of the version before never matches. Change it whenever the same image
// would give a different entry (spec, error, or nothing);
// TestOCIReadVersionNamesWhatAnImageGives fails until it is.
const ociReadVersion = "1"

// upstreamOf is the Upstream of an entry read at a manifest digest.
func upstreamOf(digest string) string { return "oci" + ociReadVersion + "@" + digest }

// repoOutcome is the result for one repository: the manifest digest its
// tag names (and the manifest, when looking it up took a GET), then an
// entry, an image that offers nothing (quiet), or nothing at all (no
// such tag).
type repoOutcome struct {
	entry *Entry
	// unreachable marks a failure to talk to the registry about this
	// repository, as opposed to a problem with what it holds.
	unreachable bool
	digest      string
	tag         name.Tag
	got         *remote.Descriptor
	quiet       bool
	// fatal is a signature lookup that failed: the fetch's failure.
	fatal error
}

// Fetch lists the registry. See Source.
func (o *OCI) Fetch(ctx context.Context, opts FetchOptions) (*Listing, error) {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
	defer cancel()
	c, err := o.connect(ctx)
	if err != nil {
		return nil, err
	}
	entries, err := o.entries(ctx, c)
	if err != nil {
		return c.fail(fmt.Errorf("%s: %w", c.where, timedOut(ctx, o.cfg.Timeout, err)))
	}
	return o.fetchEntries(ctx, c, entries, true, opts)
}

// connect reads the credentials and builds the puller of one fetch.
func (o *OCI) connect(ctx context.Context) (*conn, error) {
	return connectOCI(ctx, o.cfg.Host, o.cfg.Prefix, ociClient{
		auth: o.cfg.Auth, google: o.google, transport: o.cfg.Transport,
		pageSize: o.cfg.PageSize, concurrency: o.cfg.Concurrency, backoff: o.backoff,
	})
}

// entries lists the selected entries: the configured repositories, or
// every repository the catalog (or the Lister) lists under the prefix,
// filtered.
func (o *OCI) entries(ctx context.Context, c *conn) ([]string, error) {
	names := o.cfg.Repositories
	if len(names) == 0 {
		var paths []string
		var err error
		if o.cfg.Lister != nil {
			paths, err = o.cfg.Lister.ListRepositories(ctx, c.creds)
		} else if o.walksChildren() {
			paths, err = o.children(ctx, c)
		} else {
			paths, err = o.catalog(ctx, c.puller, c.opts)
		}
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if e, ok := o.entryOf(p); ok {
				names = append(names, e)
			}
		}
	}
	var selected []string
	for _, e := range names {
		if o.cfg.Filter.Allows(e) {
			selected = append(selected, e)
		}
	}
	return selected, nil
}

// fetchEntries reads what each selected entry's repository offers and
// makes the listing of them. complete says they are every entry the
// source selects: only then is the cache pruned to their digests (a fetch
// of a few named entries would empty it of the rest), and may the
// listing be found unchanged (opts.PreviousDigest).
//
// It looks every tag up first (a HEAD each). An entry's part of the
// listing digest is a digest of its name, ref and upstream digest
// (Upstream),
// so those lookups alone tell a listing that is the previous one: then
// nothing is read, and the listing is NotModified. Otherwise each
// manifest is taken from the cache, or given back from the run's hint
// of the entry at the same upstream digest (opts.Hints, asked only if
// the cache does not know some manifest), or read (its manifest and
// config).
func (o *OCI) fetchEntries(ctx context.Context, c *conn, selected []string, complete bool, opts FetchOptions) (*Listing, error) {
	outcomes := make([]repoOutcome, len(selected))
	each(o.cfg.Concurrency, len(selected), func(i int) { outcomes[i] = o.lookup(ctx, c.puller, selected[i]) })
	if err := o.incomplete(ctx, c, outcomes); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range outcomes {
		if r.digest != "" {
			seen[r.digest] = true
		}
	}
	if err := loadVerifier(c, o.cfg.Verify, len(seen) > 0); err != nil {
		return nil, err
	}
	if complete && opts.PreviousDigest != "" {
		var looked []Entry
		for i, r := range outcomes {
			switch {
			case r.entry != nil:
				looked = append(looked, redacted(*r.entry, c.secrets))
			case r.digest != "":
				looked = append(looked, Entry{Name: selected[i], Ref: o.ref(selected[i], r.digest), Upstream: c.upstream(r.digest)})
			}
		}
		if d := ListingDigest(looked); d == opts.PreviousDigest {
			o.prune(seen)
			return &Listing{Entries: []Entry{}, Digest: d, NotModified: true}, nil
		}
	}

	hints, err := o.hints(ctx, outcomes, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where, err)
	}
	each(o.cfg.Concurrency, len(selected), func(i int) { outcomes[i] = o.resolve(ctx, c, selected[i], outcomes[i], hints) })
	if err := o.incomplete(ctx, c, outcomes); err != nil {
		return nil, err
	}
	// A signature lookup that failed fails the fetch, naming the first
	// such entry by name (as allFailed does).
	var fatal error
	first := ""
	for i, r := range outcomes {
		if r.fatal != nil && (fatal == nil || selected[i] < first) {
			fatal, first = r.fatal, selected[i]
		}
	}
	if fatal != nil {
		_, err := c.fail(fmt.Errorf("%s: %w", c.where, fatal))
		return nil, err
	}

	entries, quiet := []Entry{}, []Entry(nil)
	for i, r := range outcomes {
		switch {
		case r.entry != nil:
			entries = append(entries, redacted(*r.entry, c.secrets))
		case r.quiet:
			quiet = append(quiet, Entry{Name: selected[i], Ref: o.ref(selected[i], r.digest), Upstream: c.upstream(r.digest)})
		}
	}
	byName := func(a, b Entry) int { return strings.Compare(a.Name, b.Name) }
	slices.SortStableFunc(entries, byName)
	slices.SortStableFunc(quiet, byName)
	if complete {
		o.prune(seen)
	}
	return &Listing{Entries: entries, Quiet: quiet, Digest: ListingDigest(slices.Concat(entries, quiet))}, nil
}

// incomplete is the fetch's failure when the outcomes are not a listing:
// it timed out, or every repository failed.
func (o *OCI) incomplete(ctx context.Context, c *conn, outcomes []repoOutcome) error {
	// A repository that timed out is not a problem of that repository: the
	// listing as a whole is incomplete.
	if err := ctx.Err(); err != nil {
		_, err = c.fail(fmt.Errorf("%s: %w", c.where, timedOut(ctx, o.cfg.Timeout, err)))
		return err
	}
	// With an explicit repository list nothing else would show a registry
	// that is down, as no catalog request is made.
	if err := allFailed(outcomes); err != nil {
		_, err = c.fail(fmt.Errorf("%s: %w", c.where, err))
		return err
	}
	return nil
}

// unreached is the entry of a repository that could not be talked to
// about, nil for any other outcome.
func (r repoOutcome) unreached() *Entry {
	if r.unreachable {
		return r.entry
	}
	return nil
}

// prune keeps in the cache only the manifests a complete fetch saw.
func (o *OCI) prune(seen map[string]bool) {
	pruneCache(&o.mu, o.cache, seen)
	o.verified.prune(seen)
}

// hints asks the run for its hints (opts.Hints) when some manifest a tag
// names is not in the cache: nil when none is needed or the run gives
// none.
func (o *OCI) hints(ctx context.Context, outcomes []repoOutcome, opts FetchOptions) (map[string]Hint, error) {
	if opts.Hints == nil {
		return nil, nil
	}
	o.mu.Lock()
	unknown := slices.ContainsFunc(outcomes, func(r repoOutcome) bool {
		_, cached := o.cache[r.digest]
		return r.entry == nil && r.digest != "" && !cached
	})
	o.mu.Unlock()
	if !unknown {
		return nil, nil
	}
	h, err := opts.Hints(ctx)
	if err != nil {
		return nil, fmt.Errorf("the run's hints: %w", err)
	}
	return h, nil
}

// ref is the reference of an entry's image by digest.
func (o *OCI) ref(repo, digest string) string { return o.cfg.Host + "/" + o.path(repo) + "@" + digest }

// catalog lists every repository, page by page, so that the page that
// failed can be named. Any failed page fails the whole list: a partial
// catalog would read as repositories having disappeared.
func (o *OCI) catalog(ctx context.Context, puller *remote.Puller, opts []remote.Option) ([]string, error) {
	reg, err := name.NewRegistry(o.cfg.Host, o.nameOpts...)
	if err != nil {
		return nil, err
	}
	return catalogRepositories(ctx, puller, reg, opts, o.cfg.PageSize, "oci")
}

// lookup looks a repository's tag up: the manifest digest it names,
// nothing (no such tag or repository), or the entry's error.
func (o *OCI) lookup(ctx context.Context, puller *remote.Puller, repo string) repoOutcome {
	tagged := o.cfg.Host + "/" + o.path(repo) + ":" + o.cfg.Tag
	tag, err := name.NewTag(tagged, o.nameOpts...)
	if err != nil {
		return broken(repo, tagged, false, err)
	}
	var got *remote.Descriptor
	desc, err := puller.Head(ctx, tag)
	if err != nil && !notFound(err) && !isTransportError(err) && ctx.Err() == nil {
		// HEAD is the cheap way to learn the digest, but some registries
		// answer it without Docker-Content-Digest; one GET does both.
		if got, err = puller.Get(ctx, tag); err == nil {
			desc = &got.Descriptor
		}
	}
	switch {
	case notFound(err):
		return repoOutcome{}
	case err != nil:
		return broken(repo, tagged, true, err)
	}
	return repoOutcome{digest: desc.Digest.String(), tag: tag, got: got}
}

// broken is the outcome of a repository that is that entry's error.
func broken(repo, ref string, unreachable bool, err error) repoOutcome {
	return repoOutcome{unreachable: unreachable, entry: &Entry{Name: repo, Ref: ref, Err: fmt.Errorf("repository %s: %w", repo, err)}}
}

// resolve finds what the manifest a lookup found offers: from the cache,
// from the run's hint of the entry at the same upstream digest, or read.
// A manifest that cannot be read is the entry's error, without an
// Upstream: reading it again may cure it.
func (o *OCI) resolve(ctx context.Context, c *conn, repo string, out repoOutcome, hints map[string]Hint) repoOutcome {
	if out.digest == "" {
		return out
	}
	puller := c.puller
	ref, upstream := o.ref(repo, out.digest), c.upstream(out.digest)
	o.mu.Lock()
	res, ok := o.cache[out.digest]
	o.mu.Unlock()
	if !ok {
		if h, hinted := hints[repo]; hinted && h.Upstream == upstream {
			if h.Quiet() {
				out.quiet = true
			} else {
				out.entry = &Entry{Name: repo, Ref: ref, Upstream: upstream, Hint: &h}
			}
			return out
		}
		var err error
		if res, err = o.inspect(ctx, puller, out.tag.Context().Digest(out.digest), out.got); err != nil {
			b := broken(repo, ref, true, err)
			b.digest = out.digest
			return b
		}
		o.mu.Lock()
		o.cache[out.digest] = res
		o.mu.Unlock()
	}
	if !res.offers {
		out.quiet = true
		return out
	}
	e := &Entry{Name: repo, Ref: ref, Upstream: upstream}
	if res.problem != "" {
		e.Err = fmt.Errorf("repository %s: %s", repo, res.problem)
	} else if s, err := spec.Parse([]byte(res.label)); err != nil {
		what := "label " + spec.LabelKey
		if res.artifact {
			what = "spec artifact"
		}
		e.Err = fmt.Errorf("repository %s: %s: %w", repo, what, err)
	} else {
		s.Platforms = slices.Clone(res.platforms)
		e.Spec = s
		out.fatal = verifyEntry(ctx, c, &o.verified, out.tag.Context(), out.digest, e, "repository "+repo)
	}
	out.entry = e
	return out
}

// inspect reads what one manifest offers. got is the manifest if it was
// already fetched.
func (o *OCI) inspect(ctx context.Context, puller *remote.Puller, ref name.Digest, got *remote.Descriptor) (ociResult, error) {
	if got == nil {
		var err error
		if got, err = puller.Get(ctx, ref); err != nil {
			return ociResult{}, err
		}
	}
	switch {
	case got.MediaType.IsIndex():
		idx, err := got.ImageIndex()
		if err != nil {
			return ociResult{}, err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return ociResult{}, err
		}
		var platforms []spec.Platform
		for _, m := range im.Manifests {
			if p, ok := platformOf(m.Platform); ok {
				platforms = append(platforms, p)
			}
		}
		platforms = sortPlatforms(platforms)
		for _, m := range im.Manifests {
			// Attestations (buildx provenance, SBOMs) sit in the index as
			// unknown/unknown images; they are not the service's image.
			if m.Platform != nil && (m.Platform.OS == "unknown" || m.Platform.Architecture == "unknown") {
				continue
			}
			// A nested index is not followed: no tool builds spec images so.
			if !m.MediaType.IsImage() {
				continue
			}
			img, err := idx.Image(m.Digest)
			if err != nil {
				return ociResult{}, fmt.Errorf("manifest %s: %w", m.Digest, err)
			}
			manifest, err := img.Manifest()
			if err != nil {
				return ociResult{}, fmt.Errorf("manifest %s: %w", m.Digest, err)
			}
			label, ok, _, err := imageLabel(img, manifest)
			if err != nil {
				return ociResult{}, fmt.Errorf("manifest %s: %w", m.Digest, err)
			}
			if ok {
				return ociResult{offers: true, label: label, platforms: platforms}, nil
			}
		}
		return ociResult{}, nil
	case got.MediaType.IsImage():
		img, err := got.Image()
		if err != nil {
			return ociResult{}, err
		}
		// Parsed once, for both ways an image can carry a spec.
		m, err := img.Manifest()
		if err != nil {
			return ociResult{}, fmt.Errorf("manifest: %w", err)
		}
		if res, ok, err := specArtifact(img, m); ok || err != nil {
			return res, err
		}
		label, ok, cf, err := imageLabel(img, m)
		if err != nil || !ok {
			return ociResult{}, err
		}
		var platforms []spec.Platform
		if p, ok := platformOf(&v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}); ok {
			platforms = []spec.Platform{p}
		}
		return ociResult{offers: true, label: label, platforms: platforms}, nil
	default:
		// Schema 1 manifests, artifacts: registries hold more than spec
		// images.
		return ociResult{}, nil
	}
}

// Select returns the entry a change concerns. See Selector. A push is
// selected only when it is of the configured tag (the tag is what the
// source reads; a push by digest alone changes no tag, and a
// multi-platform push sends one for every platform before its tag); a
// delete of the tag, of a digest (it may be the one the tag names) or of
// the repository is selected. A referrer's push (a signature pushed after
// the image) is selected when the source verifies: the entry is checked
// again.
func (o *OCI) Select(c Change) (string, bool) {
	if c.Host != "" && !sameHost(c.Host, o.cfg.Host) {
		return "", false
	}
	entry, ok := o.entryOf(strings.Trim(c.Repository, "/"))
	if !ok {
		return "", false
	}
	if !o.SelectsEntry(entry) {
		return "", false
	}
	switch {
	case c.Referrer && !c.Deleted && o.cfg.Verify != nil:
		return entry, true
	case c.Referrer && !c.Deleted:
		return "", false
	case c.Tag != "" && c.Tag == o.cfg.Tag:
		return entry, true
	case c.Tag != "":
		return "", false
	case c.Deleted:
		return entry, true
	default:
		return "", false
	}
}

// dockerHubHosts are the names Docker Hub's registry goes by.
var dockerHubHosts = map[string]bool{"docker.io": true, "index.docker.io": true, "registry-1.docker.io": true}

// sameHost compares registry hosts as references name them: case does
// not matter, and Docker Hub has several names.
func sameHost(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	return a == b || (dockerHubHosts[a] && dockerHubHosts[b])
}

func init() {
	Register(Kind{Type: "oci", New: func() Block { return new(OCIBlock) }, Credentials: AuthCredentials, Order: 10})
}

// OCIBlock is the registries file's oci block: an OCI Distribution
// registry.
type OCIBlock struct {
	Host string `json:"host"`
	// Prefix scopes the registry to the repositories under a path of the
	// host (Artifact Registry: PROJECT/REPOSITORY); entry names,
	// repositories, allow and deny are relative to it.
	Prefix       string   `json:"prefix,omitempty"`
	Insecure     bool     `json:"insecure,omitempty"`
	Repositories []string `json:"repositories,omitempty"`
	Tag          string   `json:"tag,omitempty"`
	PageSize     int      `json:"page_size,omitempty"`
	Concurrency  int      `json:"concurrency,omitempty"`
	Timeout      Duration `json:"timeout,omitempty"`
	Auth         Auth     `json:"auth,omitempty"`
}

// Build checks the block and builds its source. NewOCI's errors name
// the block ("oci: host is required").
func (b *OCIBlock) Build(bc BuildContext) (Source, error) {
	return NewOCI(OCIConfig{
		Host: b.Host, Prefix: b.Prefix, Insecure: b.Insecure, Repositories: b.Repositories, Tag: b.Tag,
		Filter: bc.Filter, Auth: b.Auth, PageSize: b.PageSize, Concurrency: b.Concurrency,
		Timeout: time.Duration(b.Timeout), Verify: bc.Verify,
	})
}

// Describe is the host and prefix.
func (b *OCIBlock) Describe() Description {
	return Description{Location: hostPath(b.Host, b.Prefix), Auth: authType(b.Auth)}
}
