package registry

// The machinery every source that reads OCI manifests shares (oci, helm
// charts in an OCI registry, dockerhub, ghcr): one fetch's connection
// (credentials, transport, puller), the catalog listing, reading an
// image's label and platforms, bounded concurrency and the errors.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/specsync/specsync/pkg/spec"
)

// defaultOCIBackoff is the retry of go-containerregistry's requests
// (408/429/5xx and network blips). Its own default (1s then 3s, per
// request) would let one flaky repository eat most of a scheduled run, and
// its sleeps ignore the context; a short one still rides out a blip.
var defaultOCIBackoff = remote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 3}

// conn is one fetch's way to the registry: its credentials (read for this
// fetch only), the secrets to keep out of errors, and the puller.
type conn struct {
	where   string
	creds   authn.AuthConfig
	secrets []string
	auth    authn.Authenticator
	opts    []remote.Option
	puller  *remote.Puller
	// retryAfter is the last Retry-After the registry sent (retryAfters).
	retryAfter atomic.Value
	// verifier is the registry's verify policy, loaded for this fetch
	// (oci_verify.go); nil without one.
	verifier Verifier
}

func (c *conn) fail(err error) (*Listing, error) {
	return nil, redact(withRetryAfter(err, &c.retryAfter), c.secrets)
}

// ociClient is how a source talks to a registry.
type ociClient struct {
	auth Auth
	// google is auth type google's token source (google.go), nil for the
	// other types.
	google      *googleTokens
	transport   http.RoundTripper
	pageSize    int
	concurrency int
	backoff     remote.Backoff
}

// connectOCI reads the credentials and builds the puller of one fetch of
// the registry at host, under prefix.
func connectOCI(ctx context.Context, host, prefix string, client ociClient) (*conn, error) {
	where := "registry " + join(host, prefix)
	creds, err := ociCredentials(ctx, client.auth, client.google)
	if err != nil {
		return nil, fmt.Errorf("%s: credentials: %w", where, err)
	}
	c := &conn{where: where, creds: creds, secrets: secretsOf(creds), auth: authn.Anonymous}
	if creds != (authn.AuthConfig{}) {
		c.auth = authn.FromConfig(creds)
	}
	c.opts = []remote.Option{
		remote.WithAuth(c.auth),
		remote.WithTransport(retryAfters{inner: client.transport, last: &c.retryAfter}),
		remote.WithPageSize(client.pageSize),
		// Its blob limiter (4 by default) would otherwise cap config
		// fetches below Concurrency.
		remote.WithJobs(client.concurrency),
		remote.WithRetryBackoff(client.backoff),
		remote.WithUserAgent("specsync"),
	}
	if c.puller, err = remote.NewPuller(c.opts...); err != nil {
		return nil, redact(fmt.Errorf("%s: %w", where, err), c.secrets)
	}
	return c, nil
}

// each calls f for 0..n-1, concurrency at a time.
func each(concurrency, n int, f func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(concurrency, n) {
		wg.Go(func() {
			for i := range work {
				f(i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

// allFailed is the failure of a fetch in which every repository failed to
// load: the registry is down or refuses the credentials, the fetch's
// failure, not each entry's. It names the first failure by entry name.
func allFailed[O interface{ unreached() *Entry }](outcomes []O) error {
	var first *Entry
	for _, o := range outcomes {
		e := o.unreached()
		if e == nil {
			return nil
		}
		if first == nil || e.Name < first.Name {
			first = e
		}
	}
	if first == nil {
		return nil
	}
	return fmt.Errorf("all %d repositories failed, first: %w", len(outcomes), first.Err)
}

// pruneCache deletes from cache, under mu, every key not in keep: a
// source's cache of what a digest holds, kept to the digests of its last
// complete fetch so that it cannot outgrow the registry.
func pruneCache[V any](mu *sync.Mutex, cache map[string]V, keep map[string]bool) {
	mu.Lock()
	defer mu.Unlock()
	maps.DeleteFunc(cache, func(k string, _ V) bool { return !keep[k] })
}

// redacted is e with its error redacted.
func redacted(e Entry, secrets []string) Entry {
	e.Err = redact(e.Err, secrets)
	return e
}

// timedOut makes a fetch's timeout say so: go-containerregistry reports it
// as whatever request was in flight.
func timedOut(ctx context.Context, timeout time.Duration, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("fetch did not finish within %s: %w", timeout, err)
	}
	return err
}

// catalogRepositories lists every repository of reg's catalog, page by
// page; any failed page fails the whole list. block names the registries
// file's block whose page_size and repositories are the cures when the
// registry cuts its list (the oci and helm sources read catalogs alike).
func catalogRepositories(ctx context.Context, puller *remote.Puller, reg name.Registry, opts []remote.Option, pageSize int, block string) ([]string, error) {
	cat, err := puller.Catalogger(ctx, reg)
	if err != nil {
		return nil, fmt.Errorf("catalog page 1: %w", catalogError(err))
	}
	var repos, last []string
	dup := map[string]bool{}
	links := map[string]bool{}
	page := 1
	add := func(p []string) {
		last = p
		for _, r := range p {
			if !dup[r] {
				dup[r] = true
				repos = append(repos, r)
			}
		}
	}
	for ; cat.HasNext(); page++ {
		p, err := cat.Next(ctx)
		if err != nil {
			return nil, fmt.Errorf("catalog page %d: %w", page, catalogError(err))
		}
		add(p.Repos)
		if p.Next != "" {
			if links[p.Next] {
				return nil, fmt.Errorf("catalog page %d links back to an earlier page", page)
			}
			links[p.Next] = true
		}
	}
	// A full last page without a Link header is ambiguous: the catalog may
	// end there, or the registry may not paginate at all and have cut the
	// list at n (go-containerregistry's own registry does, in map order).
	// Taking the cut list as complete would mark every repository past it,
	// so ask for the page after it by the spec's "last" parameter: one
	// request, only when the count is a multiple of the page size.
	probe := append(slices.Clone(opts), remote.WithContext(ctx))
	for len(last) >= pageSize {
		from := last[len(last)-1]
		next, err := remote.CatalogPage(reg, from, pageSize, probe...)
		if err != nil {
			return nil, fmt.Errorf("catalog page %d (after a full page without a Link header): %w", page, err)
		}
		if len(last) > pageSize && sameRepos(next, last) {
			// It ignored n as well and answers every request with the
			// same list, longer than asked for: that list is all it has.
			break
		}
		for _, r := range next {
			// Distribution lists repositories in lexical order and starts
			// a page after "last"; a registry that repeats a name or goes
			// back ignores "last", so no request can list the rest.
			if r <= from || dup[r] {
				return nil, fmt.Errorf("catalog page %d: the registry ignores catalog pagination "+
					"(a full page of %d without a Link header, and \"last\" is not honoured), so the "+
					"repository list may be cut short; set %s.page_size above the number of "+
					"repositories or list %s.repositories explicitly", page, pageSize, block, block)
			}
		}
		add(next)
		page++
	}
	return repos, nil
}

// catalogError marks a catalog page go-containerregistry could not decode
// as JSON (Malformed): its errors are the decoder's own.
func catalogError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) {
		return malformed(err)
	}
	return err
}

// sameRepos reports whether a and b name the same repositories.
func sameRepos(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// imageLabel reads an image's spec label; m is its manifest. An image
// whose config is not an image config (a Helm chart, a signature, some
// other artifact) has none.
func imageLabel(img v1.Image, m *v1.Manifest) (label string, ok bool, cf *v1.ConfigFile, err error) {
	if !m.Config.MediaType.IsConfig() {
		return "", false, nil, nil
	}
	cf, err = img.ConfigFile()
	if err != nil {
		return "", false, nil, fmt.Errorf("config: %w", err)
	}
	label, ok = cf.Config.Labels[spec.LabelKey]
	return label, ok, cf, nil
}

func platformOf(p *v1.Platform) (spec.Platform, bool) {
	if p == nil || p.OS == "" || p.Architecture == "" || p.OS == "unknown" || p.Architecture == "unknown" {
		return spec.Platform{}, false
	}
	return spec.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}, true
}

func sortPlatforms(ps []spec.Platform) []spec.Platform {
	slices.SortFunc(ps, func(a, b spec.Platform) int {
		return cmp.Or(cmp.Compare(a.OS, b.OS), cmp.Compare(a.Architecture, b.Architecture), cmp.Compare(a.Variant, b.Variant))
	})
	return slices.Compact(ps)
}

// notFound reports a missing tag or repository: the repository offers
// nothing, which is not an error.
func notFound(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	if te.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range te.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}

func isTransportError(err error) bool {
	var te *transport.Error
	return errors.As(err, &te)
}
