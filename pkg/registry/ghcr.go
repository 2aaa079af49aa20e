package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/specsync/specsync/pkg/verify/policy"
)

// GitHub Container Registry defaults.
const (
	DefaultGHCRAPI  = "https://api.github.com"
	DefaultGHCRHost = "ghcr.io"
	// GHCRTokenUser is the user name sent with a token (auth type token)
	// to ghcr.io's token service, as GitHub's own tooling does for
	// installation tokens: the registry knows the caller by the token.
	GHCRTokenUser = "x-access-token"
	// gitHubAPIVersion is the REST API version the listing is written to.
	gitHubAPIVersion = "2022-11-28"
)

// GHCR owner types.
const (
	GHCRUser = "user"
	GHCROrg  = "org"
)

// GHCRConfig configures the container packages of a GitHub owner (a user
// or an organization) on ghcr.io: listed through GitHub's REST API
// (ghcr.io has no catalog), each one's image read through the OCI path.
type GHCRConfig struct {
	// Owner is the user or organization; GitHub compares it without
	// regard to case, and the registry's paths are lowercase.
	Owner string
	// OwnerType is "user" or "org": which of GitHub's two package lists
	// to read.
	OwnerType string
	// APIURL is GitHub's REST API (default https://api.github.com; GitHub
	// Enterprise Server: https://HOST/api/v3); Host is the registry
	// (default ghcr.io). Tests and mirrors replace them.
	APIURL string
	Host   string
	// Insecure talks plain HTTP to Host (a local mirror).
	Insecure bool
	// Tag is the tag whose image carries the spec (default "latest").
	Tag    string
	Filter *Filter
	// Auth is required (GitHub lists packages only to a token with
	// read:packages, public ones included): token (a personal access
	// token (classic) or an installation token), or basic (the GitHub user
	// name the token belongs to, and the token as password). The API gets
	// it as a bearer token; ghcr.io's token service gets it with the user
	// name (GHCRTokenUser for type token) for a pull token.
	Auth Auth
	// PageSize is the API's page size (default and at most 100).
	PageSize    int
	Concurrency int
	// Timeout bounds the whole fetch, listing included (default 60s).
	Timeout time.Duration
	// Transport replaces http.DefaultTransport for the API and the
	// registry (tests).
	Transport http.RoundTripper
	// Verify, when set, offers only entries whose manifest is signed as
	// it says (oci_verify.go).
	Verify *policy.Policy
}

// GHCR lists the spec images among a GitHub owner's container packages.
// It lists every package the token may read, whatever its visibility
// (public, private, internal): the same token pulls them.
type GHCR struct {
	cfg GHCRConfig
	// owner is the configured owner in lowercase, as registry paths have
	// it.
	owner string
	api   *listAPI
	viaOCI
}

// gitHubLogin is a GitHub user or organization name.
var gitHubLogin = regexp.MustCompile(`^[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*$`)

// NewGHCR checks cfg and fills in defaults.
func NewGHCR(cfg GHCRConfig) (*GHCR, error) {
	var probs problems
	cfg.Owner = strings.TrimSpace(cfg.Owner)
	// The OCI path checks the rest (host, tag, concurrency, timeout); it
	// is given stand-ins for what is reported here, not to say it twice.
	owner := strings.ToLower(cfg.Owner)
	switch {
	case cfg.Owner == "":
		probs.add(errors.New("ghcr.owner is required"))
	case len(cfg.Owner) > 39 || !gitHubLogin.MatchString(cfg.Owner):
		probs.add(fmt.Errorf("ghcr.owner %q is not a GitHub user or organization name (letters, digits and single hyphens, at most 39)", cfg.Owner))
	}
	if len(probs) > 0 {
		owner = "owner"
	}
	switch {
	case cfg.OwnerType == "":
		probs.add(errors.New("ghcr.owner_type is required: user or org"))
	case cfg.OwnerType != GHCRUser && cfg.OwnerType != GHCROrg:
		probs.add(fmt.Errorf("ghcr.owner_type %q is not one of user, org", cfg.OwnerType))
	}
	if cfg.PageSize < 0 || cfg.PageSize > DefaultHubPageSize {
		probs.add(fmt.Errorf("ghcr.page_size %d must be between 1 and %d", cfg.PageSize, DefaultHubPageSize))
	}
	// pull is cfg.Auth as basic credentials: what the registry trades for a
	// pull token, and whose password the listing sends as a bearer token
	// (the OCI path reads it, once a fetch, and hands it to ghcrLister).
	pull := cfg.Auth
	authOK := !probs.add(cfg.Auth.validate("ghcr"))
	if authOK {
		switch cfg.Auth.kind() {
		case AuthAnonymous:
			probs.add(errors.New("ghcr.auth is required: GitHub lists packages, public ones too, only to a token with read:packages " +
				"(type token with token_env or token_file, or type basic with your GitHub user name and the token as password_env or password_file)"))
		case AuthToken:
			pull = Auth{Type: AuthBasic, Username: GHCRTokenUser, PasswordEnv: cfg.Auth.TokenEnv, PasswordFile: cfg.Auth.TokenFile}
		case AuthBasic:
		default:
			probs.add(fmt.Errorf("ghcr.auth.type %s is not one GHCR takes: token or basic", cfg.Auth.kind()))
		}
	}
	if k := cfg.Auth.kind(); !authOK || (k != AuthBasic && k != AuthToken) {
		pull = Auth{}
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultGHCRAPI
	}
	if cfg.Host == "" {
		cfg.Host = DefaultGHCRHost
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultHubPageSize
	}
	api, err := newListAPI("GitHub", cfg.APIURL, cfg.Transport, http.Header{
		"Accept":               {"application/vnd.github+json"},
		"X-Github-Api-Version": {gitHubAPIVersion},
	})
	if err != nil {
		probs.add(fmt.Errorf("ghcr.api_url: %w", err))
	}
	g := &GHCR{cfg: cfg, owner: owner, api: api}
	g.oci, err = NewOCI(OCIConfig{
		Host: cfg.Host, Prefix: g.owner, Insecure: cfg.Insecure, Lister: ghcrLister{g},
		Tag: cfg.Tag, Filter: cfg.Filter, Auth: pull, Concurrency: cfg.Concurrency,
		Timeout: cfg.Timeout, Transport: cfg.Transport, Verify: cfg.Verify,
	})
	if err != nil {
		probs.add(innerOCIError("ghcr", err))
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	return g, nil
}

// String names the source for logs; it shows no credential.
func (g *GHCR) String() string {
	return "ghcr " + g.cfg.OwnerType + " " + g.owner + " (auth " + g.cfg.Auth.String() + ")"
}

// Select returns the entry a change concerns. See Selector. Events may
// name the owner as GitHub displays it; the registry's paths are
// lowercase.
func (g *GHCR) Select(c Change) (string, bool) {
	c.Repository = strings.ToLower(c.Repository)
	return g.oci.Select(c)
}

// ghcrLister lists the owner's container packages through GitHub's REST
// API: GET /orgs/{org}/packages or /users/{username}/packages with
// package_type=container, page by page along the Link header.
type ghcrLister struct{ g *GHCR }

// gitHubPackage is an item of GitHub's package list. A name may hold
// "/" (a package named after its repository path); the list gives it
// plain, the package's own URLs escape it.
type gitHubPackage struct {
	Name        string `json:"name"`
	PackageType string `json:"package_type"`
	Owner       *struct {
		Login string `json:"login"`
	} `json:"owner"`
}

// ListRepositories lists every container package of the owner or fails.
// See RepositoryLister.
//
// GitHub gives no total. The page count of the first page's rel="last"
// link stands in for it, and every later page must agree; but a package
// deleted from a page already read, while the page count stays, shifts
// the next page's first package onto that page, unread, and no page would
// show it. So a listing of more than one page is read twice and the two
// readings must list the same packages: a change between pages fails the
// fetch (a later run reads it settled), and a package is never missing
// from a listing only because another one went away meanwhile.
func (l ghcrLister) ListRepositories(ctx context.Context, creds authn.AuthConfig) ([]string, error) {
	g := l.g
	secrets := []string{creds.Password}
	first, pages, err := l.read(ctx, "Bearer "+creds.Password)
	if err != nil || pages == 1 {
		return first, redact(err, secrets)
	}
	second, _, err := l.read(ctx, "Bearer "+creds.Password)
	if err != nil {
		return nil, redact(fmt.Errorf("%w (reading it again)", err), secrets)
	}
	if added, removed := diff(first, second); len(added)+len(removed) > 0 {
		return nil, fmt.Errorf("GitHub container packages of %s %s changed while they were listed (read again: %d added %q, %d gone %q); "+
			"GitHub gives no total to check one reading against, so both must agree", g.cfg.OwnerType, g.cfg.Owner,
			len(added), firstFew(added), len(removed), firstFew(removed))
	}
	return first, nil
}

// diff is what b has that a has not, and what a has that b has not.
func diff(a, b []string) (added, removed []string) {
	in := func(xs []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	for _, x := range b {
		if !ina[x] {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !inb[x] {
			removed = append(removed, x)
		}
	}
	return added, removed
}

// firstFew is at most five names, for an error.
func firstFew(names []string) []string { return names[:min(len(names), 5)] }

// read reads the list once, page by page, and returns its packages as
// repository paths and how many pages it had. Its errors are not
// redacted.
func (l ghcrLister) read(ctx context.Context, authz string) ([]string, int, error) {
	g := l.g
	fail := func(k int, err error) ([]string, int, error) {
		return nil, k, fmt.Errorf("GitHub container packages of %s %s, page %d: %w", g.cfg.OwnerType, g.cfg.Owner, k, err)
	}
	list := "/users/"
	if g.cfg.OwnerType == GHCROrg {
		list = "/orgs/"
	}
	u := g.api.endpoint(list+url.PathEscape(g.cfg.Owner)+"/packages", url.Values{
		"package_type": {"container"}, "per_page": {strconv.Itoa(g.cfg.PageSize)}, "page": {"1"},
	})
	rules := newPageRules("packages", g.cfg.PageSize, u)
	lastPage := 0
	var repos []string
	for k := 1; ; k++ {
		p, err := g.api.get(ctx, u, authz)
		if err != nil {
			return fail(k, err)
		}
		var items []gitHubPackage
		if err := json.Unmarshal(p.body, &items); err != nil || items == nil {
			if err == nil {
				err = errors.New("null")
			}
			return fail(k, malformed(fmt.Errorf("not a page of packages: %w", err)))
		}
		links := parseLinks(p.header.Values("Link"))
		if last, ok := links["last"]; ok {
			n, err := pageNumber(last)
			switch {
			case err != nil:
				return fail(k, fmt.Errorf("rel=\"last\" link: %w", err))
			case lastPage == 0:
				lastPage = n
			case n != lastPage:
				return fail(k, fmt.Errorf("the number of pages changed from %d to %d while they were listed", lastPage, n))
			}
		}
		if lastPage > 0 && k > lastPage {
			return fail(k, fmt.Errorf("a page past the last, page %d", lastPage))
		}
		names := make([]string, 0, len(items))
		for _, it := range items {
			switch {
			case it.Name == "":
				return fail(k, errors.New("a package without a name"))
			case it.PackageType != "container":
				return fail(k, fmt.Errorf("package %q is of type %q, not container", it.Name, it.PackageType))
			case it.Owner != nil && !strings.EqualFold(it.Owner.Login, g.cfg.Owner):
				return fail(k, fmt.Errorf("package %q of another owner, %q", it.Name, it.Owner.Login))
			}
			names = append(names, it.Name)
		}
		if err := rules.add(k, names); err != nil {
			return fail(k, err)
		}
		for _, n := range names {
			repos = append(repos, g.owner+"/"+n)
		}
		link, ok := links["next"]
		if !ok {
			if lastPage > 0 && k != lastPage {
				return fail(k, fmt.Errorf("the listing ended at page %d, but its first page counted %d", k, lastPage))
			}
			return repos, k, nil
		}
		next, err := g.api.next(u, link)
		if err != nil {
			return fail(k, err)
		}
		if err := rules.follow(k, len(names), next); err != nil {
			return fail(k, err)
		}
		u = next
	}
}

// parseLinks reads an RFC 8288 Link header (GitHub's pagination):
// `<url>; rel="next", <url>; rel="last"` to {"next": url, "last": url}.
func parseLinks(values []string) map[string]string {
	out := map[string]string{}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			target = strings.TrimSpace(target)
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for _, param := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(param), "=")
				if strings.EqualFold(strings.TrimSpace(k), "rel") {
					for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(v), `"`)) {
						out[strings.ToLower(rel)] = target[1 : len(target)-1]
					}
				}
			}
		}
	}
	return out
}

// pageNumber is the page query parameter of a pagination link.
func pageNumber(link string) (int, error) {
	u, err := url.Parse(link)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(u.Query().Get("page"))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q names no page", link)
	}
	return n, nil
}

func init() {
	Register(Kind{Type: "ghcr", New: func() Block { return new(GHCRBlock) }, Credentials: AuthCredentials, Order: 50})
}

// GHCRBlock is the registries file's ghcr block: the container packages
// of a GitHub user or organization on ghcr.io, listed through GitHub's
// REST API; their images are read as an OCI registry's are.
type GHCRBlock struct {
	Owner string `json:"owner"`
	// OwnerType is user or org.
	OwnerType   string   `json:"owner_type"`
	Tag         string   `json:"tag,omitempty"`
	PageSize    int      `json:"page_size,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Timeout     Duration `json:"timeout,omitempty"`
	// Auth is required: token (a personal access token (classic) with
	// read:packages), or basic (the GitHub user name and the token).
	Auth Auth `json:"auth,omitempty"`
	// APIURL and Host replace GitHub's API and ghcr.io (GitHub Enterprise
	// Server, a mirror, tests); Insecure talks plain HTTP to Host.
	APIURL   string `json:"api_url,omitempty"`
	Host     string `json:"host,omitempty"`
	Insecure bool   `json:"insecure,omitempty"`
}

// Build builds the source; NewGHCR's errors name the block's fields.
func (b *GHCRBlock) Build(bc BuildContext) (Source, error) {
	return NewGHCR(GHCRConfig{
		Owner: b.Owner, OwnerType: b.OwnerType, APIURL: b.APIURL, Host: b.Host, Insecure: b.Insecure, Tag: b.Tag,
		Filter: bc.Filter, Auth: b.Auth, PageSize: b.PageSize, Concurrency: b.Concurrency, Timeout: time.Duration(b.Timeout),
		Verify: bc.Verify,
	})
}

// Describe is the registry host and the owner.
func (b *GHCRBlock) Describe() Description {
	h := cmp.Or(b.Host, DefaultGHCRHost)
	return Description{Location: hostPath(h, b.Owner), Auth: authType(b.Auth)}
}
