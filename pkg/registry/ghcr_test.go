package registry_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/hubs"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

// ghcrRig is GitHub and ghcr.io in process, as GitHub documents them: the
// REST API's package lists of users and organizations (Link pagination,
// bearer tokens, rate limit headers) and the registry behind its token
// service, each behind a fault hook and a request record (server), and a
// door to push spec images through without the token service.
type ghcrRig struct {
	accounts *hubs.Accounts
	gh       *hubs.GitHub
	reg      *hubs.Registry
	api      *server
	registry *server
	push     *server
	token    string
}

// ghcrToken is the rig's token: user "octo", a member of every owner the
// tests make, so it lists and pulls their private packages.
const ghcrToken = "ghp_rigtoken0123456789abcdefABCDEF0123"

func newGHCRRig(t *testing.T) *ghcrRig {
	t.Helper()
	a := hubs.NewAccounts()
	a.Add("octo", ghcrToken)
	r := &ghcrRig{accounts: a, gh: hubs.NewGitHub(a), reg: hubs.NewGHCRRegistry(a), token: ghcrToken}
	r.api = serve(t, r.gh)
	r.registry = serve(t, r.reg)
	r.push = serve(t, r.reg.Storage())
	r.owner(suiteNamespace, true)
	return r
}

// The rig as the conformance suite's upstream, its entries packages of
// the organization suiteNamespace (see conformance_test.go's faulty).

func (r *ghcrRig) put(t *testing.T, entry, yamlText string) {
	r.pushSpec(t, suiteNamespace, entry, yamlText, "public")
}

// putBroken lists entry with an image whose label is garbage.
func (r *ghcrRig) putBroken(t *testing.T, entry string) {
	r.push.pushImage(t, suiteNamespace+"/"+entry, "latest", image(t, map[string]string{spec.LabelKey: "%%% neither base64 nor YAML: ["}, nil))
	r.gh.Add(suiteNamespace, hubs.Package{Name: entry})
}

// remove deletes the package: the API lists it no more.
func (r *ghcrRig) remove(_ *testing.T, entry string) { r.gh.Remove(suiteNamespace, entry) }

func (r *ghcrRig) unavailable(*testing.T) {
	r.setFault(func(w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, "gone", http.StatusServiceUnavailable)
		return true
	})
}

// setFault puts f in front of the API and the registry.
func (r *ghcrRig) setFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	r.api.setFault(f)
	r.registry.setFault(f)
}

// isListing says whether a request is a page of the API's package list.
func (r *ghcrRig) isListing(req *http.Request) bool {
	return r.gh.Serves(req.URL.Path) && strings.HasSuffix(req.URL.Path, "/packages")
}

// owner makes an owner (org or user) whose packages octo may read.
func (r *ghcrRig) owner(login string, org bool, pkgs ...hubs.Package) {
	r.gh.SetPackages(login, org, pkgs...)
	r.accounts.Grant(login, "octo")
}

// pushSpec pushes a spec image as owner/name:latest (the registry's path
// is lowercase) and lists the package.
func (r *ghcrRig) pushSpec(t *testing.T, owner, name, yamlText string, visibility string) {
	t.Helper()
	r.push.pushSpec(t, strings.ToLower(owner)+"/"+name, yamlText)
	r.gh.Add(owner, hubs.Package{Name: name, Visibility: visibility})
}

// source reads the rig with cfg (its endpoints, and the rig's token from
// an environment variable unless cfg has auth), with fast retries.
func (r *ghcrRig) newSource(t *testing.T, cfg registry.GHCRConfig) *registry.GHCR {
	t.Helper()
	cfg.APIURL, cfg.Host, cfg.Insecure = r.api.url, r.registry.host, true
	if cfg.Auth == (registry.Auth{}) {
		file := t.TempDir() + "/token"
		if err := writeFile(file, r.token+"\n"); err != nil {
			t.Fatal(err)
		}
		cfg.Auth = registry.Auth{Type: "token", TokenFile: file}
	}
	src, err := registry.NewGHCR(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return registry.FastRetryGHCR(src)
}

func (r *ghcrRig) reset() { r.api.reset(); r.registry.reset() }

// ghPage matches the API's package page k, by login or by id.
func ghPage(k int) func(*http.Request) bool {
	return func(r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/packages") {
			return false
		}
		p := r.URL.Query().Get("page")
		return p == strconv.Itoa(k) || (p == "" && k == 1)
	}
}

func isPackageList(_, uri string) bool { return strings.Contains(uri, "/packages?") }

func TestGHCRListsAnOrganization(t *testing.T) {
	t.Parallel()
	rig := newGHCRRig(t)
	rig.owner("AcmeCorp", true, hubs.Package{Name: "a-chart", Type: "npm"})
	var want []string
	for i, vis := range []string{"public", "private", "internal", "public", "public"} {
		name := fmt.Sprintf("svc-%d", i)
		rig.pushSpec(t, "AcmeCorp", name, specYAML(name), vis)
		want = append(want, name)
	}
	// A package named after its repository path.
	rig.pushSpec(t, "AcmeCorp", "tools/db", specYAML("db"), "public")
	want = append(want, "tools/db")
	rig.push.pushImage(t, "acmecorp/plain", "latest", image(t, nil, nil))
	rig.gh.Add("AcmeCorp", hubs.Package{Name: "plain"})

	src := rig.newSource(t, registry.GHCRConfig{Owner: "AcmeCorp", OwnerType: "org", PageSize: 2})
	rig.reset()
	l := fetch(t, src)
	if got := names(l); !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v\nAPI:\n%s", got, want, rig.api.log())
	}
	for _, e := range l.Entries {
		if e.Err != nil || e.Spec == nil {
			t.Errorf("%s: %v", e.Name, e.Err)
		}
		// The owner in the registry's paths is lowercase.
		if !strings.HasPrefix(e.Ref, rig.registry.host+"/acmecorp/"+e.Name+"@sha256:") {
			t.Errorf("%s: ref %s", e.Name, e.Ref)
		}
	}
	// 7 container packages at 2 a page: 4 pages, read twice (GitHub gives
	// no total, the two readings must agree); the first by login, the
	// rest along the Link header's id-based URLs, each for containers at
	// that size.
	log := rig.api.log()
	if n := rig.api.count(isPackageList); n != 8 {
		t.Errorf("%d package pages, want 4 twice:\n%s", n, log)
	}
	if n := rig.api.count(func(_, uri string) bool {
		return isPackageList("", uri) && (!strings.Contains(uri, "package_type=container") || !strings.Contains(uri, "per_page=2"))
	}); n != 0 {
		t.Errorf("%d pages asked without package_type=container and per_page=2:\n%s", n, log)
	}
	if !strings.Contains(log, "/orgs/AcmeCorp/packages?") || !strings.Contains(log, "/organizations/") {
		t.Errorf("the pages were not asked by login, then along the Link header:\n%s", log)
	}
	if n := rig.registry.count(isCatalog); n != 0 {
		t.Errorf("%d catalog requests", n)
	}
}

func TestGHCRListsAUser(t *testing.T) {
	t.Parallel()
	rig := newGHCRRig(t)
	rig.owner("octo", false)
	rig.pushSpec(t, "octo", "mine", specYAML("mine"), "private")
	l := fetch(t, rig.newSource(t, registry.GHCRConfig{Owner: "octo", OwnerType: "user"}))
	if got := names(l); !slices.Equal(got, []string{"mine"}) || l.Entries[0].Err != nil {
		t.Fatalf("entries %v (%v)", got, l.Entries)
	}
	if n := rig.api.count(func(_, uri string) bool { return strings.HasPrefix(uri, "/users/octo/packages?") }); n != 1 {
		t.Errorf("the user's list was not asked:\n%s", rig.api.log())
	}
	// The wrong owner type is GitHub's 404, a failed fetch.
	fetchFails(t, rig.newSource(t, registry.GHCRConfig{Owner: "octo", OwnerType: "org"}), "page 1", "404")

	rig.gh.SetPackages("empty", false)
	empty := fetch(t, rig.newSource(t, registry.GHCRConfig{Owner: "empty", OwnerType: "user"}))
	if len(empty.Entries) != 0 || empty.Entries == nil {
		t.Errorf("an owner without packages: %+v", empty)
	}
}

// Every way a package page fails, fails the whole fetch, before any
// package is read. GitHub gives no total: the first page's rel="last"
// stands for it.
func TestGHCRListingFaultsFailTheFetch(t *testing.T) {
	t.Parallel()
	rig := newGHCRRig(t)
	rig.owner("acme", true)
	for i := range 5 {
		rig.pushSpec(t, "acme", fmt.Sprintf("r%d", i), specYAML(fmt.Sprintf("r%d", i)), "public")
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a Link led the fetch to another host: %s %s (Authorization %q)", r.Method, r.URL, r.Header.Get("Authorization"))
	}))
	t.Cleanup(other.Close)
	status := func(k, code int, msg string, headers ...string) func(w http.ResponseWriter, r *http.Request) bool {
		return answer(ghPage(k), func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i+1 < len(headers); i += 2 {
				w.Header().Set(headers[i], headers[i+1])
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"message":%q,"documentation_url":"https://docs.github.com/rest"}`, msg)
		})
	}
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	for _, tc := range []struct {
		name  string
		fault func(w http.ResponseWriter, r *http.Request) bool
		page  func(page int, items *[]hubs.GitHubPackage, links map[string]string)
		want  []string
	}{
		{name: "401", fault: status(1, 401, "Bad credentials"), want: []string{"page 1", "401", "Bad credentials"}},
		{name: "403", fault: status(2, 403, "Must have admin rights"), want: []string{"page 2", "403"}},
		{name: "primary rate limit (403, remaining 0)", fault: status(2, 403, "API rate limit exceeded",
			"X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", reset),
			want: []string{"page 2", "403", "rate limited", "the limit resets at", "does not wait"}},
		{name: "429 with Retry-After", fault: status(2, 429, "You have exceeded a secondary rate limit", "Retry-After", "3600"),
			want: []string{"page 2", "429", "Retry-After: 3600"}},
		{name: "500 on page 2", fault: status(2, 500, "Server Error"), want: []string{"page 2", "500"}},
		{name: "502 on page 3, every retry", fault: status(3, 502, "Bad Gateway"), want: []string{"page 3", "502"}},
		{name: "truncated body", fault: answer(ghPage(2), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "4096")
			_, _ = io.WriteString(w, `[{"name":"r2","package_type":"contai`)
		}), want: []string{"page 2", "unexpected EOF"}},
		{name: "garbage body", fault: answer(ghPage(1), func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"message":"not a list"}`)
		}), want: []string{"page 1", "not a page of packages"}},
		{name: "short page", page: func(k int, items *[]hubs.GitHubPackage, _ map[string]string) {
			if k == 2 {
				*items = (*items)[:1]
			}
		}, want: []string{"page 2", "fewer than the page size of 2", "cut short"}},
		{name: "empty page with a next link", page: func(k int, items *[]hubs.GitHubPackage, _ map[string]string) {
			if k == 1 {
				*items = (*items)[:0]
			}
		}, want: []string{"page 1", "has 0 packages"}},
		{name: "page count changes", page: func(k int, _ *[]hubs.GitHubPackage, links map[string]string) {
			if k == 2 {
				links["last"] = strings.Replace(links["last"], "page=3", "page=4", 1)
			}
		}, want: []string{"page 2", "number of pages changed from 3 to 4"}},
		{name: "ends early", page: func(k int, _ *[]hubs.GitHubPackage, links map[string]string) {
			if k == 2 {
				delete(links, "next")
				delete(links, "last")
			}
		}, want: []string{"page 2", "ended at page 2, but its first page counted 3"}},
		{name: "links itself", page: func(k int, _ *[]hubs.GitHubPackage, links map[string]string) {
			if k == 2 {
				links["next"] = strings.Replace(links["prev"], "page=1", "page=2", 1)
			}
		}, want: []string{"page 2 links back to page 2"}},
		// By another URL than the one it was first asked by: the names
		// it lists again give it away.
		{name: "loops back to page 1", page: func(k int, _ *[]hubs.GitHubPackage, links map[string]string) {
			if k == 2 {
				links["next"] = links["prev"]
			}
		}, want: []string{"page 3", `lists "r0" again (page 1 listed it)`}},
		{name: "repeats a page", page: func(k int, items *[]hubs.GitHubPackage, _ map[string]string) {
			if k == 3 {
				(*items)[0].Name = "r0"
			}
		}, want: []string{"page 3", `lists "r0" again (page 1 listed it)`}},
		{name: "next leaves the API", page: func(k int, _ *[]hubs.GitHubPackage, links map[string]string) {
			if k == 1 {
				links["next"] = other.URL + "/orgs/acme/packages?package_type=container&per_page=2&page=2"
			}
		}, want: []string{"page 1", "leaves"}},
		{name: "another type of package", page: func(k int, items *[]hubs.GitHubPackage, _ map[string]string) {
			if k == 2 {
				(*items)[1].PackageType = "npm"
			}
		}, want: []string{"page 2", `of type "npm"`}},
		{name: "another owner's package", page: func(k int, items *[]hubs.GitHubPackage, _ map[string]string) {
			if k == 3 {
				(*items)[0].Owner.Login = "mallory"
			}
		}, want: []string{"page 3", "another owner"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig.api.setFault(tc.fault)
			rig.gh.SetPageHook(tc.page)
			defer rig.api.setFault(nil)
			defer rig.gh.SetPageHook(nil)
			rig.reset()
			err := fetchFails(t, rig.newSource(t, registry.GHCRConfig{Owner: "acme", OwnerType: "org", PageSize: 2, Timeout: 20 * time.Second}), tc.want...)
			if strings.Contains(err.Error(), "did not finish within") {
				t.Errorf("the fetch waited for its deadline: %v", err)
			}
			if n := rig.registry.count(isManifest); n != 0 {
				t.Errorf("%d manifest requests after a failed listing:\n%s", n, rig.registry.log())
			}
		})
	}

	// The healed API lists everything.
	if got := len(fetch(t, rig.newSource(t, registry.GHCRConfig{Owner: "acme", OwnerType: "org", PageSize: 2})).Entries); got != 5 {
		t.Errorf("healed: %d entries, want 5", got)
	}
}

// A package deleted from a page already read shifts the next page's
// first package onto it, unread; the page count stays, no name comes
// twice, and no page shows it. The second reading does.
func TestGHCRPackageGoneBetweenPages(t *testing.T) {
	t.Parallel()
	rig := newGHCRRig(t)
	rig.owner("acme", true)
	for i := range 5 {
		rig.pushSpec(t, "acme", fmt.Sprintf("r%d", i), specYAML(fmt.Sprintf("r%d", i)), "public")
	}
	var once sync.Once
	rig.gh.SetPageHook(func(k int, _ *[]hubs.GitHubPackage, _ map[string]string) {
		if k == 2 {
			once.Do(func() { rig.gh.Remove("acme", "r0") })
		}
	})
	err := fetchFails(t, rig.newSource(t, registry.GHCRConfig{Owner: "acme", OwnerType: "org", PageSize: 2}),
		"changed while they were listed", `1 gone ["acme/r0"]`, `1 added ["acme/r4"]`)
	if n := rig.registry.count(isManifest); n != 0 {
		t.Errorf("%d manifest requests after a failed listing (%v)", n, err)
	}
	// Settled, it lists the four that are left.
	if got := names(fetch(t, rig.newSource(t, registry.GHCRConfig{Owner: "acme", OwnerType: "org", PageSize: 2}))); !slices.Equal(got, []string{"r1", "r2", "r3", "r4"}) {
		t.Errorf("settled: %v", got)
	}
}

func TestGHCRTimeoutFailsTheFetch(t *testing.T) {
	t.Parallel()
	rig := newGHCRRig(t)
	rig.owner("acme", true)
	for _, n := range []string{"a", "b", "c"} {
		rig.pushSpec(t, "acme", n, specYAML(n), "public")
	}
	rig.api.setFault(answer(ghPage(2), func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	fetchFails(t, rig.newSource(t, registry.GHCRConfig{Owner: "acme", OwnerType: "org", PageSize: 2, Timeout: 300 * time.Millisecond}),
		"page 2", "did not finish within 300ms")
}

// A garbage entry among good ones is that entry's error; a package that
// leaves the list is gone, and back when it returns.
func TestGHCREntries(t *testing.T) {
	t.Parallel()
	rig := newGHCRRig(t)
	rig.owner("acme", true)
	for _, n := range []string{"a", "b", "c"} {
		rig.pushSpec(t, "acme", n, specYAML(n), "public")
	}
	rig.pushSpec(t, "acme", "bad-label", "name: bad\ndescription: no plans\nplans: []\n", "private")
	rig.gh.Add("acme", hubs.Package{Name: "Upper/Case"})
	src := rig.newSource(t, registry.GHCRConfig{Owner: "acme", OwnerType: "org"})

	l := fetch(t, src)
	if got, want := names(l), []string{"Upper/Case", "a", "b", "bad-label", "c"}; !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	e := byName(l)
	for n, want := range map[string]string{"Upper/Case": "repository Upper/Case", "bad-label": "plans"} {
		if e[n].Err == nil || e[n].Spec != nil || !strings.Contains(e[n].Err.Error(), want) {
			t.Errorf("%s: spec %v, err %v; want an entry error naming %q", n, e[n].Spec, e[n].Err, want)
		}
	}
	rig.gh.Remove("acme", "b")
	if got := names(fetch(t, src)); slices.Contains(got, "b") || len(got) != 4 {
		t.Errorf("after b left the list: %v", got)
	}
	rig.gh.Add("acme", hubs.Package{Name: "b"})
	if back := fetch(t, src); back.Digest != l.Digest {
		t.Errorf("b back: digest %s, first %s", back.Digest, l.Digest)
	}
}

// Private packages: the API lists them and the registry pulls them only
// with the token, sent to ghcr.io's token service as basic credentials
// (x-access-token, or the user name of auth type basic). A token that is
// wrong fails the fetch without showing itself, and a rotated one is read
// at the next fetch.
func TestGHCRPrivatePackagesWithAToken(t *testing.T) {
	rig := newGHCRRig(t)
	rig.owner("acme", true)
	rig.reg.SetPrivate("acme", true)
	for _, n := range []string{"db", "cache"} {
		rig.pushSpec(t, "acme", n, specYAML(n), "private")
	}
	t.Setenv("SPECSYNC_GHCR_TEST_TOKEN", ghcrToken)
	for _, auth := range []registry.Auth{
		{Type: "token", TokenEnv: "SPECSYNC_GHCR_TEST_TOKEN"},
		{Type: "basic", Username: "octo", PasswordEnv: "SPECSYNC_GHCR_TEST_TOKEN"},
	} {
		rig.reset()
		l := fetch(t, rig.newSource(t, registry.GHCRConfig{Owner: "acme", OwnerType: "org", Auth: auth}))
		if got := names(l); !slices.Equal(got, []string{"cache", "db"}) {
			t.Fatalf("%s: entries %v\nregistry:\n%s", auth, got, rig.registry.log())
		}
		for _, e := range l.Entries {
			if e.Err != nil {
				t.Errorf("%s: %s: %v", auth, e.Name, e.Err)
			}
		}
	}

	// A user who may not read the owner's private packages lists none and
	// could not pull them.
	rig.accounts.Add("stranger", "ghp_stranger0123456789")
	rig.token = "ghp_stranger0123456789"
	if l := fetch(t, rig.newSource(t, registry.GHCRConfig{Owner: "acme", OwnerType: "org"})); len(l.Entries) != 0 {
		t.Errorf("a stranger's listing: %v", names(l))
	}

	const wrong = "ghp_wrong0123456789"
	t.Setenv("SPECSYNC_GHCR_TEST_TOKEN", wrong)
	src := rig.newSource(t, registry.GHCRConfig{Owner: "acme", OwnerType: "org", Auth: registry.Auth{Type: "token", TokenEnv: "SPECSYNC_GHCR_TEST_TOKEN"}})
	if err := fetchFails(t, src, "page 1", "401", "Bad credentials"); strings.Contains(err.Error(), wrong) {
		t.Errorf("the error shows the token: %v", err)
	}
	t.Setenv("SPECSYNC_GHCR_TEST_TOKEN", ghcrToken)
	if got := len(fetch(t, src).Entries); got != 2 {
		t.Errorf("after the rotation: %d entries, want 2", got)
	}

	// An API that echoes the Authorization header in its error.
	rig.api.setFault(answer(ghPage(1), func(w http.ResponseWriter, r *http.Request) {
		msg, _ := json.Marshal("refused " + r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"message":%s}`, msg)
	}))
	err := fetchFails(t, src, "403", "[REDACTED]")
	if strings.Contains(err.Error(), ghcrToken) {
		t.Errorf("the error shows the token: %v", err)
	}
}

func TestNewGHCRValidates(t *testing.T) {
	t.Parallel()
	tok := registry.Auth{Type: "token", TokenEnv: "T"}
	for _, tc := range []struct {
		cfg  registry.GHCRConfig
		want string
	}{
		{registry.GHCRConfig{OwnerType: "org", Auth: tok}, "ghcr.owner is required"},
		{registry.GHCRConfig{Owner: "-acme", OwnerType: "org", Auth: tok}, "ghcr.owner"},
		{registry.GHCRConfig{Owner: "acme/x", OwnerType: "org", Auth: tok}, "ghcr.owner"},
		{registry.GHCRConfig{Owner: strings.Repeat("a", 40), OwnerType: "org", Auth: tok}, "ghcr.owner"},
		{registry.GHCRConfig{Owner: "acme", Auth: tok}, "ghcr.owner_type is required"},
		{registry.GHCRConfig{Owner: "acme", OwnerType: "organization", Auth: tok}, "ghcr.owner_type"},
		{registry.GHCRConfig{Owner: "acme", OwnerType: "org"}, "ghcr.auth is required"},
		{registry.GHCRConfig{Owner: "acme", OwnerType: "org", Auth: registry.Auth{Type: "token"}}, "ghcr.auth"},
		{registry.GHCRConfig{Owner: "acme", OwnerType: "org", Auth: tok, PageSize: 200}, "ghcr.page_size"},
		{registry.GHCRConfig{Owner: "acme", OwnerType: "org", Auth: tok, APIURL: "api.github.com"}, "ghcr.api_url"},
		{registry.GHCRConfig{Owner: "acme", OwnerType: "org", Auth: tok, Tag: "a:b"}, "ghcr.tag"},
	} {
		if _, err := registry.NewGHCR(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewGHCR(%+v): %v, want an error naming %q", tc.cfg, err, tc.want)
		}
	}
	g, err := registry.NewGHCR(registry.GHCRConfig{Owner: "AcmeCorp", OwnerType: "org", Auth: tok})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.String(); got != "ghcr org acmecorp (auth token(from env T))" {
		t.Errorf("String() = %q", got)
	}
	// Events may name the owner as GitHub displays it.
	if e, ok := g.Select(registry.Change{Host: "ghcr.io", Repository: "AcmeCorp/tools/db", Tag: "latest"}); !ok || e != "tools/db" {
		t.Errorf("Select: %q, %v", e, ok)
	}
	if _, ok := g.Select(registry.Change{Host: "docker.io", Repository: "acmecorp/db", Tag: "latest"}); ok {
		t.Error("a change of another host was selected")
	}
}
