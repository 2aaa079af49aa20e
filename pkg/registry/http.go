package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/specsync/specsync/pkg/spec"
)

// HTTP defaults.
const (
	DefaultHTTPTimeout  = 30 * time.Second
	DefaultHTTPMaxBytes = 8 << 20
)

// HTTPConfig configures a source that is one index document (a YAML or
// JSON list of specs, or a mapping with a "specs" list) at a URL.
type HTTPConfig struct {
	URL    string
	Filter *Filter
	// Auth, when basic or token, becomes the Authorization header.
	Auth Auth
	// Timeout bounds the whole fetch, body included (default 30s).
	Timeout time.Duration
	// Client replaces a default client (tests, proxies).
	Client *http.Client
	// MaxBytes bounds the body (default 8 MiB); a bigger one is a fetch
	// error, not a truncated listing.
	MaxBytes int64
}

// HTTP lists the specs of an index document.
type HTTP struct {
	cfg HTTPConfig
	// google holds the token source of auth type google (google.go).
	google *googleTokens
}

// NewHTTP checks cfg and fills in defaults.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	var probs problems
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		probs.add(errors.New("http.url is required"))
	case err != nil:
		probs.add(fmt.Errorf("http.url: %w", err))
	case u.Scheme != "http" && u.Scheme != "https":
		probs.add(fmt.Errorf("http.url %q must be http or https", cfg.URL))
	case u.Host == "":
		probs.add(fmt.Errorf("http.url %q has no host", cfg.URL))
	case u.User != nil:
		// It would end up in every ref and error; auth takes the password
		// from the environment instead.
		probs.add(errors.New("http.url must not carry credentials; use auth"))
	}
	urlOK := len(probs) == 0
	if cfg.Timeout < 0 {
		probs.add(fmt.Errorf("http.timeout %s must not be negative", cfg.Timeout))
	}
	if cfg.MaxBytes < 0 {
		probs.add(fmt.Errorf("http.max_bytes %d must not be negative", cfg.MaxBytes))
	}
	authOK := !probs.add(cfg.Auth.validate("http"))
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultHTTPTimeout
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultHTTPMaxBytes
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	var google *googleTokens
	if urlOK && authOK {
		google, err = checkGoogleStorage("http", cfg.Auth, cfg.URL, u.Scheme, u.Host, &cfg.Client)
		probs.add(err)
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	return &HTTP{cfg: cfg, google: google}, nil
}

// String names the source for logs; it shows no credential.
func (h *HTTP) String() string { return "http " + h.cfg.URL + " (auth " + h.cfg.Auth.String() + ")" }

// Fetch reads the document, or learns from a 304 that it is unchanged.
func (h *HTTP) Fetch(ctx context.Context, opts FetchOptions) (*Listing, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	where := "index " + h.cfg.URL
	authz, secrets, err := storageAuthorization(ctx, h.cfg.Auth, h.google)
	if err != nil {
		return nil, fmt.Errorf("%s: credentials: %w", where, err)
	}
	fail := func(err error) (*Listing, error) {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("fetch did not finish within %s: %w", h.cfg.Timeout, err)
		}
		return nil, redact(fmt.Errorf("%s: %w", where, err), secrets)
	}

	req, err := indexRequest(ctx, h.cfg.URL, "application/yaml, application/json;q=0.9, text/plain;q=0.5, */*;q=0.1", authz, opts.ETag)
	if err != nil {
		return fail(err)
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()

	if resp.StatusCode == http.StatusNotModified && opts.ETag != "" {
		return &Listing{NotModified: true, Digest: opts.PreviousDigest, ETag: opts.ETag}, nil
	}
	body, err := readBounded(resp, h.cfg.MaxBytes)
	if err != nil {
		return fail(err)
	}
	items, err := spec.ParseList(body)
	if err != nil {
		return fail(malformed(err))
	}

	entries := []Entry{}
	first := map[string]int{}
	for _, it := range items {
		e := Entry{Name: it.Name, Ref: h.cfg.URL + "#" + strconv.Itoa(it.Index), Spec: it.Spec, Err: it.Err}
		if e.Name == "" {
			e.Name = "entry-" + strconv.Itoa(it.Index)
		}
		if !h.cfg.Filter.Allows(e.Name) {
			continue
		}
		if e.Err != nil {
			e.Spec = nil
			e.Err = fmt.Errorf("entry %d (%s): %w", it.Index, e.Name, e.Err)
		}
		if j, dup := first[e.Name]; dup {
			e.Spec = nil
			e.Err = fmt.Errorf("entry %d: name %q is already used by entry %d", it.Index, e.Name, j)
		} else {
			first[e.Name] = it.Index
		}
		entries = append(entries, e)
	}
	// Stable, so that of two entries with one name the first (the one that
	// counts) stays first.
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return &Listing{Entries: entries, Digest: ListingDigest(entries), ETag: resp.Header.Get("ETag")}, nil
}

// indexRequest is the GET of an index document (the http source's, a
// Helm repository's index.yaml): the media types the source reads, its
// credentials, and the validator of its last fetch, so an unchanged
// document is a 304.
func indexRequest(ctx context.Context, url, accept, authz, etag string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "specsync")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	return req, nil
}

// readBounded reads a response body of at most limit bytes, for every
// source that reads a document over HTTP (the http source, Helm's index
// and archives, the hub APIs' pages): a failed status, a body over the
// limit, a body shorter than its Content-Length or a broken chunked
// encoding is an error, never a short document.
func readBounded(resp *http.Response, limit int64) ([]byte, error) {
	body, over, err := readResponse(resp, limit)
	switch {
	case err != nil:
		return nil, err
	case over && resp.ContentLength > limit:
		return nil, fmt.Errorf("body of %d bytes is more than the %d allowed", resp.ContentLength, limit)
	case over:
		return nil, fmt.Errorf("body is more than the %d bytes allowed", limit)
	}
	return body, nil
}

// readResponse is readBounded with a body over the limit reported as over
// (and not read past it) rather than as an error.
func readResponse(resp *http.Response, limit int64) (body []byte, over bool, err error) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		ra := resp.Header.Get("Retry-After")
		return nil, false, &StatusError{Code: resp.StatusCode, RetryAfter: ra,
			Err: fmt.Errorf("status %s: %q%s", resp.Status, snippet, retryAfterNote(ra))}
	}
	if resp.ContentLength > limit {
		return nil, true, nil
	}
	// net/http reports a body shorter than its Content-Length (or a
	// broken chunked encoding) as io.ErrUnexpectedEOF.
	body, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("reading body: %w", err)
	}
	if int64(len(body)) > limit {
		return nil, true, nil
	}
	if resp.ContentLength >= 0 && int64(len(body)) != resp.ContentLength {
		return nil, false, fmt.Errorf("body is %d bytes, Content-Length said %d", len(body), resp.ContentLength)
	}
	return body, false, nil
}

func init() {
	Register(Kind{Type: "http", New: func() Block { return new(HTTPBlock) }, Credentials: AuthCredentials, Order: 20})
}

// HTTPBlock is the registries file's http block: an index document
// served over HTTP(S).
type HTTPBlock struct {
	URL      string   `json:"url"`
	Timeout  Duration `json:"timeout,omitempty"`
	MaxBytes int64    `json:"max_bytes,omitempty"`
	Auth     Auth     `json:"auth,omitempty"`
}

// Build checks the block and builds its source.
func (b *HTTPBlock) Build(bc BuildContext) (Source, error) {
	return NewHTTP(HTTPConfig{
		URL: b.URL, Filter: bc.Filter, Auth: b.Auth, Timeout: time.Duration(b.Timeout), MaxBytes: b.MaxBytes,
	})
}

// Describe is the URL without what may carry a secret.
func (b *HTTPBlock) Describe() Description {
	return Description{Location: safeURL(b.URL), Auth: authType(b.Auth)}
}
