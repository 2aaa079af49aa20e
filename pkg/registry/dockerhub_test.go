package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/hubs"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

// dockerHubRig is Docker Hub in process, as its API reference describes
// it: the API (access tokens, the repositories of a namespace, paginated
// by "next" with a "count") and the registry behind its token service,
// each behind a fault hook and a request record (server), and a door to
// push spec images through without the token service.
type dockerHubRig struct {
	accounts *hubs.Accounts
	hub      *hubs.DockerHub
	reg      *hubs.Registry
	api      *server
	registry *server
	push     *server
}

func newDockerHubRig(t *testing.T) *dockerHubRig {
	t.Helper()
	a := hubs.NewAccounts()
	r := &dockerHubRig{accounts: a, hub: hubs.NewDockerHub(a), reg: hubs.NewDockerHubRegistry(a)}
	r.api = serve(t, r.hub)
	r.registry = serve(t, r.reg)
	r.push = serve(t, r.reg.Storage())
	r.hub.SetRepositories(suiteNamespace)
	return r
}

// suiteNamespace is the namespace (or GHCR owner) the conformance suite's
// entries are put in; the rigs start with it, empty.
const suiteNamespace = "acme"

// The rig as the conformance suite's upstream, its entries in
// suiteNamespace (put, putBroken, remove, unavailable, setFault,
// isListing: see conformance_test.go's faulty).

func (r *dockerHubRig) put(t *testing.T, entry, yamlText string) {
	r.pushSpec(t, suiteNamespace, entry, yamlText)
}

// putBroken lists entry with an image whose label is garbage.
func (r *dockerHubRig) putBroken(t *testing.T, entry string) {
	r.push.pushImage(t, suiteNamespace+"/"+entry, "latest", image(t, map[string]string{spec.LabelKey: "%%% neither base64 nor YAML: ["}, nil))
	r.hub.Add(suiteNamespace, hubs.HubRepository{Name: entry})
}

// remove deletes the repository: the API lists it no more.
func (r *dockerHubRig) remove(_ *testing.T, entry string) { r.hub.Remove(suiteNamespace, entry) }

func (r *dockerHubRig) unavailable(*testing.T) {
	r.setFault(func(w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, "gone", http.StatusServiceUnavailable)
		return true
	})
}

// setFault puts f in front of the API and the registry.
func (r *dockerHubRig) setFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	r.api.setFault(f)
	r.registry.setFault(f)
}

// isListing says whether a request is a page of the API's repository
// list.
func (r *dockerHubRig) isListing(req *http.Request) bool {
	return r.hub.Serves(req.URL.Path) && strings.HasSuffix(req.URL.Path, "/repositories")
}

// pushSpec pushes a spec image as namespace/repo:latest and lists the
// repository in the API.
func (r *dockerHubRig) pushSpec(t *testing.T, namespace, repo, yamlText string) {
	t.Helper()
	r.push.pushSpec(t, namespace+"/"+repo, yamlText)
	r.hub.Add(namespace, hubs.HubRepository{Name: repo})
}

// source reads the rig's namespace with cfg (its endpoints filled in),
// with fast retries.
func (r *dockerHubRig) newSource(t *testing.T, cfg registry.DockerHubConfig) *registry.DockerHub {
	t.Helper()
	cfg.APIURL, cfg.Host, cfg.Insecure = r.api.url, r.registry.host, true
	src, err := registry.NewDockerHub(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return registry.FastRetryDockerHub(src)
}

// reset forgets the requests of the API and the registry.
func (r *dockerHubRig) reset() { r.api.reset(); r.registry.reset() }

// hubPage matches the API's repository page k.
func hubPage(k int) func(*http.Request) bool {
	return func(r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/repositories") {
			return false
		}
		p := r.URL.Query().Get("page")
		return p == strconv.Itoa(k) || (p == "" && k == 1)
	}
}

func isHubList(_, uri string) bool { return strings.Contains(uri, "/repositories?") }

// answer makes a fault that answers the requests m matches with f.
func answer(m func(*http.Request) bool, f func(w http.ResponseWriter, r *http.Request)) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !m(r) {
			return false
		}
		f(w, r)
		return true
	}
}

func TestDockerHubListsANamespace(t *testing.T) {
	t.Parallel()
	rig := newDockerHubRig(t)
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("svc-%d", i)
		rig.pushSpec(t, "acme", name, specYAML(name))
		want = append(want, name)
	}
	// A repository whose image is no spec image, and one without the tag:
	// listed, offering nothing.
	rig.push.pushImage(t, "acme/plain", "latest", image(t, nil, nil))
	rig.hub.Add("acme", hubs.HubRepository{Name: "plain"})
	rig.hub.Add("acme", hubs.HubRepository{Name: "never-pushed"})
	// Another namespace's spec image is not this source's.
	rig.pushSpec(t, "other", "svc-x", specYAML("x"))

	src := rig.newSource(t, registry.DockerHubConfig{Namespace: "acme", PageSize: 2})
	rig.reset()
	l := fetch(t, src)
	if got := names(l); !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v\nAPI:\n%s", got, want, rig.api.log())
	}
	for _, e := range l.Entries {
		if e.Err != nil || e.Spec == nil {
			t.Errorf("%s: %v", e.Name, e.Err)
		}
		if !strings.HasPrefix(e.Ref, rig.registry.host+"/acme/"+e.Name+"@sha256:") {
			t.Errorf("%s: ref %s does not name the repository in the namespace", e.Name, e.Ref)
		}
	}
	// 7 repositories at 2 a page: 4 pages, each asked for at that size.
	if n := rig.api.count(isHubList); n != 4 {
		t.Errorf("%d repository pages, want 4:\n%s", n, rig.api.log())
	}
	if n := rig.api.count(func(_, uri string) bool { return isHubList("", uri) && !strings.Contains(uri, "page_size=2") }); n != 0 {
		t.Errorf("%d pages asked without page_size=2:\n%s", n, rig.api.log())
	}
	if n := rig.registry.count(isCatalog); n != 0 {
		t.Errorf("%d catalog requests to a registry that never grants one", n)
	}

	// Docker Hub counts manifest GETs against its pull limit, not HEADs:
	// an unchanged namespace read again costs HEADs only.
	rig.reset()
	again := fetch(t, src)
	if again.Digest != l.Digest {
		t.Errorf("unchanged namespace: digest %s then %s", l.Digest, again.Digest)
	}
	if n := rig.registry.count(func(method, uri string) bool { return isManifest(method, uri) && method != http.MethodHead }); n != 0 {
		t.Errorf("warm fetch made %d manifest GETs, want HEADs only:\n%s", n, rig.registry.log())
	}
	if n := rig.registry.count(func(method, uri string) bool { return isManifest(method, uri) && method == http.MethodHead }); n != 7 {
		t.Errorf("warm fetch made %d manifest HEADs for 7 repositories:\n%s", n, rig.registry.log())
	}
}

func TestDockerHubEmptyAndUnknownNamespace(t *testing.T) {
	t.Parallel()
	rig := newDockerHubRig(t)
	rig.hub.SetRepositories("empty")
	l := fetch(t, rig.newSource(t, registry.DockerHubConfig{Namespace: "empty"}))
	if len(l.Entries) != 0 || l.Entries == nil || l.Digest != registry.ListingDigest(nil) {
		t.Fatalf("empty namespace: %+v", l)
	}
	if n := rig.registry.count(isManifest); n != 0 {
		t.Errorf("%d manifest requests for an empty namespace", n)
	}
	fetchFails(t, rig.newSource(t, registry.DockerHubConfig{Namespace: "nobody"}), "page 1", "404", "object not found")
}

// Every way a listing page fails, fails the whole fetch: the listing is
// paginated to the end or not at all, exactly as a catalog is, and no
// repository is read from a listing that is not whole.
func TestDockerHubListingFaultsFailTheFetch(t *testing.T) {
	t.Parallel()
	rig := newDockerHubRig(t)
	for i := range 5 {
		rig.pushSpec(t, "acme", fmt.Sprintf("r%d", i), specYAML(fmt.Sprintf("r%d", i)))
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a next link led the fetch to another host: %s %s (Authorization %q)", r.Method, r.URL, r.Header.Get("Authorization"))
	}))
	t.Cleanup(other.Close)
	status := func(k, code int, headers ...string) func(w http.ResponseWriter, r *http.Request) bool {
		return answer(hubPage(k), func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i+1 < len(headers); i += 2 {
				w.Header().Set(headers[i], headers[i+1])
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"detail":"injected %d","message":"injected %d"}`, code, code)
		})
	}
	body := func(k int, text string, contentLength int) func(w http.ResponseWriter, r *http.Request) bool {
		return answer(hubPage(k), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if contentLength > 0 {
				w.Header().Set("Content-Length", strconv.Itoa(contentLength))
			}
			_, _ = io.WriteString(w, text)
		})
	}
	for _, tc := range []struct {
		name  string
		fault func(w http.ResponseWriter, r *http.Request) bool
		page  func(page int, p *hubs.HubPage)
		want  []string
	}{
		{name: "401", fault: status(1, 401), want: []string{"page 1", "401", "injected 401"}},
		{name: "403 on page 2", fault: status(2, 403), want: []string{"page 2", "403"}},
		{name: "429 with Retry-After", fault: status(2, 429, "Retry-After", "3600", "X-Retry-After", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)),
			want: []string{"page 2", "429", "rate limited", "Retry-After: 3600", "does not wait"}},
		{name: "500 on page 2", fault: status(2, 500), want: []string{"page 2", "500"}},
		{name: "503 on page 3, every retry", fault: status(3, 503), want: []string{"page 3", "503"}},
		{name: "truncated body", fault: body(2, `{"count":5,"next":null,"results":[{"name":"r2","namespace":"ac`, 4096), want: []string{"page 2", "unexpected EOF"}},
		{name: "garbage body", fault: body(2, "<html>gateway error</html>", 0), want: []string{"page 2", "not a page of repositories"}},
		{name: "no results", fault: body(1, `{"count":5,"next":null}`, 0), want: []string{"page 1", "no count or no results"}},
		{name: "short page", page: func(k int, p *hubs.HubPage) {
			if k == 2 {
				p.Results = p.Results[:1]
			}
		}, want: []string{"page 2", "fewer than the page size of 2", "cut short"}},
		{name: "count changes", page: func(k int, p *hubs.HubPage) {
			if k == 2 {
				p.Count++
			}
		}, want: []string{"page 2", "count of repositories changed from 5 to 6"}},
		{name: "ends early", page: func(k int, p *hubs.HubPage) {
			if k == 2 {
				p.Next = nil
			}
		}, want: []string{"page 2", "ended with 4 repositories, but counted 5"}},
		{name: "loops", page: func(k int, p *hubs.HubPage) {
			if k == 2 {
				first := strings.Replace(*p.Next, "page=3", "page=1", 1)
				p.Next = &first
			}
		}, want: []string{"page 2 links back to page 1"}},
		{name: "repeats a page", page: func(k int, p *hubs.HubPage) {
			if k == 3 {
				p.Results = []hubs.HubResult{{Name: "r1", Namespace: "acme"}}
			}
		}, want: []string{"page 3", `lists "r1" again (page 1 listed it)`}},
		{name: "more pages than the count", page: func(k int, p *hubs.HubPage) {
			p.Count = 4
		}, want: []string{"page 3", "past the 2"}},
		{name: "next leaves the API", page: func(k int, p *hubs.HubPage) {
			if k == 1 {
				away := other.URL + "/v2/namespaces/acme/repositories?page=2&page_size=2"
				p.Next = &away
			}
		}, want: []string{"page 1", "leaves"}},
		{name: "another namespace's repository", page: func(k int, p *hubs.HubPage) {
			if k == 2 {
				p.Results[0].Namespace = "other"
			}
		}, want: []string{"page 2", "another namespace"}},
		{name: "a repository without a name", page: func(k int, p *hubs.HubPage) {
			if k == 1 {
				p.Results[0].Name = ""
			}
		}, want: []string{"page 1", "without a name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig.api.setFault(tc.fault)
			rig.hub.SetPageHook(tc.page)
			defer rig.api.setFault(nil)
			defer rig.hub.SetPageHook(nil)
			rig.reset()
			// A timeout the fetch would reach only by waiting on the 429's
			// Retry-After: the error must be the page's, not the deadline's.
			err := fetchFails(t, rig.newSource(t, registry.DockerHubConfig{Namespace: "acme", PageSize: 2, Timeout: 20 * time.Second}), tc.want...)
			if strings.Contains(err.Error(), "did not finish within") {
				t.Errorf("the fetch waited for its deadline: %v", err)
			}
			if n := rig.registry.count(isManifest); n != 0 {
				t.Errorf("%d manifest requests after a failed listing:\n%s", n, rig.registry.log())
			}
		})
	}

	// A 503 that passes is ridden out; the healed API lists everything.
	var failed bool
	rig.api.setFault(answer(hubPage(2), func(w http.ResponseWriter, r *http.Request) {
		if !failed {
			failed = true
			http.Error(w, "blip", http.StatusServiceUnavailable)
			return
		}
		rig.hub.ServeHTTP(w, r)
	}))
	if got := len(fetch(t, rig.newSource(t, registry.DockerHubConfig{Namespace: "acme", PageSize: 2})).Entries); got != 5 || !failed {
		t.Errorf("after one 503: %d entries (503 served: %v), want 5", got, failed)
	}
}

func TestDockerHubTimeoutFailsTheFetch(t *testing.T) {
	t.Parallel()
	rig := newDockerHubRig(t)
	for _, n := range []string{"a", "b", "c"} {
		rig.pushSpec(t, "acme", n, specYAML(n))
	}
	rig.api.setFault(answer(hubPage(2), func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	fetchFails(t, rig.newSource(t, registry.DockerHubConfig{Namespace: "acme", PageSize: 2, Timeout: 300 * time.Millisecond}),
		"page 2", "did not finish within 300ms")
}

// A garbage entry among good ones is that entry's error; an entry the API
// stops listing is gone, and back when it is listed again.
func TestDockerHubEntries(t *testing.T) {
	t.Parallel()
	rig := newDockerHubRig(t)
	for _, n := range []string{"a", "b", "c"} {
		rig.pushSpec(t, "acme", n, specYAML(n))
	}
	rig.pushSpec(t, "acme", "bad-label", "name: bad\ndescription: no plans\nplans: []\n")
	rig.hub.Add("acme", hubs.HubRepository{Name: "Not A Name"})
	src := rig.newSource(t, registry.DockerHubConfig{Namespace: "acme"})

	l := fetch(t, src)
	if got, want := names(l), []string{"Not A Name", "a", "b", "bad-label", "c"}; !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	e := byName(l)
	for _, n := range []string{"a", "b", "c"} {
		if e[n].Err != nil || e[n].Spec == nil {
			t.Errorf("%s: %v", n, e[n].Err)
		}
	}
	for n, want := range map[string]string{"Not A Name": "repository Not A Name", "bad-label": "plans"} {
		if e[n].Err == nil || e[n].Spec != nil || !strings.Contains(e[n].Err.Error(), want) {
			t.Errorf("%s: spec %v, err %v; want an entry error naming %q", n, e[n].Spec, e[n].Err, want)
		}
	}

	rig.hub.Remove("acme", "b")
	if got := names(fetch(t, src)); slices.Contains(got, "b") || len(got) != 4 {
		t.Errorf("after b left the listing: %v", got)
	}
	rig.hub.Add("acme", hubs.HubRepository{Name: "b"})
	back := fetch(t, src)
	if got := byName(back)["b"]; got.Spec == nil || got.Spec.Name != "b" || back.Digest != l.Digest {
		t.Errorf("b back: %+v; digest %s, first %s", got, back.Digest, l.Digest)
	}
}

// A private namespace: the API lists its repositories only after the
// login, and the registry pulls them only with a token the token service
// gave the same credentials. The secret is read at every fetch.
func TestDockerHubPrivateNamespace(t *testing.T) {
	rig := newDockerHubRig(t)
	const pat = "dckr_pat_first-0123456789"
	rig.accounts.Add("robot", pat)
	rig.reg.SetPrivate("robot", true)
	for _, n := range []string{"db", "cache", "queue"} {
		rig.push.pushSpec(t, "robot/"+n, specYAML(n))
		rig.hub.Add("robot", hubs.HubRepository{Name: n, Private: true})
	}
	patFile := t.TempDir() + "/pat"
	if err := writeFile(patFile, pat+"\n"); err != nil {
		t.Fatal(err)
	}
	src := rig.newSource(t, registry.DockerHubConfig{Namespace: "robot",
		Auth: registry.Auth{Type: "basic", Username: "robot", PasswordFile: patFile}})
	rig.reset()
	l := fetch(t, src)
	if got := names(l); !slices.Equal(got, []string{"cache", "db", "queue"}) {
		t.Fatalf("entries %v\nAPI:\n%s\nregistry:\n%s", got, rig.api.log(), rig.registry.log())
	}
	for _, e := range l.Entries {
		if e.Err != nil {
			t.Errorf("%s: %v", e.Name, e.Err)
		}
	}
	if n := rig.api.count(func(method, uri string) bool { return method == http.MethodPost && uri == "/v2/auth/token" }); n != 1 {
		t.Errorf("%d logins for one fetch, want 1:\n%s", n, rig.api.log())
	}

	// Anonymous, the namespace lists no repository (Docker Hub hides
	// private ones), and the registry would not pull them.
	anon := fetch(t, rig.newSource(t, registry.DockerHubConfig{Namespace: "robot"}))
	if len(anon.Entries) != 0 {
		t.Errorf("anonymous: entries %v", names(anon))
	}
	anonOCI, err := registry.NewOCI(registry.OCIConfig{Host: rig.registry.host, Insecure: true, Repositories: []string{"robot/db"}})
	if err != nil {
		t.Fatal(err)
	}
	fetchFails(t, registry.FastRetry(anonOCI), "401")

	// A rotated token is read at the next fetch: the old one is refused
	// (the login fails, naming neither), the new one works.
	const rotated = "dckr_pat_second-9876543210"
	rig.accounts.Add("robot", rotated)
	err = fetchFails(t, src, "login as robot", "401")
	if strings.Contains(err.Error(), pat) {
		t.Errorf("the error shows the token: %v", err)
	}
	if err := writeFile(patFile, rotated); err != nil {
		t.Fatal(err)
	}
	if got := len(fetch(t, src).Entries); got != 3 {
		t.Errorf("after the rotation: %d entries, want 3", got)
	}
}

// An API that echoes what it was sent (the login body, the bearer token)
// in its error puts no secret into the fetch's error: neither the
// personal access token nor the access token it was traded for.
func TestDockerHubErrorsHoldNoSecret(t *testing.T) {
	rig := newDockerHubRig(t)
	const pat = "dckr_pat_canary-5f3a9c0b1d"
	rig.accounts.Add("robot", pat)
	rig.pushSpec(t, "robot", "db", specYAML("db"))
	t.Setenv("SPECSYNC_HUB_TEST_PAT", pat)
	src := rig.newSource(t, registry.DockerHubConfig{Namespace: "robot",
		Auth: registry.Auth{Type: "basic", Username: "robot", PasswordEnv: "SPECSYNC_HUB_TEST_PAT"}})
	echo := func(m func(*http.Request) bool) func(w http.ResponseWriter, r *http.Request) bool {
		return answer(m, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			msg, _ := json.Marshal(fmt.Sprintf("refused %s with %s", b, r.Header.Get("Authorization")))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"detail":%s}`, msg)
		})
	}
	for what, m := range map[string]func(*http.Request) bool{
		"login":   func(r *http.Request) bool { return r.URL.Path == "/v2/auth/token" },
		"listing": hubPage(1),
	} {
		rig.api.setFault(echo(m))
		err := fetchFails(t, src, "403", "refused")
		secrets := append([]string{pat}, rig.hub.Issued()...)
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error shows a secret: %v", what, err)
			}
		}
		if what == "listing" && (len(secrets) < 2 || !strings.Contains(err.Error(), "[REDACTED]")) {
			t.Errorf("listing: the echoed access token was not redacted (issued %d): %v", len(secrets)-1, err)
		}
	}
}

func TestNewDockerHubValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  registry.DockerHubConfig
		want string
	}{
		{registry.DockerHubConfig{}, "dockerhub.namespace is required"},
		{registry.DockerHubConfig{Namespace: "Acme"}, "dockerhub.namespace"},
		{registry.DockerHubConfig{Namespace: "acme/team"}, "dockerhub.namespace"},
		{registry.DockerHubConfig{Namespace: "acme", PageSize: 101}, "dockerhub.page_size"},
		{registry.DockerHubConfig{Namespace: "acme", Auth: registry.Auth{Type: "token", TokenEnv: "T"}}, "dockerhub.auth.type token"},
		{registry.DockerHubConfig{Namespace: "acme", Auth: registry.Auth{Type: "basic", Username: "u"}}, "dockerhub.auth"},
		{registry.DockerHubConfig{Namespace: "acme", APIURL: "ftp://hub.example.com"}, "dockerhub.api_url"},
		{registry.DockerHubConfig{Namespace: "acme", APIURL: "https://user:pw@hub.example.com"}, "dockerhub.api_url"},
		{registry.DockerHubConfig{Namespace: "acme", Host: "https://mirror.example.com"}, "dockerhub.host"},
		{registry.DockerHubConfig{Namespace: "acme", Tag: "not a tag"}, "dockerhub.tag"},
	} {
		if _, err := registry.NewDockerHub(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewDockerHub(%+v): %v, want an error naming %q", tc.cfg, err, tc.want)
		}
	}
	d, err := registry.NewDockerHub(registry.DockerHubConfig{Namespace: "library"})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.String(); got != "dockerhub library (auth anonymous)" {
		t.Errorf("String() = %q", got)
	}
	// Events name Docker Hub by any of its names.
	if e, ok := d.Select(registry.Change{Host: "docker.io", Repository: "library/redis", Tag: "latest"}); !ok || e != "redis" {
		t.Errorf("Select: %q, %v", e, ok)
	}
	if _, ok := d.Select(registry.Change{Host: "docker.io", Repository: "bitnami/redis", Tag: "latest"}); ok {
		t.Error("a repository of another namespace was selected")
	}
}

// A targeted fetch holds the named entries that offer something; a name
// that does not is gone.
func TestDockerHubFetchEntries(t *testing.T) {
	t.Parallel()
	rig := newDockerHubRig(t)
	for _, n := range []string{"a", "b", "c"} {
		rig.pushSpec(t, "acme", n, specYAML(n))
	}
	var src registry.Source = rig.newSource(t, registry.DockerHubConfig{Namespace: "acme"})
	ef, ok := src.(registry.EntryFetcher)
	if !ok {
		t.Fatal("the Docker Hub source fetches no entries")
	}
	l, err := ef.FetchEntries(context.Background(), []string{"a", "c", "gone"}, registry.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(l); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("entries %v, want a and c", got)
	}
}

// An event's targeted run reads the named repositories through the
// registry alone: no page of Docker Hub's or GitHub's API is asked for.
func TestHubsFetchEntriesAskNoAPIPage(t *testing.T) {
	ctx := context.Background()
	hub := newDockerHubRig(t)
	hub.put(t, "alpha", specYAML("alpha"))
	hub.put(t, "beta", specYAML("beta"))
	gh := newGHCRRig(t)
	gh.put(t, "alpha", specYAML("alpha"))
	gh.put(t, "beta", specYAML("beta"))
	for _, c := range []struct {
		name  string
		src   registry.EntryFetcher
		api   *server
		reset func()
	}{
		{"dockerhub", hub.newSource(t, registry.DockerHubConfig{Namespace: suiteNamespace}), hub.api, hub.reset},
		{"ghcr", gh.newSource(t, registry.GHCRConfig{Owner: suiteNamespace, OwnerType: "org"}), gh.api, gh.reset},
	} {
		c.reset()
		l, err := c.src.FetchEntries(ctx, []string{"beta", "gone"}, registry.FetchOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := names(l); len(got) != 1 || got[0] != "beta" {
			t.Errorf("%s: entries %v, want beta alone (gone is gone)", c.name, got)
		}
		if n := c.api.count(func(string, string) bool { return true }); n != 0 {
			t.Errorf("%s: %d API requests for a targeted fetch:\n%s", c.name, n, c.api.log())
		}
		if sel, ok := c.src.(registry.EntrySelector); !ok || !sel.SelectsEntry("beta") {
			t.Errorf("%s does not tell which entries it selects", c.name)
		}
	}
}
