package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The listing APIs of registries without a catalog (Docker Hub's
// repositories of a namespace, GitHub's packages of an owner) share this
// client: one GET of one page, with the rules every page obeys. Like a
// catalog page, a page either arrives whole and well-formed or fails the
// listing; nothing here ever returns part of a page.

// DefaultHubPageSize is the page size of the listing APIs: the largest
// page Docker Hub's and GitHub's APIs give.
const DefaultHubPageSize = 100

// maxAPIPageBytes bounds one page's body. A page of 100 GitHub packages,
// each with its owner and repository objects, is about 500 KiB.
const maxAPIPageBytes = 8 << 20

// listAPI is a listing API at a base URL.
type listAPI struct {
	// name says whose API it is in errors ("Docker Hub", "GitHub").
	name   string
	base   *url.URL
	client *http.Client
	// header is sent with every request (Accept, API version).
	header http.Header
	// backoff paces the retries of a page that answered 502, 503 or 504 or
	// whose connection broke: a blip is ridden out, an outage fails the
	// page within the fetch's timeout. A 429 is never retried here: it
	// says when to come back, and that is a later run's business.
	backoff []time.Duration
}

func newListAPI(name, rawURL string, transport http.RoundTripper, header http.Header) (*listAPI, error) {
	base, err := parseAPIURL(rawURL)
	if err != nil {
		return nil, err
	}
	if transport == nil {
		transport = http.DefaultTransport
	}
	return &listAPI{
		name: name, base: base, header: header,
		client:  &http.Client{Transport: transport, CheckRedirect: sameOriginRedirect(base)},
		backoff: []time.Duration{200 * time.Millisecond, 600 * time.Millisecond},
	}, nil
}

// parseAPIURL checks an API's base URL: http or https, a host, no
// credentials, query or fragment. The trailing slash is dropped.
func parseAPIURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return nil, err
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q must be an http or https URL", raw)
	case u.Host == "":
		return nil, fmt.Errorf("%q has no host", raw)
	case u.User != nil:
		// It would end up in errors; auth names the secrets instead.
		return nil, fmt.Errorf("%q must not carry credentials; use auth", raw)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q must not have a query or fragment", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// sameOriginRedirect follows a redirect only within the API's origin:
// the credentials of the request must not travel to another host.
func sameOriginRedirect(base *url.URL) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("stopped after 5 redirects")
		}
		if !sameOrigin(base, req.URL) {
			return fmt.Errorf("redirected to %s, outside %s", req.URL.Redacted(), base.Redacted())
		}
		return nil
	}
}

// sameOrigin reports whether u lies within the API at base: same scheme
// and host, under base's path. Next-page links are checked with it, so
// that a page cannot send the credentials elsewhere.
func sameOrigin(base, u *url.URL) bool {
	return u.Scheme == base.Scheme && strings.EqualFold(u.Host, base.Host) &&
		(base.Path == "" || u.Path == base.Path || strings.HasPrefix(u.Path, base.Path+"/"))
}

// endpoint is the URL of a path under the API's base.
func (a *listAPI) endpoint(path string, query url.Values) *url.URL {
	u := *a.base
	u.Path = a.base.Path + path
	u.RawQuery = query.Encode()
	return &u
}

// next resolves a next-page link against the page it came from and
// checks that it stays within the API.
func (a *listAPI) next(from *url.URL, link string) (*url.URL, error) {
	u, err := from.Parse(link)
	if err != nil {
		return nil, fmt.Errorf("next-page link %q: %w", link, err)
	}
	if !sameOrigin(a.base, u) {
		return nil, fmt.Errorf("next-page link %s leaves %s", u.Redacted(), a.base.Redacted())
	}
	return u, nil
}

// page is one answer of the API: its status was 200 and its body was read
// whole.
type page struct {
	header http.Header
	body   []byte
}

// get fetches one page. Any status but 200, a body cut short or over the
// limit, or a connection that breaks (after the retries) is an error.
// authz is the Authorization header ("" for none).
func (a *listAPI) get(ctx context.Context, u *url.URL, authz string) (*page, error) {
	for attempt := 0; ; attempt++ {
		p, retry, err := a.getOnce(ctx, http.MethodGet, u, authz, nil)
		if err == nil || !retry || attempt >= len(a.backoff) || ctx.Err() != nil {
			return p, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(a.backoff[attempt]):
		}
	}
}

// post sends a JSON body and reads the answer as get does, without
// retries (a login is not worth repeating into an outage).
func (a *listAPI) post(ctx context.Context, u *url.URL, body any) (*page, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	p, _, err := a.getOnce(ctx, http.MethodPost, u, "", b)
	return p, err
}

func (a *listAPI) getOnce(ctx context.Context, method string, u *url.URL, authz string, body []byte) (*page, bool, error) {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, false, err
	}
	for k, v := range a.header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "specsync")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		// A broken connection is worth another try; a context that ended
		// is not.
		return nil, ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := a.statusError(resp)
		switch resp.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return nil, true, err
		}
		return nil, false, err
	}
	b, err := readBounded(resp, maxAPIPageBytes)
	if err != nil {
		return nil, false, err
	}
	return &page{header: resp.Header, body: b}, false, nil
}

// statusError describes an answer other than 200: its status, the API's
// own message, and when a rate limit says to come back (Retry-After,
// Docker Hub's X-Retry-After, GitHub's x-ratelimit-reset). The caller
// redacts it.
func (a *listAPI) statusError(resp *http.Response) error {
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	msg := apiMessage(snippet)
	var b strings.Builder
	b.WriteString(resp.Status)
	if msg != "" {
		fmt.Fprintf(&b, ": %q", msg)
	}
	limited := resp.StatusCode == http.StatusTooManyRequests ||
		(resp.StatusCode == http.StatusForbidden && (resp.Header.Get("X-Ratelimit-Remaining") == "0" || resp.Header.Get("Retry-After") != ""))
	if limited {
		b.WriteString(" (rate limited")
		if v := resp.Header.Get("Retry-After"); v != "" {
			fmt.Fprintf(&b, "; Retry-After: %s", v)
		}
		if v := unixTime(resp.Header.Get("X-Retry-After")); v != "" {
			fmt.Fprintf(&b, "; retry after %s", v)
		}
		if resp.Header.Get("X-Ratelimit-Remaining") == "0" {
			if v := unixTime(resp.Header.Get("X-Ratelimit-Reset")); v != "" {
				fmt.Fprintf(&b, "; the limit resets at %s", v)
			}
		}
		b.WriteString("; this run does not wait, a later one will try again)")
	}
	return &StatusError{Code: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"),
		Err: fmt.Errorf("%s API answered %s", a.name, b.String())}
}

// apiMessage is an error body's own message: Docker Hub's "detail" or
// "message", GitHub's "message", else the start of the body.
func apiMessage(body []byte) string {
	var e struct {
		Detail  string `json:"detail"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil {
		if e.Detail != "" {
			return e.Detail
		}
		if e.Message != "" {
			return e.Message
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 256 {
		s = s[:256]
	}
	return s
}

// unixTime renders a Unix timestamp header in UTC ("" if it is none).
func unixTime(v string) string {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return ""
	}
	return time.Unix(n, 0).UTC().Format(time.RFC3339)
}

// pageRules are the checks every paginated listing makes, whatever its
// API: a next-page link seen before is a loop, a name listed twice means
// the listing shifted under the pages, a page short of the page size that
// still links a next one was cut, a page longer than the page size is not
// a page of this listing.
type pageRules struct {
	what     string // "repositories", "packages"
	pageSize int
	links    map[string]int
	names    map[string]int
}

// newPageRules starts the checks of a listing whose first page is first.
func newPageRules(what string, pageSize int, first *url.URL) *pageRules {
	return &pageRules{what: what, pageSize: pageSize, links: map[string]int{first.String(): 1}, names: map[string]int{}}
}

// add checks page k's names.
func (r *pageRules) add(k int, names []string) error {
	if len(names) > r.pageSize {
		return fmt.Errorf("page %d has %d %s, more than the page size of %d", k, len(names), r.what, r.pageSize)
	}
	for _, n := range names {
		if j, dup := r.names[n]; dup {
			return fmt.Errorf("page %d lists %q again (page %d listed it): the %s shifted while they were listed", k, n, j, r.what)
		}
		r.names[n] = k
	}
	return nil
}

// follow checks that page k, with n items, may link the next page u.
func (r *pageRules) follow(k, n int, u *url.URL) error {
	if n < r.pageSize {
		return fmt.Errorf("page %d has %d %s, fewer than the page size of %d, yet links a next page: the page was cut short", k, n, r.what, r.pageSize)
	}
	key := u.String()
	if j, seen := r.links[key]; seen {
		return fmt.Errorf("page %d links back to page %d", k, j)
	}
	r.links[key] = k + 1
	return nil
}

// viaOCI is what the sources listed through an API (Docker Hub, GHCR,
// Quay) share: each lists its repositories through its own API (the OCI
// source's Lister, a RepositoryLister) and reads, fetches and selects
// entries through the OCI path, so that their images cost, fail and
// answer events exactly as an OCI registry's do.
type viaOCI struct{ oci *OCI }

// Fetch lists the repositories through the source's API and reads each
// one's image through the OCI path. See Source.
func (v viaOCI) Fetch(ctx context.Context, opts FetchOptions) (*Listing, error) {
	return v.oci.Fetch(ctx, opts)
}

// FetchEntries fetches the named repositories through the OCI path
// alone: no API page at all. See EntryFetcher.
func (v viaOCI) FetchEntries(ctx context.Context, names []string, opts FetchOptions) (*Listing, error) {
	return v.oci.FetchEntries(ctx, names, opts)
}

// Select returns the entry a change concerns. See Selector.
func (v viaOCI) Select(c Change) (string, bool) { return v.oci.Select(c) }

// SelectsEntry reports whether the source selects entry. See
// EntrySelector.
func (v viaOCI) SelectsEntry(entry string) bool { return v.oci.SelectsEntry(entry) }
