package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// checkRepository checks a chart repository's configuration: every
// problem, each naming its field (authOK: the auth checked out, so its
// host may be checked against it).
func (h *Helm) checkRepository(cfg *HelmConfig, authOK bool) error {
	var probs problems
	u, err := url.Parse(cfg.URL)
	switch {
	case err != nil:
		probs.add(fmt.Errorf("helm.url: %w", err))
	case u.Scheme != "http" && u.Scheme != "https":
		probs.add(fmt.Errorf("helm.url %q must be http or https (charts in an OCI registry: set host instead)", cfg.URL))
	case u.Host == "":
		probs.add(fmt.Errorf("helm.url %q has no host", cfg.URL))
	case u.User != nil:
		// It would end up in every ref and error; auth takes the password
		// from the environment instead.
		probs.add(errors.New("helm.url must not carry credentials; use auth"))
	}
	urlOK := len(probs) == 0
	for _, f := range []struct {
		name string
		set  bool
	}{{"helm.prefix", cfg.Prefix != ""}, {"helm.insecure", cfg.Insecure}, {"helm.repositories", len(cfg.Repositories) > 0}, {"helm.page_size", cfg.PageSize != 0}} {
		if f.set {
			probs.add(fmt.Errorf("%s is for charts in an OCI registry (helm.host), not a chart repository (helm.url)", f.name))
		}
	}
	if cfg.Transport != nil {
		probs.add(errors.New("helm: transport is for charts in an OCI registry; a chart repository takes a client"))
	}
	if !urlOK {
		return probs.err()
	}
	// A Google token goes to Cloud Storage alone: a chart repository in a
	// bucket (https://storage.googleapis.com/BUCKET/PATH), read as the
	// function's own identity.
	if authOK {
		google, err := checkGoogleStorage("helm", cfg.Auth, cfg.URL, u.Scheme, u.Host, &cfg.Client)
		probs.add(err)
		h.google = google
	}
	index, err := resolveChartURL(u, "index.yaml")
	if err != nil {
		probs.add(fmt.Errorf("helm.url: %w", err))
	}
	if cfg.MaxIndexBytes == 0 {
		cfg.MaxIndexBytes = DefaultHelmIndexMaxBytes
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if err := probs.err(); err != nil {
		return err
	}
	h.repo, h.index = u, index.String()
	return nil
}

// resolveChartURL resolves ref (an index entry's URL) as helm does: as it
// is when absolute, else relative to the repository URL taken as a
// directory (a trailing slash added), keeping the repository URL's query.
func resolveChartURL(repo *url.URL, ref string) (*url.URL, error) {
	r, err := url.Parse(ref)
	if err != nil {
		return nil, err
	}
	if r.IsAbs() {
		return r, nil
	}
	base := *repo
	base.Path = strings.TrimSuffix(base.Path, "/") + "/"
	if base.RawPath != "" {
		base.RawPath = strings.TrimSuffix(base.RawPath, "/") + "/"
	}
	out := base.ResolveReference(r)
	out.RawQuery = base.RawQuery
	return out, nil
}

// indexFile is the part of a chart repository's index.yaml specsync
// reads (helm's repo.IndexFile).
type indexFile struct {
	APIVersion string                    `json:"apiVersion"`
	Entries    map[string][]indexVersion `json:"entries"`
}

// indexVersion is one version of a chart in an index: its Chart.yaml
// metadata, where its archive is and the archive's SHA-256.
type indexVersion struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Deprecated bool     `json:"deprecated"`
	URLs       []string `json:"urls"`
	Digest     string   `json:"digest"`
}

// fetchRepository lists a chart repository: its index, then the archive
// of every chart's chosen version not already in the cache.
func (h *Helm) fetchRepository(ctx context.Context, opts FetchOptions) (*Listing, error) {
	where := "chart repository " + RedactURL(h.repo)
	authz, secrets, err := storageAuthorization(ctx, h.cfg.Auth, h.google)
	if err != nil {
		return nil, fmt.Errorf("%s: credentials: %w", where, err)
	}
	fail := func(err error) (*Listing, error) {
		return nil, redact(fmt.Errorf("%s: index: %w", where, timedOut(ctx, h.cfg.Timeout, err)), secrets)
	}
	// Loaded before the index is asked, since its digest decides whether
	// the index's validator may be sent (provenanceETag).
	prov, err := h.provenanceVerifier()
	if err != nil {
		return nil, redact(fmt.Errorf("%s: %w", where, err), secrets)
	}

	req, err := indexRequest(ctx, h.index, "application/yaml, application/x-yaml, text/yaml;q=0.9, */*;q=0.1", authz, provenanceETag(opts.ETag, prov))
	if err != nil {
		return fail(err)
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		return fail(plainURLError(err, h.repo))
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified && provenanceETag(opts.ETag, prov) != "" {
		return &Listing{NotModified: true, Digest: opts.PreviousDigest, ETag: opts.ETag}, nil
	}
	body, err := readBounded(resp, h.cfg.MaxIndexBytes)
	if err != nil {
		return fail(err)
	}
	index, err := parseIndex(body)
	if err != nil {
		return fail(malformed(err))
	}

	names := make([]string, 0, len(index.Entries))
	for n := range index.Entries {
		if h.cfg.Filter.Allows(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	looked := make([]chartOutcome, len(names))
	for i, n := range names {
		looked[i] = h.repositoryLookup(n, index.Entries[n])
		// As an OCI source's Upstream names the policy (conn.upstream).
		if looked[i].upstream != "" && prov != nil {
			looked[i].upstream += " verify " + prov.Digest()
		}
	}
	l, err := h.settle(ctx, looked, opts, secrets, func(ctx context.Context, o chartOutcome) chartOutcome {
		return h.repositoryRead(ctx, o, authz, prov)
	})
	if err != nil {
		// Past the index: a chart's .prov that could not be fetched, the
		// run's hints, the fetch's deadline.
		return nil, redact(fmt.Errorf("%s: %w", where, timedOut(ctx, h.cfg.Timeout, err)), secrets)
	}
	if l.NotModified {
		// The index changed, not what it offers: its new validator saves
		// the next run the index.
		l.ETag = withPolicy(resp.Header.Get("ETag"), prov)
		return l, nil
	}
	// A chart that failed is tried again next run, so the next run must
	// not learn from a 304 that nothing changed: the listing depends on
	// the archives too. (A chart broken for good is in the cache: reading
	// it again costs nothing upstream.)
	if !slices.ContainsFunc(l.Entries, func(e Entry) bool { return e.Err != nil }) {
		l.ETag = withPolicy(resp.Header.Get("ETag"), prov)
	}
	return l, nil
}

// parseIndex reads an index document, or says why it is not one.
func parseIndex(body []byte) (*indexFile, error) {
	var index indexFile
	// sigs.k8s.io/yaml is what helm reads indexes with: YAML or JSON, and
	// a number where a string is due (an unquoted version) is read as
	// its text.
	if err := yaml.Unmarshal(body, &index); err != nil {
		return nil, fmt.Errorf("not a chart repository index: %w", err)
	}
	if index.APIVersion == "" {
		return nil, errors.New("not a chart repository index: it has no apiVersion")
	}
	return &index, nil
}

// plainURLError drops the request URL net/http puts in its errors (it may
// carry a query token), naming the URL without it instead.
func plainURLError(err error, u *url.URL) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, RedactURL(u), ue.Err)
	}
	return err
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// repositoryLookup is what one chart of an index offers as far as the
// index says: the version chosen and its archive's URL and digest,
// pending; or nothing, or the chart's error.
func (h *Helm) repositoryLookup(name string, versions []indexVersion) chartOutcome {
	cvs := make([]chartVersion, len(versions))
	for i, v := range versions {
		cvs[i] = chartVersion{version: v.Version, deprecated: v.Deprecated, urls: v.URLs, digest: v.Digest}
	}
	// broken is the chart's error; version is the one read ("" before
	// one is chosen).
	broken := func(ref string, version string, err error) chartOutcome {
		if version != "" {
			err = fmt.Errorf("version %s: %w", version, err)
		}
		return chartOutcome{name: name, entry: &Entry{Name: name, Ref: ref, Err: fmt.Errorf("chart %s %w", name, err)}}
	}
	v, ok, err := h.pick(cvs)
	switch {
	case err != nil:
		return broken(RedactURL(h.repo), "", err)
	case !ok:
		return chartOutcome{}
	case v.deprecated:
		// Deprecating a chart is publishing a last version marked so:
		// helm hides it from searches, and it offers nothing here.
		return chartOutcome{}
	case len(v.urls) == 0:
		return broken(RedactURL(h.repo), v.version, errors.New("the index gives no urls"))
	}
	u, err := resolveChartURL(h.repo, v.urls[0])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return broken(RedactURL(h.repo), v.version, fmt.Errorf("url %q is not an http(s) URL", v.urls[0]))
	}
	ref := RedactURL(u)
	digest := strings.ToLower(strings.TrimPrefix(v.digest, "sha256:"))
	if digest != "" && !sha256Hex.MatchString(digest) {
		return broken(ref, v.version, fmt.Errorf("the index's digest %q is not a SHA-256", v.digest))
	}
	out := chartOutcome{name: name, pending: true, v: v, ref: ref, url: u}
	// The digest names the archive: the cache key, the ref the spec came
	// from and, with the version, the chart's Upstream. Without one
	// nothing is cached or hinted (the same URL may serve another archive
	// tomorrow) and every fetch downloads the archive.
	if digest != "" {
		out.key, out.ref = "sha256:"+digest, ref+"@sha256:"+digest
		out.upstream = helmUpstream(RedactURL(h.repo), v.version, out.key)
	}
	return out
}

// repositoryRead reads what a looked-up chart's archive offers, from the
// cache when it knows the digest, and with verify (prov) checks its
// provenance (helm_prov.go).
func (h *Helm) repositoryRead(ctx context.Context, o chartOutcome, authz string, prov ProvenanceVerifier) chartOutcome {
	broken := func(unreachable bool, err error) chartOutcome {
		return chartOutcome{name: o.name, unreachable: unreachable,
			entry: &Entry{Name: o.name, Ref: o.ref, Err: fmt.Errorf("chart %s version %s: %w", o.name, o.v.version, err)}}
	}
	// sum is the archive bytes' digest: the key a cached archive was
	// checked against when it was read, else this download's.
	sum := o.key
	c, ok := h.cached(o.key)
	if !ok {
		archive, over, err := h.download(ctx, o.url, authz)
		switch {
		case err != nil:
			return broken(true, fmt.Errorf("archive: %w", err))
		case over:
			return broken(false, fmt.Errorf("the archive is more than the %d bytes allowed", h.cfg.MaxChartBytes))
		}
		digest := sha256.Sum256(archive)
		sum = "sha256:" + hex.EncodeToString(digest[:])
		if o.key != "" && sum != o.key {
			// Not cached, no Upstream: the archive may be replaced, or
			// the index fixed, by the next run.
			return broken(false, fmt.Errorf("the archive's digest is %s, the index says %s", sum, o.key))
		}
		c = readChartContent(archive, h.cfg.MaxChartUnpackedBytes)
		h.remember(o.key, c)
	}
	out := h.readOutcome(o, c, RedactURL(h.repo))
	if prov != nil && out.entry != nil && out.entry.Spec != nil {
		out.fatal = h.verifyChart(ctx, prov, o, out.entry, sum, authz)
	}
	return out
}

// download GETs a chart archive (over: it is bigger than MaxChartBytes).
func (h *Helm) download(ctx context.Context, u *url.URL, authz string) (archive []byte, over bool, err error) {
	resp, err := h.get(ctx, u, authz, "application/gzip, application/x-gzip, application/octet-stream;q=0.9, */*;q=0.1")
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	return readResponse(resp, h.cfg.MaxChartBytes)
}

// get GETs a file the index names (an archive, its .prov). The
// repository's credentials go only to the repository's own scheme, host
// and port: an index may name files on any host.
func (h *Helm) get(ctx context.Context, u *url.URL, authz, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, plainURLError(err, u)
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "specsync")
	if authz != "" && u.Scheme == h.repo.Scheme && u.Host == h.repo.Host {
		req.Header.Set("Authorization", authz)
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		return nil, plainURLError(err, u)
	}
	return resp, nil
}
