// Package hubs stands in for the registries that have no catalog API,
// speaking their documented protocols: Docker Hub (the Hub API's access
// tokens and repositories of a namespace; the registry behind
// auth.docker.io's token service) and GitHub (the REST API's container
// packages of a user or an organization, paginated by Link headers; ghcr.io
// behind its token service). Each part is an http.Handler a test serves
// with httptest (or on one host, with OneHost), with a fault hook and a
// page hook, and a record of the requests it got.
//
// The registry behind them is go-containerregistry's in-process registry:
// tests push spec images through Storage, which skips the token service.
package hubs

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
)

// Accounts are the users a Hub API and its registry know: user name →
// secret (a password or an access token), and who may read the private
// repositories of a namespace (a Docker Hub namespace, a GitHub owner).
type Accounts struct {
	mu      sync.Mutex
	secrets map[string]string
	members map[string]map[string]bool
}

// NewAccounts returns accounts with no user.
func NewAccounts() *Accounts {
	return &Accounts{secrets: map[string]string{}, members: map[string]map[string]bool{}}
}

// Add adds a user with its secret, a member of its own namespace.
func (a *Accounts) Add(user, secret string) {
	a.mu.Lock()
	a.secrets[user] = secret
	a.mu.Unlock()
	a.Grant(user, user)
}

// Grant lets user read the private repositories of namespace (case does
// not matter).
func (a *Accounts) Grant(namespace, user string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ns := strings.ToLower(namespace)
	if a.members[ns] == nil {
		a.members[ns] = map[string]bool{}
	}
	a.members[ns][user] = true
}

// check reports whether secret is user's.
func (a *Accounts) check(user, secret string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.secrets[user]
	return ok && secret != "" && s == secret
}

// owner returns the user whose secret this is (GitHub knows a caller by
// its token alone).
func (a *Accounts) owner(secret string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for u, s := range a.secrets {
		if secret != "" && s == secret {
			return u, true
		}
	}
	return "", false
}

// member reports whether user may read namespace's private repositories.
func (a *Accounts) member(namespace, user string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return user != "" && a.members[strings.ToLower(namespace)][user]
}

// Fault answers a request instead of the stand-in when it returns true.
type Fault func(w http.ResponseWriter, r *http.Request) bool

// hooks are what every stand-in has: a fault hook and a request record.
type hooks struct {
	mu       sync.Mutex
	fault    Fault
	requests []string // "METHOD /path?query"
}

// SetFault installs f (nil: none).
func (h *hooks) SetFault(f Fault) {
	h.mu.Lock()
	h.fault = f
	h.mu.Unlock()
}

// Requests returns the requests so far, "METHOD /path?query", and
// forgets them.
func (h *hooks) Requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.requests
	h.requests = nil
	return out
}

// enter records r and runs the fault hook: true when the fault answered.
func (h *hooks) enter(w http.ResponseWriter, r *http.Request) bool {
	h.mu.Lock()
	h.requests = append(h.requests, r.Method+" "+r.URL.RequestURI())
	f := h.fault
	h.mu.Unlock()
	return f != nil && f(w, r)
}

// Registry is an OCI registry behind a token service, as Docker Hub's
// registry (with auth.docker.io) and ghcr.io (with ghcr.io/token) are:
// every /v2/ request needs a bearer token from GET /token, which answers
// anyone with a token that pulls public repositories, and a user who
// authenticates with HTTP Basic a token that pulls the private
// namespaces granted to it. _catalog is never granted.
type Registry struct {
	hooks
	accounts *Accounts
	service  string
	// byToken: the token service knows the user by the secret alone and
	// ignores the user name (ghcr.io); otherwise the name must match
	// (Docker Hub).
	byToken bool
	storage http.Handler

	tmu     sync.Mutex
	tokens  map[string]string // issued token → user ("" anonymous)
	private map[string]bool   // namespace → private
}

// NewDockerHubRegistry stands in for registry-1.docker.io and its token
// service (service "registry.docker.io"; the user name is checked).
func NewDockerHubRegistry(a *Accounts) *Registry {
	return newRegistry(a, "registry.docker.io", false)
}

// NewGHCRRegistry stands in for ghcr.io and its token service (service
// "ghcr.io"; the token alone says who calls, whatever the user name).
func NewGHCRRegistry(a *Accounts) *Registry { return newRegistry(a, "ghcr.io", true) }

func newRegistry(a *Accounts, service string, byToken bool) *Registry {
	return &Registry{
		accounts: a, service: service, byToken: byToken,
		storage: ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))),
		tokens:  map[string]string{}, private: map[string]bool{},
	}
}

// Storage is the registry without its token service: tests push through
// it.
func (g *Registry) Storage() http.Handler { return g.storage }

// SetPrivate makes the repositories of namespace private (or public).
func (g *Registry) SetPrivate(namespace string, private bool) {
	g.tmu.Lock()
	g.private[strings.ToLower(namespace)] = private
	g.tmu.Unlock()
}

// Issued returns the tokens the token service issued: secrets too.
func (g *Registry) Issued() []string {
	g.tmu.Lock()
	defer g.tmu.Unlock()
	var out []string
	for t := range g.tokens {
		out = append(out, t)
	}
	return out
}

func (g *Registry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.enter(w, r) {
		return
	}
	switch {
	case r.URL.Path == "/token":
		g.token(w, r)
	case r.URL.Path == "/v2" || strings.HasPrefix(r.URL.Path, "/v2/"):
		g.registry(w, r)
	default:
		http.NotFound(w, r)
	}
}

// token is the token service: GET /token?service=...&scope=... with
// optional HTTP Basic credentials.
func (g *Registry) token(w http.ResponseWriter, r *http.Request) {
	user := ""
	if name, secret, ok := r.BasicAuth(); ok {
		var known bool
		if g.byToken {
			user, known = g.accounts.owner(secret)
		} else {
			user, known = name, g.accounts.check(name, secret)
		}
		if !known {
			registryError(w, http.StatusUnauthorized, "UNAUTHORIZED", "incorrect username or password")
			return
		}
	}
	tok := "registry-token-" + random()
	g.tmu.Lock()
	g.tokens[tok] = user
	g.tmu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"token": tok, "access_token": tok, "expires_in": 300})
}

// registry checks the bearer token against the repository's namespace and
// hands the request to the registry.
func (g *Registry) registry(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	repo := repository(r.URL.Path)
	challenge := func(errCode string) {
		c := `Bearer realm="` + scheme + "://" + r.Host + `/token",service="` + g.service + `"`
		if repo != "" {
			c += `,scope="repository:` + repo + `:pull"`
		}
		if errCode != "" {
			c += `,error="` + errCode + `"`
		}
		w.Header().Set("WWW-Authenticate", c)
		registryError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	g.tmu.Lock()
	user, issued := g.tokens[tok]
	g.tmu.Unlock()
	if !ok || !issued {
		challenge("")
		return
	}
	if r.URL.Path == "/v2/_catalog" {
		challenge("insufficient_scope")
		return
	}
	if repo != "" {
		ns, _, _ := strings.Cut(repo, "/")
		g.tmu.Lock()
		private := g.private[strings.ToLower(ns)]
		g.tmu.Unlock()
		if private && !g.accounts.member(ns, user) {
			challenge("insufficient_scope")
			return
		}
	}
	g.storage.ServeHTTP(w, r)
}

// repository is the repository a /v2/ path is about ("" for /v2/).
func repository(path string) string {
	rest := strings.TrimPrefix(path, "/v2/")
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/", "/referrers/"} {
		if i := strings.LastIndex(rest, sep); i > 0 {
			return rest[:i]
		}
	}
	return ""
}

// registryError answers in the registry's error format.
func registryError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}

// API is a listing API that shares a host with its registry.
type API interface {
	http.Handler
	// Serves reports whether path is the API's, not the registry's.
	Serves(path string) bool
}

// OneHost serves an API and its registry on one host, so that one fault
// network (a TLS server and a transport that can break) stands in for
// both.
func OneHost(api API, registry http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if api.Serves(r.URL.Path) {
			api.ServeHTTP(w, r)
			return
		}
		registry.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func random() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// jwtLike is an opaque token shaped like the JWTs Docker Hub issues.
func jwtLike() string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		enc.EncodeToString([]byte(`{"jti":"`+random()+`"}`)) + "." + random()
}
