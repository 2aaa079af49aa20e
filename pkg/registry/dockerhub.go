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

// Docker Hub defaults.
const (
	DefaultDockerHubAPI  = "https://hub.docker.com"
	DefaultDockerHubHost = "index.docker.io"
)

// DockerHubConfig configures a Docker Hub namespace (a user or an
// organization): its repositories are listed through Docker Hub's API
// (the registry's token service never grants registry:catalog:*), and
// each one's image is read through the OCI path.
type DockerHubConfig struct {
	// Namespace is the user or organization ("library" for the official
	// images).
	Namespace string
	// APIURL is the base URL of Docker Hub's API (default
	// https://hub.docker.com); Host is its registry (default
	// index.docker.io). Tests and mirrors replace them.
	APIURL string
	Host   string
	// Insecure talks plain HTTP to Host (a local mirror).
	Insecure bool
	// Tag is the tag whose image carries the spec (default "latest").
	Tag    string
	Filter *Filter
	// Auth is anonymous (public repositories) or basic: a Docker ID and a
	// personal access token (or an organization name and an organization
	// access token). The API exchanges them for a short-lived bearer
	// token at each fetch; the registry trades them for a pull token at
	// its token service.
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

// DockerHub lists the spec images of a Docker Hub namespace through its
// API and reads them through the OCI path (viaOCI), HEAD first, so an
// unchanged image costs no manifest GET against Docker Hub's pull limit.
type DockerHub struct {
	cfg DockerHubConfig
	api *listAPI
	viaOCI
}

// namespacePattern is a Docker Hub namespace: one lowercase path
// component of a repository name.
var namespacePattern = regexp.MustCompile(`^[a-z0-9]+(?:[._-]+[a-z0-9]+)*$`)

// NewDockerHub checks cfg and fills in defaults.
func NewDockerHub(cfg DockerHubConfig) (*DockerHub, error) {
	var probs problems
	cfg.Namespace = strings.TrimSpace(cfg.Namespace)
	// The OCI path checks the rest (host, tag, concurrency, timeout); it
	// is given stand-ins for what is reported here, not to say it twice.
	prefix, auth := cfg.Namespace, cfg.Auth
	switch {
	case cfg.Namespace == "":
		probs.add(errors.New("dockerhub.namespace is required"))
	case !namespacePattern.MatchString(cfg.Namespace):
		probs.add(fmt.Errorf("dockerhub.namespace %q is not a Docker Hub namespace (lowercase letters and digits, separated by . _ or -)", cfg.Namespace))
	}
	if len(probs) > 0 {
		prefix = "library"
	}
	if cfg.PageSize < 0 || cfg.PageSize > DefaultHubPageSize {
		probs.add(fmt.Errorf("dockerhub.page_size %d must be between 1 and %d", cfg.PageSize, DefaultHubPageSize))
	}
	authProbs := len(probs)
	switch k := cfg.Auth.kind(); {
	case k == AuthToken:
		probs.add(errors.New("dockerhub.auth.type token is not how Docker Hub authenticates: use basic, with your Docker ID as username and a personal access token as password_env or password_file"))
	case k != AuthAnonymous && k != AuthBasic && cfg.Auth.Validate() == nil:
		probs.add(fmt.Errorf("dockerhub.auth.type %s is not one Docker Hub takes: anonymous or basic", k))
	default:
		probs.add(cfg.Auth.validate("dockerhub"))
	}
	if len(probs) > authProbs {
		auth = Auth{}
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultDockerHubAPI
	}
	if cfg.Host == "" {
		cfg.Host = DefaultDockerHubHost
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultHubPageSize
	}
	api, err := newListAPI("Docker Hub", cfg.APIURL, cfg.Transport, http.Header{"Accept": {"application/json"}})
	if err != nil {
		probs.add(fmt.Errorf("dockerhub.api_url: %w", err))
	}
	d := &DockerHub{cfg: cfg, api: api}
	d.oci, err = NewOCI(OCIConfig{
		Host: cfg.Host, Prefix: prefix, Insecure: cfg.Insecure, Lister: dockerHubLister{d},
		Tag: cfg.Tag, Filter: cfg.Filter, Auth: auth, Concurrency: cfg.Concurrency,
		Timeout: cfg.Timeout, Transport: cfg.Transport, Verify: cfg.Verify,
	})
	if err != nil {
		probs.add(innerOCIError("dockerhub", err))
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	return d, nil
}

// String names the source for logs; it shows no credential.
func (d *DockerHub) String() string {
	return "dockerhub " + d.cfg.Namespace + " (auth " + d.cfg.Auth.String() + ")"
}

// dockerHubLister lists the namespace's repositories through the API:
// GET /v2/namespaces/{namespace}/repositories, page by page along "next",
// every page agreeing on "count".
type dockerHubLister struct{ d *DockerHub }

// hubRepositoriesPage is a page of Docker Hub's repository list.
type hubRepositoriesPage struct {
	Count   *int    `json:"count"`
	Next    *string `json:"next"`
	Results *[]struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"results"`
}

// ListRepositories lists every repository of the namespace or fails.
// See RepositoryLister.
func (l dockerHubLister) ListRepositories(ctx context.Context, creds authn.AuthConfig) ([]string, error) {
	d := l.d
	ns := d.cfg.Namespace
	authz, secrets, err := l.login(ctx, creds)
	if err != nil {
		return nil, redact(err, secrets)
	}
	fail := func(k int, err error) ([]string, error) {
		return nil, redact(fmt.Errorf("Docker Hub repositories of %s, page %d: %w", ns, k, err), secrets)
	}
	u := d.api.endpoint("/v2/namespaces/"+url.PathEscape(ns)+"/repositories",
		url.Values{"page": {"1"}, "page_size": {strconv.Itoa(d.cfg.PageSize)}})
	rules := newPageRules("repositories", d.cfg.PageSize, u)
	total := -1
	var repos []string
	for k := 1; ; k++ {
		p, err := d.api.get(ctx, u, authz)
		if err != nil {
			return fail(k, err)
		}
		var body hubRepositoriesPage
		if err := json.Unmarshal(p.body, &body); err != nil {
			return fail(k, malformed(fmt.Errorf("not a page of repositories: %w", err)))
		}
		switch {
		case body.Count == nil || body.Results == nil:
			return fail(k, errors.New("not a page of repositories: it has no count or no results"))
		case total < 0:
			total = *body.Count
		case *body.Count != total:
			return fail(k, fmt.Errorf("the count of repositories changed from %d to %d while they were listed", total, *body.Count))
		}
		if pages := max(1, (total+d.cfg.PageSize-1)/d.cfg.PageSize); k > pages {
			return fail(k, fmt.Errorf("a page past the %d that %d repositories fill", pages, total))
		}
		names := make([]string, 0, len(*body.Results))
		for _, r := range *body.Results {
			switch {
			case r.Name == "":
				return fail(k, errors.New("a repository without a name"))
			case r.Namespace != "" && r.Namespace != ns:
				return fail(k, fmt.Errorf("repository %q of another namespace, %q", r.Name, r.Namespace))
			}
			names = append(names, r.Name)
		}
		if err := rules.add(k, names); err != nil {
			return fail(k, err)
		}
		for _, n := range names {
			repos = append(repos, ns+"/"+n)
		}
		if body.Next == nil || *body.Next == "" {
			if len(repos) != total {
				return fail(k, fmt.Errorf("the listing ended with %d repositories, but counted %d", len(repos), total))
			}
			return repos, nil
		}
		next, err := d.api.next(u, *body.Next)
		if err != nil {
			return fail(k, err)
		}
		if err := rules.follow(k, len(names), next); err != nil {
			return fail(k, err)
		}
		u = next
	}
}

// login trades the fetch's credentials (basic auth) for an access token
// at POST /v2/auth/token: the Authorization header of this fetch's pages,
// and the secrets to keep out of errors. The token expires in minutes and
// is never kept past the fetch.
func (l dockerHubLister) login(ctx context.Context, creds authn.AuthConfig) (authz string, secrets []string, err error) {
	if creds.Password == "" {
		return "", nil, nil
	}
	secrets = []string{creds.Password}
	p, err := l.d.api.post(ctx, l.d.api.endpoint("/v2/auth/token", nil),
		map[string]string{"identifier": creds.Username, "secret": creds.Password})
	if err != nil {
		return "", secrets, fmt.Errorf("Docker Hub login as %s: %w", creds.Username, err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(p.body, &tok); err != nil || tok.AccessToken == "" {
		return "", secrets, fmt.Errorf("Docker Hub login as %s: the answer holds no access_token", creds.Username)
	}
	return "Bearer " + tok.AccessToken, append(secrets, tok.AccessToken), nil
}

// innerOCIError names the block's field in an error of the inner OCI
// source's checks ("oci: tag ..." is "dockerhub.tag ..."), so that
// `specsync config check` points at its line.
func innerOCIError(block string, err error) error {
	var probs problems
	for _, e := range joined(err) {
		var fe *fieldError
		if errors.As(e, &fe) {
			probs.add(fe.in(block))
		} else {
			probs.add(fmt.Errorf("%s: %w", block, e))
		}
	}
	return probs.err()
}

func init() {
	Register(Kind{Type: "dockerhub", New: func() Block { return new(DockerHubBlock) }, Credentials: AuthCredentials, Order: 40})
}

// DockerHubBlock is the registries file's dockerhub block: a Docker Hub
// namespace, listed through Docker Hub's API; its images are read as an
// OCI registry's are.
type DockerHubBlock struct {
	// Namespace is the user or organization ("library": the official
	// images).
	Namespace   string   `json:"namespace"`
	Tag         string   `json:"tag,omitempty"`
	PageSize    int      `json:"page_size,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Timeout     Duration `json:"timeout,omitempty"`
	// Auth is anonymous (public repositories) or basic: a Docker ID and
	// a personal access token.
	Auth Auth `json:"auth,omitempty"`
	// APIURL and Host replace Docker Hub's API and registry (a mirror,
	// tests); Insecure talks plain HTTP to Host.
	APIURL   string `json:"api_url,omitempty"`
	Host     string `json:"host,omitempty"`
	Insecure bool   `json:"insecure,omitempty"`
}

// Build builds the source; NewDockerHub's errors name the block's fields
// (dockerhub.namespace).
func (b *DockerHubBlock) Build(bc BuildContext) (Source, error) {
	return NewDockerHub(DockerHubConfig{
		Namespace: b.Namespace, APIURL: b.APIURL, Host: b.Host, Insecure: b.Insecure, Tag: b.Tag, Filter: bc.Filter,
		Auth: b.Auth, PageSize: b.PageSize, Concurrency: b.Concurrency, Timeout: time.Duration(b.Timeout),
		Verify: bc.Verify,
	})
}

// Describe is the registry host and the namespace.
func (b *DockerHubBlock) Describe() Description {
	h := cmp.Or(b.Host, DefaultDockerHubHost)
	return Description{Location: hostPath(h, b.Namespace), Auth: authType(b.Auth)}
}
