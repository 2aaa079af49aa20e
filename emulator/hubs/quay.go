package hubs

import (
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
)

// Quay stands in for quay.io (or a self-hosted Quay), API and registry on
// one host as Quay serves them:
//
//   - GET /api/v1/repository (listRepos) with namespace, public and
//     next_page: 200 {"repositories": [...], "next_page": TOKEN}, the
//     repositories of the namespace the caller may read (public ones too
//     with public=true) by id, a page at a time, next_page an opaque token
//     of the last one's id (absent on the last page); neither namespace
//     nor public is 400. The caller is known by "Authorization: Bearer
//     TOKEN" (an OAuth token of an organization's application), or is
//     anonymous; an unknown token is 401. Errors are Quay's ApiError
//     ({"status", "error_message", "title", "error_type", "detail",
//     "type"}).
//   - The registry (/v2/) demands a bearer token from its token service,
//     GET /v2/auth, which issues one to anyone: anonymous reads public
//     repositories, a robot ("NS+NAME" and its token, HTTP Basic) or
//     $oauthtoken with an OAuth token reads its namespace's too. Wrong
//     credentials are 401.
//
// Tests push images through Storage, which skips the token service, and
// list them with Add.
type Quay struct {
	hooks
	storage http.Handler

	mu       sync.Mutex
	pageSize int
	nextID   int
	repos    map[string][]quayRepo // namespace → repositories, by id
	robots   map[string]string     // "NS+NAME" → its token
	oauth    map[string]string     // OAuth token → the namespace it reads
	issued   map[string]string     // pull token → the namespace it reads ("" anonymous)
	tamper   func(page int, body map[string]any)
}

type quayRepo struct {
	id     int
	name   string
	public bool
}

// QuayOAuthUser is the user name Quay's token service takes with an OAuth
// token as password.
const QuayOAuthUser = "$oauthtoken"

// NewQuay returns a Quay of 100 repositories a page (Quay's own) in front
// of storage, a registry (nil: go-containerregistry's in-process one).
func NewQuay(storage http.Handler) *Quay {
	if storage == nil {
		storage = ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0)))
	}
	return &Quay{storage: storage, pageSize: 100, repos: map[string][]quayRepo{},
		robots: map[string]string{}, oauth: map[string]string{}, issued: map[string]string{}}
}

// Storage is the registry without Quay's auth: tests push through it.
func (q *Quay) Storage() http.Handler { return q.storage }

// SetPageSize sets how many repositories a page lists.
func (q *Quay) SetPageSize(n int) {
	q.mu.Lock()
	q.pageSize = n
	q.mu.Unlock()
}

// AddRobot adds robot "NS+NAME" with its token: it reads NS.
func (q *Quay) AddRobot(name, token string) {
	q.mu.Lock()
	q.robots[name] = token
	q.mu.Unlock()
}

// AddOAuthToken adds an OAuth token that reads namespace.
func (q *Quay) AddOAuthToken(token, namespace string) {
	q.mu.Lock()
	q.oauth[token] = namespace
	q.mu.Unlock()
}

// Add lists a repository, with a new id as Quay gives a created one.
func (q *Quay) Add(namespace, name string, public bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	q.repos[namespace] = append(q.repos[namespace], quayRepo{id: q.nextID, name: name, public: public})
}

// Remove deletes a repository: it is listed no more.
func (q *Quay) Remove(namespace, name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.repos[namespace] = slices.DeleteFunc(q.repos[namespace], func(r quayRepo) bool { return r.name == name })
}

// SetPublic makes a repository public or private.
func (q *Quay) SetPublic(namespace, name string, public bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.repos[namespace] {
		if q.repos[namespace][i].name == name {
			q.repos[namespace][i].public = public
		}
	}
}

// SetPageHook installs f, which may change page k's body before it is
// sent (nil: none).
func (q *Quay) SetPageHook(f func(page int, body map[string]any)) {
	q.mu.Lock()
	q.tamper = f
	q.mu.Unlock()
}

// Issued returns the pull tokens the token service issued: secrets too.
func (q *Quay) Issued() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for t := range q.issued {
		out = append(out, t)
	}
	return out
}

// IsListing reports whether a request is a page of the repository list.
func (q *Quay) IsListing(r *http.Request) bool { return r.URL.Path == "/api/v1/repository" }

func (q *Quay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if q.enter(w, r) {
		return
	}
	switch p := r.URL.Path; {
	case q.IsListing(r):
		q.list(w, r)
	case p == "/v2/auth":
		q.token(w, r)
	case p == "/v2" || strings.HasPrefix(p, "/v2/"):
		q.registry(w, r)
	default:
		QuayError(w, http.StatusNotFound, "not_found", "Not Found")
	}
}

// QuayError answers in Quay's ApiError format.
func QuayError(w http.ResponseWriter, status int, typ, detail string) {
	writeJSON(w, status, map[string]any{
		"status": status, "error_message": detail, "title": typ, "error_type": typ, "detail": detail,
		"type": "https://quay.io/api/v1/error/" + typ,
	})
}

// list is listRepos.
func (q *Quay) list(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	reads := ""
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		q.mu.Lock()
		ns, known := q.oauth[tok]
		q.mu.Unlock()
		if !ok || !known {
			QuayError(w, http.StatusUnauthorized, "invalid_token", "OAuth access token could not be validated")
			return
		}
		reads = ns
	}
	ns, public := query.Get("namespace"), query.Get("public") == "true"
	if ns == "" && !public {
		QuayError(w, http.StatusBadRequest, "invalid_request", "namespace, starred or public are required for this API call")
		return
	}
	after := 0
	if tok := query.Get("next_page"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "start_id:"))
		if err != nil || err2 != nil {
			QuayError(w, http.StatusBadRequest, "invalid_request", "Invalid page token")
			return
		}
		after = n
	}
	q.mu.Lock()
	items := []map[string]any{}
	last, before, more := 0, 0, false
	for _, repo := range q.repos[ns] {
		if reads != ns && !(repo.public && public) {
			continue
		}
		if repo.id <= after {
			before++
			continue
		}
		if len(items) == q.pageSize {
			more = true
			break
		}
		items = append(items, map[string]any{"namespace": ns, "name": repo.name, "description": nil,
			"is_public": repo.public, "kind": "image", "state": "NORMAL"})
		last = repo.id
	}
	k := before/max(q.pageSize, 1) + 1
	tamper := q.tamper
	q.mu.Unlock()
	body := map[string]any{"repositories": items}
	if more {
		body["next_page"] = base64.RawURLEncoding.EncodeToString([]byte("start_id:" + strconv.Itoa(last)))
	}
	if tamper != nil {
		tamper(k, body)
	}
	writeJSON(w, http.StatusOK, body)
}

// token is the registry's token service.
func (q *Quay) token(w http.ResponseWriter, r *http.Request) {
	reads := ""
	if user, pass, ok := r.BasicAuth(); ok {
		q.mu.Lock()
		robot, isRobot := q.robots[user]
		oauthNS, isOAuth := q.oauth[pass]
		q.mu.Unlock()
		switch {
		case user == QuayOAuthUser && isOAuth:
			reads = oauthNS
		case isRobot && pass == robot:
			reads, _, _ = strings.Cut(user, "+")
		default:
			registryError(w, http.StatusUnauthorized, "UNAUTHORIZED", "Could not find robot with specified username")
			return
		}
	}
	tok := "quay-pull-" + random()
	q.mu.Lock()
	q.issued[tok] = reads
	q.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"token": tok})
}

// registry lets a pull token read the public repositories and those of
// the namespace it reads.
func (q *Quay) registry(w http.ResponseWriter, r *http.Request) {
	challenge := func() {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s://%s/v2/auth",service="quay.io"`, scheme(r), r.Host))
		registryError(w, http.StatusUnauthorized, "UNAUTHORIZED", "access to the requested resource is not authorized")
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	q.mu.Lock()
	reads, issued := q.issued[tok]
	q.mu.Unlock()
	if !ok || !issued {
		challenge()
		return
	}
	if repo := repository(r.URL.Path); repo != "" {
		ns, name, _ := strings.Cut(repo, "/")
		if reads != ns && !q.public(ns, name) {
			challenge()
			return
		}
	}
	q.storage.ServeHTTP(w, r)
}

func (q *Quay) public(ns, name string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, repo := range q.repos[ns] {
		if repo.name == name {
			return repo.public
		}
	}
	return false
}

// QuayRepositories are the repositories of a page hook's body.
func QuayRepositories(body map[string]any) []map[string]any {
	items, _ := body["repositories"].([]map[string]any)
	return items
}
