package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// googleListPageSize is the n of a tags/list request to a Google registry.
// Artifact Registry answers up to 10,000 items in one response, and gcrane
// asks for as many.
var googleListPageSize = 10000

// googleListMaxBytes bounds one tags/list body: 10,000 children and
// manifests fit in a few MiB.
const googleListMaxBytes = 32 << 20

// googleTags is a tags/list answer as Container Registry and Artifact
// Registry give it (go-containerregistry's google.Tags): besides the
// repository's tags, its child repositories, one path component each, and
// its manifests by digest.
type googleTags struct {
	Name      string                     `json:"name"`
	Tags      []string                   `json:"tags"`
	Children  []string                   `json:"child"`
	Manifests map[string]json.RawMessage `json:"manifest"`
}

// walksChildren says whether the repositories under the prefix are listed
// by walking tags/list children, the way Artifact Registry lists a
// repository (gcrane ls -r): on Google's hosts with a prefix. Artifact
// Registry answers /v2/_catalog too, but with every repository the caller
// may read on the regional host, across projects, which the prefix would
// then filter page by page; the walk asks only about what lies under the
// prefix. Other hosts keep the filtered catalog.
func (o *OCI) walksChildren() bool { return o.walk().applies() }

// googleWalk is what walking a Google registry's children takes: the
// oci source's and the helm source's (charts in Artifact Registry) alike.
type googleWalk struct {
	host, prefix string
	nameOpts     []name.Option
	transport    http.RoundTripper
	backoff      remote.Backoff
}

func (o *OCI) walk() googleWalk {
	return googleWalk{host: o.cfg.Host, prefix: o.cfg.Prefix, nameOpts: o.nameOpts, transport: o.cfg.Transport, backoff: o.backoff}
}

// applies says whether the walk lists the repositories: on Google's hosts
// with a prefix (walksChildren).
func (w googleWalk) applies() bool { return w.prefix != "" && googleRegistryHost(w.host) }

// children lists every repository under the prefix that holds an image:
// tags/list of the prefix, then of each child, recursively, every page of
// each. Any failed request fails the whole listing: a partial list would
// read as repositories having disappeared.
func (o *OCI) children(ctx context.Context, c *conn) ([]string, error) {
	return o.walk().children(ctx, c)
}

func (w googleWalk) children(ctx context.Context, c *conn) ([]string, error) {
	rt := transport.NewUserAgent(transport.NewRetry(retryAfters{inner: w.transport, last: &c.retryAfter},
		transport.WithRetryBackoff(w.backoff),
		transport.WithRetryStatusCodes(http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
			http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout)), "specsync")
	var repos []string
	queue := []string{w.prefix}
	seen := map[string]bool{w.prefix: true}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		tags, err := w.tagsList(ctx, c, rt, path)
		if notFound(err) {
			// Nothing under the prefix (the catalog under it would be
			// empty too), or a child deleted since its parent listed it.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tags/list of %s: %w", path, err)
		}
		if path != w.prefix && (len(tags.Tags) > 0 || len(tags.Manifests) > 0) {
			repos = append(repos, path)
		}
		for _, child := range tags.Children {
			if child == "" || strings.Contains(child, "/") {
				return nil, fmt.Errorf("tags/list of %s: child %q is not one path component", path, child)
			}
			p := path + "/" + child
			if _, err := name.NewRepository(w.host+"/"+p, w.nameOpts...); err != nil {
				return nil, fmt.Errorf("tags/list of %s: child %q: %w", path, child, err)
			}
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	sort.Strings(repos)
	return repos, nil
}

// tagsList reads every page of one repository's tags/list.
func (w googleWalk) tagsList(ctx context.Context, c *conn, rt http.RoundTripper, path string) (*googleTags, error) {
	repo, err := name.NewRepository(w.host+"/"+path, w.nameOpts...)
	if err != nil {
		return nil, err
	}
	// One token per path, with that repository's pull scope, as gcrane
	// asks for it.
	tr, err := transport.NewWithContext(ctx, repo.Registry, c.auth, rt, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: tr}
	next := &url.URL{Scheme: repo.Scheme(), Host: repo.RegistryStr(), Path: "/v2/" + path + "/tags/list",
		RawQuery: "n=" + strconv.Itoa(googleListPageSize)}
	out := &googleTags{Manifests: map[string]json.RawMessage{}}
	visited := map[string]bool{}
	for page := 1; next != nil; page++ {
		if visited[next.String()] {
			return nil, fmt.Errorf("page %d links back to an earlier page", page)
		}
		visited[next.String()] = true
		var p googleTags
		if next, err = getTagsPage(ctx, client, repo, next, &p); err != nil {
			return nil, fmt.Errorf("page %d: %w", page, err)
		}
		if next == nil && len(p.Children) >= googleListPageSize {
			// As with a catalog, a full page without a link to the next
			// may be a list cut short; taking it as complete would mark
			// what it left out.
			return nil, fmt.Errorf("page %d: %d children without a link to a next page: the list may be cut short", page, len(p.Children))
		}
		out.Tags = append(out.Tags, p.Tags...)
		out.Children = append(out.Children, p.Children...)
		for d, m := range p.Manifests {
			out.Manifests[d] = m
		}
	}
	return out, nil
}

// getTagsPage GETs one page into p and returns the next page's URL, if
// its Link header names one.
func getTagsPage(ctx context.Context, client *http.Client, repo name.Repository, u *url.URL, p *googleTags) (*url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, googleListMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if len(body) > googleListMaxBytes {
		return nil, fmt.Errorf("body is more than the %d bytes allowed", googleListMaxBytes)
	}
	if err := json.Unmarshal(body, p); err != nil {
		return nil, malformed(fmt.Errorf("not a tags/list answer: %w", err))
	}
	return nextLink(resp, repo)
}

// nextLink is the URL of a Link header's next page, which must be on the
// registry itself: a registry that links elsewhere is not followed.
func nextLink(resp *http.Response, repo name.Repository) (*url.URL, error) {
	link := resp.Header.Get("Link")
	if link == "" {
		return nil, nil
	}
	start, end := strings.IndexByte(link, '<'), strings.IndexByte(link, '>')
	if start != 0 || end < start {
		return nil, fmt.Errorf("malformed Link header %q", link)
	}
	u, err := url.Parse(link[1:end])
	if err != nil {
		return nil, fmt.Errorf("malformed Link header %q: %w", link, err)
	}
	u = resp.Request.URL.ResolveReference(u)
	if u.Scheme != repo.Scheme() || u.Host != repo.RegistryStr() {
		return nil, errors.New("the Link header names another host")
	}
	return u, nil
}
