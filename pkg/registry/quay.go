package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/specsync/specsync/pkg/verify/policy"
)

// Quay defaults.
const (
	DefaultQuayHost = "quay.io"
	// QuayOAuthTokenUser is the user name Quay's registry takes with an
	// OAuth access token (or a robot API token) as password, as `docker
	// login -u '$oauthtoken'` sends it.
	QuayOAuthTokenUser = "$oauthtoken"
)

// QuayConfig configures a Quay namespace (an organization or a user) on
// quay.io or a self-hosted Quay: its repositories are listed through
// Quay's API (GET /api/v1/repository?namespace=NS, paginated by
// next_page), each one's image read through the OCI path.
type QuayConfig struct {
	Namespace string
	// Host is the registry (default quay.io); APIURL is the base URL of
	// its API, /api/v1 under it (default https://HOST, or http://HOST
	// when Insecure).
	Host   string
	APIURL string
	// Insecure talks plain HTTP to Host (a local Quay).
	Insecure bool
	// Tag is the tag whose image carries the spec (default "latest").
	Tag    string
	Filter *Filter
	// Auth is anonymous (a public namespace: its public repositories),
	// token (an OAuth access token of an application of the organization,
	// or a robot API token: the API's bearer token, and the registry's
	// password for QuayOAuthTokenUser), or basic (a robot account,
	// "NAMESPACE+NAME" and its token, for the registry; with token_env or
	// token_file for the API's bearer token, which a robot's password is
	// not).
	Auth        Auth
	Concurrency int
	// Timeout bounds the whole fetch, listing included (default 60s).
	Timeout time.Duration
	// Transport replaces http.DefaultTransport for the API and the
	// registry (tests).
	Transport http.RoundTripper
	// Verify, when set, offers only entries whose manifest is signed as
	// it says (oci_verify.go).
	Verify *policy.Policy
	// pageLimit stops a listing after this many pages (default
	// maxQuayPages): a next_page that never ends is an API fault.
	pageLimit int
}

// maxQuayPages bounds a listing: 100,000 repositories at Quay's 100 a
// page.
const maxQuayPages = 1000

// Quay lists the spec images of a Quay namespace.
type Quay struct {
	cfg QuayConfig
	api *listAPI
	viaOCI
}

// NewQuay checks cfg and fills in defaults. Its error names every field
// that is wrong (errors.Join), each as the registries file writes it
// ("quay.namespace ...").
func NewQuay(cfg QuayConfig) (*Quay, error) {
	var errs []error
	cfg.Namespace = strings.TrimSpace(cfg.Namespace)
	switch ns := cfg.Namespace; {
	case ns == "":
		errs = append(errs, errors.New("quay.namespace is required"))
	case len(ns) < 2 || len(ns) > 255 || !namespacePattern.MatchString(ns):
		errs = append(errs, fmt.Errorf("quay.namespace %q is not a Quay organization or user name (2 to 255 lowercase letters and digits, separated by . _ or -)", ns))
	}
	authErrs := len(errs)
	// pull is what the registry gets: the robot (basic), the token as
	// QuayOAuthTokenUser's password (token), or nothing.
	pull := cfg.Auth
	switch cfg.Auth.kind() {
	case AuthAnonymous:
		if err := cfg.Auth.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("quay.auth: %w", err))
		}
	case AuthToken:
		if err := cfg.Auth.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("quay.auth: %w", err))
		}
		pull = Auth{Type: AuthBasic, Username: QuayOAuthTokenUser, PasswordEnv: cfg.Auth.TokenEnv, PasswordFile: cfg.Auth.TokenFile}
	case AuthBasic:
		// The robot's name and password pull; the token lists.
		pull.TokenEnv, pull.TokenFile = "", ""
		if err := pull.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("quay.auth: %w", err))
		}
		switch {
		case cfg.Auth.TokenEnv == "" && cfg.Auth.TokenFile == "":
			errs = append(errs, errors.New("quay.auth: token_env or token_file is required with type basic: "+
				"the robot's name and password pull images, but Quay's API lists repositories only to a bearer token "+
				"(an OAuth access token of an application of the organization, or a robot API token); "+
				"without it the private repositories would be missing from the listing"))
		case cfg.Auth.TokenEnv != "" && cfg.Auth.TokenFile != "":
			errs = append(errs, errors.New("quay.auth: set only one of token_env, token_file"))
		}
	default:
		errs = append(errs, fmt.Errorf("quay.auth.type %s is not one Quay takes: anonymous, token or basic", cfg.Auth.kind()))
	}
	authBad := len(errs) > authErrs
	if cfg.Host == "" {
		cfg.Host = DefaultQuayHost
	}
	if cfg.APIURL == "" {
		scheme := "https://"
		if cfg.Insecure {
			scheme = "http://"
		}
		cfg.APIURL = scheme + cfg.Host
	}
	if cfg.pageLimit == 0 {
		cfg.pageLimit = maxQuayPages
	}
	api, err := newListAPI("Quay", cfg.APIURL, cfg.Transport, http.Header{"Accept": {"application/json"}})
	if err != nil {
		errs = append(errs, fmt.Errorf("quay.api_url: %w", err))
	}
	q := &Quay{cfg: cfg, api: api}
	// The inner source's own checks (host, tag, concurrency, timeout)
	// name the fields of the block too. The namespace and the auth, if
	// wrong, are reported above in the block's own terms, and stand aside
	// here so that the others are checked.
	prefix := cfg.Namespace
	if !namespacePattern.MatchString(prefix) {
		prefix = ""
	}
	ociAuth := pull
	if authBad {
		ociAuth = Auth{}
	}
	q.oci, err = NewOCI(OCIConfig{
		Host: cfg.Host, Prefix: prefix, Insecure: cfg.Insecure, Lister: quayLister{q},
		Tag: cfg.Tag, Filter: cfg.Filter, Auth: ociAuth, Concurrency: cfg.Concurrency,
		Timeout: cfg.Timeout, Transport: cfg.Transport, Verify: cfg.Verify,
	})
	if err != nil {
		errs = append(errs, innerOCIError("quay", err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return q, nil
}

// String names the source for logs; it shows no credential.
func (q *Quay) String() string {
	return "quay " + join(q.cfg.Host, q.cfg.Namespace) + " (auth " + q.cfg.Auth.String() + ")"
}

// quayLister lists the namespace's repositories through Quay's API: GET
// /api/v1/repository?namespace=NS&public=true, then again with each
// answer's next_page until one has none.
type quayLister struct{ q *Quay }

// quayPage is a page of Quay's repository list (listRepos).
type quayPage struct {
	Repositories *[]struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		Kind      string `json:"kind"`
	} `json:"repositories"`
	NextPage string `json:"next_page"`
}

// ListRepositories lists every repository of the namespace the
// credentials may read, public ones included, or fails. See
// RepositoryLister.
//
// Quay's next_page is an opaque token of the last repository's id, not a
// page number: a repository created or deleted between pages moves no
// other one onto a page already read, so one reading is enough (GHCR's
// needs two). Quay gives no total and no page size to hold a page to;
// what a listing can check is that no token and no name comes twice.
func (l quayLister) ListRepositories(ctx context.Context, creds authn.AuthConfig) ([]string, error) {
	q := l.q
	ns := q.cfg.Namespace
	authz, secrets, err := l.authorization(creds)
	if err != nil {
		return nil, redact(fmt.Errorf("Quay repositories of %s: %w", ns, err), secrets)
	}
	fail := func(k int, err error) ([]string, error) {
		return nil, redact(fmt.Errorf("Quay repositories of %s, page %d: %w", ns, k, err), secrets)
	}
	query := url.Values{"namespace": {ns}, "public": {"true"}}
	tokens := map[string]int{}
	seen := map[string]int{}
	repos := []string{}
	for k := 1; ; k++ {
		if k > q.cfg.pageLimit {
			return fail(k, fmt.Errorf("more than %d pages: the API keeps naming a next page", q.cfg.pageLimit))
		}
		p, err := q.api.get(ctx, q.api.endpoint("/api/v1/repository", query), authz)
		if err != nil {
			return fail(k, err)
		}
		var body quayPage
		if err := json.Unmarshal(p.body, &body); err != nil {
			return fail(k, malformed(fmt.Errorf("not a page of repositories: %w", err)))
		}
		if body.Repositories == nil {
			return fail(k, errors.New("not a page of repositories: it has no repositories"))
		}
		for _, r := range *body.Repositories {
			switch {
			case r.Name == "":
				return fail(k, errors.New("a repository without a name"))
			case r.Namespace != "" && r.Namespace != ns:
				return fail(k, fmt.Errorf("repository %q of another namespace, %q", r.Name, r.Namespace))
			case r.Kind != "" && r.Kind != "image":
				return fail(k, fmt.Errorf("repository %q is of kind %q, not image", r.Name, r.Kind))
			}
			if j, dup := seen[r.Name]; dup {
				return fail(k, fmt.Errorf("page %d lists %q again (page %d listed it): the repositories shifted while they were listed", k, r.Name, j))
			}
			seen[r.Name] = k
			repos = append(repos, ns+"/"+r.Name)
		}
		if body.NextPage == "" {
			return repos, nil
		}
		switch j, again := tokens[body.NextPage]; {
		case again:
			return fail(k, fmt.Errorf("its next_page is the one page %d gave: the listing would not end", j))
		case len(*body.Repositories) == 0:
			return fail(k, errors.New("a page without repositories names a next page"))
		}
		tokens[body.NextPage] = k
		query.Set("next_page", body.NextPage)
	}
}

// authorization is the Authorization header of the API's pages, and the
// secrets to keep out of errors: type token lists with the token the
// registry gets too (creds' password), type basic with its own token,
// read now; anonymous sends none.
func (l quayLister) authorization(creds authn.AuthConfig) (string, []string, error) {
	a := l.q.cfg.Auth
	secrets := []string{creds.Password}
	switch a.kind() {
	case AuthToken:
		return "Bearer " + creds.Password, secrets, nil
	case AuthBasic:
		tok, err := readSecret(a.TokenEnv, a.TokenFile, "token")
		if err != nil {
			return "", secrets, fmt.Errorf("the API's token: %w", err)
		}
		return "Bearer " + tok, append(secrets, tok), nil
	}
	return "", nil, nil
}

func init() {
	Register(Kind{Type: "quay", New: func() Block { return new(QuayBlock) }, Credentials: AuthCredentials, Order: 70})
}

// QuayBlock is the registries file's quay block: a Quay organization or
// user, listed through Quay's API; its images are read as an OCI
// registry's are.
type QuayBlock struct {
	Namespace   string   `json:"namespace"`
	Tag         string   `json:"tag,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Timeout     Duration `json:"timeout,omitempty"`
	// Auth is anonymous (a public namespace), token (an OAuth access
	// token or a robot API token) or basic (a robot account, with a token
	// for the API).
	Auth Auth `json:"auth,omitempty"`
	// Host is the registry (quay.io, or a self-hosted Quay); APIURL
	// replaces https://HOST for the API; Insecure talks plain HTTP.
	Host     string `json:"host,omitempty"`
	APIURL   string `json:"api_url,omitempty"`
	Insecure bool   `json:"insecure,omitempty"`
}

// Build builds the source; NewQuay's errors name the block's fields, all
// of them that are wrong.
func (b *QuayBlock) Build(bc BuildContext) (Source, error) {
	return NewQuay(QuayConfig{
		Namespace: b.Namespace, Host: b.Host, APIURL: b.APIURL, Insecure: b.Insecure, Tag: b.Tag, Filter: bc.Filter,
		Auth: b.Auth, Concurrency: b.Concurrency, Timeout: time.Duration(b.Timeout),
		Verify: bc.Verify,
	})
}

// Describe is the registry host and the namespace.
func (b *QuayBlock) Describe() Description {
	return Description{Location: hostPath(cmp.Or(b.Host, DefaultQuayHost), b.Namespace), Auth: authType(b.Auth)}
}
