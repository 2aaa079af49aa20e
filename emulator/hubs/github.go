package hubs

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GitHub stands in for GitHub's REST API (https://api.github.com), the
// package lists a GHCR owner listing uses, as GitHub documents them:
//
//   - GET /orgs/{org}/packages and GET /users/{username}/packages, with
//     package_type (required: npm, maven, rubygems, docker, nuget or
//     container), visibility (optional), page and per_page (default 30,
//     at most 100): 200 with a JSON array of packages, paginated by a Link
//     header (rel next and last, and first and prev past page 1) whose
//     URLs name the owner by id (/organizations/{id}/packages,
//     /user/{id}/packages), as GitHub's do; a page past the last is an
//     empty array;
//   - authentication is required ("Authorization: Bearer TOKEN" or
//     "token TOKEN"): none is 401 "Requires authentication", an unknown
//     token 401 "Bad credentials"; private and internal packages are
//     listed only to a member of the owner; an unknown owner (or a user
//     asked for as an organization) is 404.
//
// Every answer carries the x-ratelimit-* headers.
type GitHub struct {
	hooks
	accounts *Accounts

	gmu    sync.Mutex
	owners map[string]*gitHubOwner // lowercase login → owner
	nextID int
	tamper func(page int, items *[]GitHubPackage, links map[string]string)
}

type gitHubOwner struct {
	login    string
	id       int
	org      bool
	packages []Package
}

// Package is a package of an owner.
type Package struct {
	Name string
	// Visibility is public (default), private or internal.
	Visibility string
	// Type is the package type (default container).
	Type string
}

// GitHubPackage is an item of a package page as it is sent; the page
// hook may change it.
type GitHubPackage struct {
	ID           int               `json:"id"`
	Name         string            `json:"name"`
	PackageType  string            `json:"package_type"`
	Owner        GitHubOwner       `json:"owner"`
	VersionCount int               `json:"version_count"`
	Visibility   string            `json:"visibility"`
	URL          string            `json:"url"`
	HTMLURL      string            `json:"html_url"`
	CreatedAt    string            `json:"created_at"`
	UpdatedAt    string            `json:"updated_at"`
	Repository   map[string]string `json:"repository,omitempty"`
}

// GitHubOwner is a package's owner, as a page sends it.
type GitHubOwner struct {
	Login string `json:"login"`
	ID    int    `json:"id"`
	Type  string `json:"type"`
}

// NewGitHub returns the API with no owner.
func NewGitHub(a *Accounts) *GitHub {
	return &GitHub{accounts: a, owners: map[string]*gitHubOwner{}, nextID: 9000}
}

// SetPackages replaces the packages of an owner, a user or (org) an
// organization, creating it.
func (g *GitHub) SetPackages(login string, org bool, pkgs ...Package) {
	g.gmu.Lock()
	defer g.gmu.Unlock()
	o := g.owners[strings.ToLower(login)]
	if o == nil {
		g.nextID++
		o = &gitHubOwner{id: g.nextID}
		g.owners[strings.ToLower(login)] = o
	}
	o.login, o.org, o.packages = login, org, slices.Clone(pkgs)
}

// Add adds (or replaces) a package of an existing owner.
func (g *GitHub) Add(login string, p Package) {
	g.gmu.Lock()
	defer g.gmu.Unlock()
	o := g.owners[strings.ToLower(login)]
	o.packages = slices.DeleteFunc(o.packages, func(q Package) bool { return q.Name == p.Name })
	o.packages = append(o.packages, p)
}

// Remove removes a package of an owner.
func (g *GitHub) Remove(login, name string) {
	g.gmu.Lock()
	defer g.gmu.Unlock()
	o := g.owners[strings.ToLower(login)]
	o.packages = slices.DeleteFunc(o.packages, func(q Package) bool { return q.Name == name })
}

// SetPageHook installs f, called with every package page (1-based), its
// items and its Link relations (rel → URL), before it is sent (nil: none).
func (g *GitHub) SetPageHook(f func(page int, items *[]GitHubPackage, links map[string]string)) {
	g.gmu.Lock()
	g.tamper = f
	g.gmu.Unlock()
}

// Serves reports whether path is the API's. See API.
func (g *GitHub) Serves(path string) bool {
	for _, p := range []string{"/orgs/", "/users/", "/organizations/", "/user/"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

func (g *GitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.enter(w, r) {
		return
	}
	w.Header().Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	w.Header().Set("X-Ratelimit-Limit", "5000")
	w.Header().Set("X-Ratelimit-Remaining", "4999")
	w.Header().Set("X-Ratelimit-Used", "1")
	w.Header().Set("X-Ratelimit-Resource", "core")
	w.Header().Set("X-Ratelimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet || len(parts) != 3 || parts[2] != "packages" {
		gitHubError(w, http.StatusNotFound, "Not Found")
		return
	}
	owner := g.lookup(parts[0], parts[1])
	user, ok := g.caller(w, r)
	if !ok {
		return
	}
	if owner == nil {
		gitHubError(w, http.StatusNotFound, "Not Found")
		return
	}
	q := r.URL.Query()
	switch q.Get("package_type") {
	case "npm", "maven", "rubygems", "docker", "nuget", "container":
	default:
		gitHubError(w, http.StatusBadRequest, "Invalid argument: package_type must be one of npm, maven, rubygems, docker, nuget, container")
		return
	}
	pageNo, size := 1, 30
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
		pageNo = n
	}
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n > 0 {
		size = min(n, 100)
	}
	member := g.accounts.member(owner.login, user)
	var visible []Package
	for _, p := range owner.packages {
		typ, vis := p.Type, p.Visibility
		if typ == "" {
			typ = "container"
		}
		if vis == "" {
			vis = "public"
		}
		if typ != q.Get("package_type") || (vis != "public" && !member) || (q.Has("visibility") && q.Get("visibility") != vis) {
			continue
		}
		visible = append(visible, Package{Name: p.Name, Type: typ, Visibility: vis})
	}
	slices.SortFunc(visible, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
	last := max(1, (len(visible)+size-1)/size)
	items := []GitHubPackage{}
	for i := (pageNo - 1) * size; i < min(pageNo*size, len(visible)); i++ {
		p := visible[i]
		kind, path := "User", "users"
		if owner.org {
			kind, path = "Organization", "orgs"
		}
		items = append(items, GitHubPackage{
			ID: 100000 + i, Name: p.Name, PackageType: p.Type, VersionCount: 1, Visibility: p.Visibility,
			Owner:     GitHubOwner{Login: owner.login, ID: owner.id, Type: kind},
			URL:       fmt.Sprintf("%s://%s/%s/%s/packages/%s/%s", scheme(r), r.Host, path, owner.login, p.Type, url.PathEscape(p.Name)),
			HTMLURL:   fmt.Sprintf("https://github.com/%s/%s/packages/%s/package/%s", path, owner.login, p.Type, url.PathEscape(p.Name)),
			CreatedAt: "2025-01-02T03:04:05Z", UpdatedAt: "2026-01-02T03:04:05Z",
		})
	}
	links := map[string]string{}
	link := func(n int) string {
		base := "/user/"
		if owner.org {
			base = "/organizations/"
		}
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("page", strconv.Itoa(n))
		u := url.URL{Scheme: scheme(r), Host: r.Host, Path: base + strconv.Itoa(owner.id) + "/packages", RawQuery: v.Encode()}
		return u.String()
	}
	if pageNo < last {
		links["next"], links["last"] = link(pageNo+1), link(last)
	}
	if pageNo > 1 {
		links["prev"], links["first"] = link(pageNo-1), link(1)
	}
	g.gmu.Lock()
	tamper := g.tamper
	g.gmu.Unlock()
	if tamper != nil {
		tamper(pageNo, &items, links)
	}
	var header []string
	for _, rel := range []string{"prev", "next", "last", "first"} {
		if u, ok := links[rel]; ok {
			header = append(header, fmt.Sprintf(`<%s>; rel="%s"`, u, rel))
		}
	}
	if len(header) > 0 {
		w.Header().Set("Link", strings.Join(header, ", "))
	}
	writeJSON(w, http.StatusOK, items)
}

// lookup finds the owner a path names: /orgs/{login}, /users/{login},
// /organizations/{id}, /user/{id}.
func (g *GitHub) lookup(kind, name string) *gitHubOwner {
	g.gmu.Lock()
	defer g.gmu.Unlock()
	var o *gitHubOwner
	switch kind {
	case "orgs", "users":
		o = g.owners[strings.ToLower(name)]
	case "organizations", "user":
		for _, c := range g.owners {
			if strconv.Itoa(c.id) == name {
				o = c
			}
		}
	}
	if o == nil || o.org != (kind == "orgs" || kind == "organizations") {
		return nil
	}
	c := *o
	c.packages = slices.Clone(o.packages)
	return &c
}

// caller authenticates the request; it has answered when ok is false.
func (g *GitHub) caller(w http.ResponseWriter, r *http.Request) (user string, ok bool) {
	authz := r.Header.Get("Authorization")
	if authz == "" {
		gitHubError(w, http.StatusUnauthorized, "Requires authentication")
		return "", false
	}
	tok, found := strings.CutPrefix(authz, "Bearer ")
	if !found {
		tok, found = strings.CutPrefix(authz, "token ")
	}
	if user, known := g.accounts.owner(tok); found && known {
		return user, true
	}
	gitHubError(w, http.StatusUnauthorized, "Bad credentials")
	return "", false
}

// gitHubError answers in the REST API's error format.
func gitHubError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{
		"message": msg, "documentation_url": "https://docs.github.com/rest/packages/packages", "status": strconv.Itoa(status),
	})
}
