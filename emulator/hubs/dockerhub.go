package hubs

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DockerHub stands in for Docker Hub's API (https://hub.docker.com), the
// two routes a namespace listing uses, as its OpenAPI reference describes
// them:
//
//   - POST /v2/auth/token {"identifier", "secret"} → 200
//     {"access_token"} (a bearer token for the API), 401 {"detail",
//     "message"} for wrong credentials;
//   - GET /v2/namespaces/{namespace}/repositories?page=&page_size= →
//     200 {"count", "next", "previous", "results": [...]}, private
//     repositories only to a member with a bearer token; page_size
//     defaults to 10 and may be at most 100 (400 above); a page past the
//     last is 404; an unknown namespace is 404; an unknown token 401.
//
// Every answer carries the X-RateLimit-* headers.
type DockerHub struct {
	hooks
	accounts *Accounts

	dmu        sync.Mutex
	namespaces map[string][]HubRepository
	tokens     map[string]string // access token → user
	tamper     func(page int, p *HubPage)
}

// HubRepository is a repository of a namespace.
type HubRepository struct {
	Name    string
	Private bool
}

// HubPage is a page of the repository list as it is sent; the page hook
// may change it.
type HubPage struct {
	Count    int         `json:"count"`
	Next     *string     `json:"next"`
	Previous *string     `json:"previous"`
	Results  []HubResult `json:"results"`
}

// HubResult is one repository of a page.
type HubResult struct {
	Name              string   `json:"name"`
	Namespace         string   `json:"namespace"`
	RepositoryType    string   `json:"repository_type"`
	Status            int      `json:"status"`
	StatusDescription string   `json:"status_description"`
	Description       string   `json:"description"`
	IsPrivate         bool     `json:"is_private"`
	StarCount         int      `json:"star_count"`
	PullCount         int      `json:"pull_count"`
	LastUpdated       string   `json:"last_updated"`
	DateRegistered    string   `json:"date_registered"`
	Affiliation       string   `json:"affiliation"`
	MediaTypes        []string `json:"media_types"`
	ContentTypes      []string `json:"content_types"`
	Categories        []string `json:"categories"`
	StorageSize       int64    `json:"storage_size"`
}

// NewDockerHub returns the API with no namespace.
func NewDockerHub(a *Accounts) *DockerHub {
	return &DockerHub{accounts: a, namespaces: map[string][]HubRepository{}, tokens: map[string]string{}}
}

// SetRepositories replaces the repositories of a namespace (creating it:
// a namespace with none lists empty, an unknown one is 404).
func (h *DockerHub) SetRepositories(namespace string, repos ...HubRepository) {
	h.dmu.Lock()
	h.namespaces[namespace] = slices.Clone(repos)
	h.dmu.Unlock()
}

// Add adds (or replaces) a repository of a namespace.
func (h *DockerHub) Add(namespace string, repo HubRepository) {
	h.dmu.Lock()
	defer h.dmu.Unlock()
	h.namespaces[namespace] = slices.DeleteFunc(h.namespaces[namespace], func(r HubRepository) bool { return r.Name == repo.Name })
	h.namespaces[namespace] = append(h.namespaces[namespace], repo)
}

// Remove removes a repository of a namespace.
func (h *DockerHub) Remove(namespace, name string) {
	h.dmu.Lock()
	defer h.dmu.Unlock()
	h.namespaces[namespace] = slices.DeleteFunc(h.namespaces[namespace], func(r HubRepository) bool { return r.Name == name })
}

// SetPageHook installs f, called with every repository page (1-based)
// before it is sent (nil: none): a test makes a page lie with it.
func (h *DockerHub) SetPageHook(f func(page int, p *HubPage)) {
	h.dmu.Lock()
	h.tamper = f
	h.dmu.Unlock()
}

// Issued returns the access tokens the API issued: secrets too.
func (h *DockerHub) Issued() []string {
	h.dmu.Lock()
	defer h.dmu.Unlock()
	var out []string
	for t := range h.tokens {
		out = append(out, t)
	}
	return out
}

// Serves reports whether path is the API's. See API.
func (h *DockerHub) Serves(path string) bool {
	return path == "/v2/auth/token" || strings.HasPrefix(path, "/v2/namespaces/")
}

func (h *DockerHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.enter(w, r) {
		return
	}
	reset := time.Now().Add(time.Minute).Unix()
	w.Header().Set("X-RateLimit-Limit", "180")
	w.Header().Set("X-RateLimit-Remaining", "179")
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	switch {
	case r.URL.Path == "/v2/auth/token" && r.Method == http.MethodPost:
		h.login(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v2/namespaces/") && strings.HasSuffix(r.URL.Path, "/repositories"):
		h.repositories(w, r)
	default:
		hubError(w, http.StatusNotFound, "object not found")
	}
}

func (h *DockerHub) login(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Identifier string `json:"identifier"`
		Secret     string `json:"secret"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Identifier == "" || body.Secret == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"text": "identifier and secret are required", "fields": map[string]any{}})
		return
	}
	if !h.accounts.check(body.Identifier, body.Secret) {
		hubError(w, http.StatusUnauthorized, "incorrect username or password")
		return
	}
	tok := jwtLike()
	h.dmu.Lock()
	h.tokens[tok] = body.Identifier
	h.dmu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"access_token": tok})
}

func (h *DockerHub) repositories(w http.ResponseWriter, r *http.Request) {
	ns := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v2/namespaces/"), "/repositories")
	user := ""
	if authz := r.Header.Get("Authorization"); authz != "" {
		tok, ok := strings.CutPrefix(authz, "Bearer ")
		h.dmu.Lock()
		u, known := h.tokens[tok]
		h.dmu.Unlock()
		if !ok || !known {
			hubError(w, http.StatusUnauthorized, "authentication credentials are invalid")
			return
		}
		user = u
	}
	q := r.URL.Query()
	pageNo, size := 1, 10
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"text": "invalid page", "fields": map[string]any{"page": []string{"invalid"}}})
			return
		}
		pageNo = n
	}
	if v := q.Get("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"text": "invalid page_size", "fields": map[string]any{"page_size": []string{"must be between 1 and 100"}}})
			return
		}
		size = n
	}
	h.dmu.Lock()
	repos, known := h.namespaces[ns]
	repos = slices.Clone(repos)
	tamper := h.tamper
	h.dmu.Unlock()
	if !known {
		hubError(w, http.StatusNotFound, "object not found")
		return
	}
	member := h.accounts.member(ns, user)
	repos = slices.DeleteFunc(repos, func(r HubRepository) bool { return r.Private && !member })
	slices.SortFunc(repos, func(a, b HubRepository) int { return strings.Compare(a.Name, b.Name) })
	from := (pageNo - 1) * size
	if pageNo > 1 && from >= len(repos) {
		hubError(w, http.StatusNotFound, "Page not found")
		return
	}
	to := min(from+size, len(repos))
	p := HubPage{Count: len(repos), Results: []HubResult{}}
	link := func(n int) *string {
		u := url.URL{Scheme: scheme(r), Host: r.Host, Path: r.URL.Path,
			RawQuery: url.Values{"page": {strconv.Itoa(n)}, "page_size": {strconv.Itoa(size)}}.Encode()}
		s := u.String()
		return &s
	}
	if to < len(repos) {
		p.Next = link(pageNo + 1)
	}
	if pageNo > 1 {
		p.Previous = link(pageNo - 1)
	}
	for _, repo := range repos[from:to] {
		p.Results = append(p.Results, HubResult{
			Name: repo.Name, Namespace: ns, RepositoryType: "image", Status: 1, StatusDescription: "active",
			IsPrivate: repo.Private, LastUpdated: "2026-01-02T03:04:05.000000Z", DateRegistered: "2025-01-02T03:04:05.000000Z",
			MediaTypes: []string{"application/vnd.oci.image.index.v1+json"}, ContentTypes: []string{"image"}, Categories: []string{},
		})
	}
	if tamper != nil {
		tamper(pageNo, &p)
	}
	writeJSON(w, http.StatusOK, p)
}

// hubError answers in the Hub API's error format.
func hubError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"detail": msg, "message": msg, "errinfo": map[string]any{}})
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}
