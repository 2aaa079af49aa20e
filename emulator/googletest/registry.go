package googletest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
)

// Registry is Artifact Registry's Docker API in front of
// go-containerregistry's in-process registry:
//
//   - With a TokenServer, the Docker token auth Artifact Registry speaks. A
//     request without a valid registry token gets 401 and
//     WWW-Authenticate: Bearer realm="https://HOST/v2/token",service="HOST".
//     The realm takes basic credentials oauth2accesstoken:ACCESS_TOKEN,
//     accepts only the token server's current token (the newest unexpired
//     one), and answers a registry token that is good while that access
//     token lives. Without one, every pull is anonymous (a public
//     repository).
//   - tags/list as Artifact Registry and Container Registry answer it
//     (go-containerregistry's google.Tags): name, tags, manifest by digest,
//     and child, the next path component of every repository below the
//     path; children are paged by n, with a Link header to the next page.
//
// Requests reach it by any host name through Transport(r.Server).
type Registry struct {
	Server *httptest.Server
	// PushHost is a plain-HTTP door to the same registry, open to anyone,
	// for the test to push through.
	PushHost string
	Tokens   *TokenServer

	backend http.Handler

	mu             sync.Mutex
	registryTokens map[string]string // registry token -> the access token traded for it
	requests       []Request
	fault          func(w http.ResponseWriter, r *http.Request) bool
}

// Request is one request the registry received, without its credentials.
type Request struct {
	Method, Host, URI string
	// Credentials says the request carried an Authorization header.
	Credentials bool
	// AccessToken is the access token presented at the realm.
	AccessToken string
}

// NewRegistry starts a registry; tokens nil makes it anonymous.
func NewRegistry(t testing.TB, tokens *TokenServer) *Registry {
	t.Helper()
	r := &Registry{
		Tokens:         tokens,
		backend:        ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))),
		registryTokens: map[string]string{},
	}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	// Clients that hang up mid-handshake when a test ends are no news.
	r.Server.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.Server.StartTLS()
	t.Cleanup(r.Server.Close)
	push := httptest.NewServer(r.backend)
	t.Cleanup(push.Close)
	r.PushHost = strings.TrimPrefix(push.URL, "http://")
	return r
}

// SetFault makes f see every request first; it returns true when it
// answered the request itself.
func (r *Registry) SetFault(f func(w http.ResponseWriter, req *http.Request) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fault = f
}

// Requests lists the requests so far.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// Reset forgets the requests so far.
func (r *Registry) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = nil
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	rec := Request{Method: req.Method, Host: req.Host, URI: req.URL.RequestURI(), Credentials: req.Header.Get("Authorization") != ""}
	if user, pass, ok := req.BasicAuth(); ok && user == "oauth2accesstoken" {
		rec.AccessToken = pass
	}
	r.mu.Lock()
	r.requests = append(r.requests, rec)
	fault := r.fault
	r.mu.Unlock()
	if fault != nil && fault(w, req) {
		return
	}
	if req.URL.Path == "/v2/token" {
		r.realm(w, req)
		return
	}
	if !r.authorized(req) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="https://`+req.Host+`/v2/token",service="`+req.Host+`"`)
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		return
	}
	if p, ok := strings.CutSuffix(req.URL.Path, "/tags/list"); ok && strings.HasPrefix(p, "/v2/") && req.Method == http.MethodGet {
		r.tagsList(w, req, strings.TrimPrefix(p, "/v2/"))
		return
	}
	r.backend.ServeHTTP(w, req)
}

// realm trades the current access token for a registry token.
func (r *Registry) realm(w http.ResponseWriter, req *http.Request) {
	var access string
	if r.Tokens != nil {
		user, pass, ok := req.BasicAuth()
		cur, valid := r.Tokens.Current()
		if !ok || user != "oauth2accesstoken" || !valid || pass != cur.Value {
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "the access token is not valid")
			return
		}
		access = pass
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := "registry-" + hex.EncodeToString(b)
	r.mu.Lock()
	r.registryTokens[tok] = access
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"token": tok, "expires_in": 3600, "issued_at": time.Now().UTC().Format(time.RFC3339),
	})
}

// authorized says whether req carries a registry token whose access
// token has not expired.
func (r *Registry) authorized(req *http.Request) bool {
	if r.Tokens == nil {
		return true
	}
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	r.mu.Lock()
	access, ok := r.registryTokens[tok]
	r.mu.Unlock()
	if !ok {
		return false
	}
	for _, t := range r.Tokens.Issued() {
		if t.Value == access {
			return time.Now().Before(t.Expiry)
		}
	}
	return false
}

// manifestInfo is a manifest entry of Container Registry's tags/list.
type manifestInfo struct {
	Size      string   `json:"imageSizeBytes"`
	MediaType string   `json:"mediaType"`
	Created   string   `json:"timeCreatedMs"`
	Uploaded  string   `json:"timeUploadedMs"`
	Tags      []string `json:"tag"`
}

// tagsList answers tags/list of path the Google way.
func (r *Registry) tagsList(w http.ResponseWriter, req *http.Request, path string) {
	var catalog struct {
		Repositories []string `json:"repositories"`
	}
	if !r.get("/v2/_catalog?n=100000", &catalog) {
		writeError(w, http.StatusInternalServerError, "UNKNOWN", "catalog")
		return
	}
	children := map[string]bool{}
	exists := false
	for _, repo := range catalog.Repositories {
		if repo == path {
			exists = true
		}
		if rest, ok := strings.CutPrefix(repo, path+"/"); ok {
			first, _, _ := strings.Cut(rest, "/")
			children[first] = true
		}
	}
	if !exists && len(children) == 0 {
		writeError(w, http.StatusNotFound, "NAME_UNKNOWN", "repository "+path+" not found")
		return
	}
	out := struct {
		Name      string                  `json:"name"`
		Tags      []string                `json:"tags"`
		Children  []string                `json:"child"`
		Manifests map[string]manifestInfo `json:"manifest"`
	}{Name: path, Tags: []string{}, Children: []string{}, Manifests: map[string]manifestInfo{}}
	if exists {
		var tags struct {
			Tags []string `json:"tags"`
		}
		if !r.get("/v2/"+path+"/tags/list", &tags) {
			writeError(w, http.StatusInternalServerError, "UNKNOWN", "tags")
			return
		}
		out.Tags = tags.Tags
		now := strconv.FormatInt(time.Now().UnixMilli(), 10)
		for _, tag := range tags.Tags {
			head := httptest.NewRequest(http.MethodHead, "/v2/"+path+"/manifests/"+tag, nil)
			rec := httptest.NewRecorder()
			r.backend.ServeHTTP(rec, head)
			d := rec.Header().Get("Docker-Content-Digest")
			m := out.Manifests[d]
			m.MediaType, m.Size, m.Created, m.Uploaded = rec.Header().Get("Content-Type"), "0", now, now
			m.Tags = append(m.Tags, tag)
			out.Manifests[d] = m
		}
	}
	for c := range children {
		out.Children = append(out.Children, c)
	}
	sort.Strings(out.Children)
	// Children are paged: n of them after "last", a Link to the rest.
	q := req.URL.Query()
	if last := q.Get("last"); last != "" {
		i := sort.SearchStrings(out.Children, last)
		for i < len(out.Children) && out.Children[i] <= last {
			i++
		}
		out.Children = out.Children[i:]
		out.Tags, out.Manifests = []string{}, map[string]manifestInfo{}
	}
	if n, err := strconv.Atoi(q.Get("n")); err == nil && n > 0 && len(out.Children) > n {
		out.Children = out.Children[:n]
		next := url.Values{"n": {strconv.Itoa(n)}, "last": {out.Children[n-1]}}
		w.Header().Set("Link", `</v2/`+path+`/tags/list?`+next.Encode()+`>; rel="next"`)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// get reads a JSON answer of the backend.
func (r *Registry) get(uri string, v any) bool {
	rec := httptest.NewRecorder()
	r.backend.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, uri, nil))
	return rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), v) == nil
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}
