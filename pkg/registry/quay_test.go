package registry_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"

	"github.com/specsync/specsync/emulator/hubs"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

// quayRig is Quay in process (hubs.Quay: its API and its registry's
// token service, on one host as quay.io serves them) in front of the
// reference distribution registry, behind a fault hook and a request
// record (server); push is a door to the distribution registry that
// skips Quay's auth.
type quayRig struct {
	quay *hubs.Quay
	host *server
	push *server
}

// The rig's credentials: robot acme+specsync and an OAuth token of an
// application of acme.
const (
	quayRobot      = "acme+specsync"
	quayRobotToken = "QUAYROBOT0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ABCDEFG"
	quayOAuthToken = "quayoauth0123456789abcdefghijklmnopqrstu"
)

func newQuayRig(t *testing.T) *quayRig {
	t.Helper()
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	cfg.Catalog.MaxEntries = 1000
	r := &quayRig{quay: hubs.NewQuay(handlers.NewApp(context.Background(), cfg))}
	r.quay.AddRobot(quayRobot, quayRobotToken)
	r.quay.AddOAuthToken(quayOAuthToken, suiteNamespace)
	r.push = serve(t, r.quay.Storage())
	r.host = serve(t, r.quay)
	return r
}

// pushSpec pushes a spec image as ns/name:latest and lists the
// repository.
func (r *quayRig) pushSpec(t *testing.T, ns, name, yamlText string, public bool) {
	t.Helper()
	r.push.pushSpec(t, ns+"/"+name, yamlText)
	r.quay.Add(ns, name, public)
}

// The rig as the conformance suite's upstream, its entries repositories
// of suiteNamespace (see conformance_test.go's faulty).

func (r *quayRig) put(t *testing.T, entry, yamlText string) {
	r.pushSpec(t, suiteNamespace, entry, yamlText, true)
}

// putBroken lists entry with an image whose label is garbage.
func (r *quayRig) putBroken(t *testing.T, entry string) {
	r.push.pushImage(t, suiteNamespace+"/"+entry, "latest", image(t, map[string]string{spec.LabelKey: "%%% neither base64 nor YAML: ["}, nil))
	r.quay.Add(suiteNamespace, entry, true)
}

// remove deletes the repository: the API lists it no more.
func (r *quayRig) remove(_ *testing.T, entry string) { r.quay.Remove(suiteNamespace, entry) }

func (r *quayRig) unavailable(*testing.T) {
	r.setFault(func(w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, "gone", http.StatusServiceUnavailable)
		return true
	})
}

func (r *quayRig) setFault(f func(w http.ResponseWriter, r *http.Request) bool) { r.host.setFault(f) }

func (r *quayRig) isListing(req *http.Request) bool { return r.quay.IsListing(req) }

func (r *quayRig) source(t *testing.T, c suiteConfig) registry.Source {
	r.quay.SetPageSize(c.pageSize)
	return r.newSource(t, registry.QuayConfig{Namespace: suiteNamespace, Timeout: c.timeout})
}

// newSource reads the rig with cfg: its host, plain HTTP, the API at
// the host (the default), fast retries.
func (r *quayRig) newSource(t *testing.T, cfg registry.QuayConfig) *registry.Quay {
	t.Helper()
	cfg.Host, cfg.Insecure = r.host.host, true
	src, err := registry.NewQuay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return registry.FastRetryQuay(src)
}

func isQuayList(_, uri string) bool { return strings.HasPrefix(uri, "/api/v1/repository?") }

// A namespace of public and private repositories, on several pages: the
// OAuth token lists and pulls them all (the registry as $oauthtoken),
// the robot pulls them with the API's token beside it; anonymous lists
// the public ones. Every page asks for the namespace with public=true.
func TestQuayListsANamespace(t *testing.T) {
	t.Parallel()
	rig := newQuayRig(t)
	rig.quay.SetPageSize(2)
	var all, public []string
	for i := range 5 {
		n := fmt.Sprintf("svc-%d", i)
		rig.pushSpec(t, "acme", n, specYAML(n), i%2 == 0)
		all = append(all, n)
		if i%2 == 0 {
			public = append(public, n)
		}
	}
	// Nested repository names, and another namespace's image.
	rig.pushSpec(t, "acme", "tools/db", specYAML("db"), false)
	all = append(all, "tools/db")
	rig.pushSpec(t, "other", "svc-x", specYAML("x"), true)
	slices.Sort(all)

	dir := t.TempDir()
	for file, secret := range map[string]string{"oauth": quayOAuthToken, "robot": quayRobotToken} {
		if err := writeFile(dir+"/"+file, secret+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		auth registry.Auth
		want []string
	}{
		{"token", registry.Auth{Type: "token", TokenFile: dir + "/oauth"}, all},
		{"robot", registry.Auth{Type: "basic", Username: quayRobot, PasswordFile: dir + "/robot", TokenFile: dir + "/oauth"}, all},
		{"anonymous", registry.Auth{}, public},
	} {
		t.Run(c.name, func(t *testing.T) {
			rig.host.reset()
			l := fetch(t, rig.newSource(t, registry.QuayConfig{Namespace: "acme", Auth: c.auth}))
			if got := names(l); !slices.Equal(got, c.want) {
				t.Fatalf("entries %v, want %v\n%s", got, c.want, rig.host.log())
			}
			for _, e := range l.Entries {
				if e.Err != nil || e.Spec == nil || !strings.HasPrefix(e.Ref, rig.host.host+"/acme/"+e.Name+"@sha256:") {
					t.Errorf("%s: ref %s, err %v", e.Name, e.Ref, e.Err)
				}
			}
			pages := (len(c.want) + 1) / 2
			if n := rig.host.count(isQuayList); n != pages {
				t.Errorf("%d API pages, want %d:\n%s", n, pages, rig.host.log())
			}
			if n := rig.host.count(func(m, uri string) bool {
				return isQuayList(m, uri) && (!strings.Contains(uri, "namespace=acme") || !strings.Contains(uri, "public=true"))
			}); n != 0 {
				t.Errorf("%d pages asked without namespace=acme&public=true:\n%s", n, rig.host.log())
			}
			if n := rig.host.count(isCatalog); n != 0 {
				t.Errorf("%d catalog requests", n)
			}
		})
	}

	// An unchanged namespace read again costs HEADs, no manifest GET.
	src := rig.newSource(t, registry.QuayConfig{Namespace: "acme", Auth: registry.Auth{Type: "token", TokenFile: dir + "/oauth"}})
	first := fetch(t, src)
	rig.host.reset()
	if again := fetch(t, src); again.Digest != first.Digest {
		t.Errorf("unchanged namespace: digest %s then %s", first.Digest, again.Digest)
	}
	if n := rig.host.count(isGetManifest) + rig.host.count(isBlob); n != 0 {
		t.Errorf("a warm fetch made %d manifest GETs and blob requests:\n%s", n, rig.host.log())
	}
}

// Every way a page fails, fails the whole fetch before any image is
// read: Quay's errors with their detail, a rate limit with when to come
// back, a body cut short or not a page, and a pagination that would not
// end or lists a repository twice.
func TestQuayListingFaultsFailTheFetch(t *testing.T) {
	t.Parallel()
	rig := newQuayRig(t)
	rig.quay.SetPageSize(2)
	for i := range 5 {
		rig.put(t, fmt.Sprintf("r%d", i), specYAML(fmt.Sprintf("r%d", i)))
	}
	later := func(req *http.Request) bool { return req.URL.Query().Get("next_page") != "" }
	status := func(onLater bool, code int, typ, detail string, headers ...string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, req *http.Request) bool {
			if !rig.isListing(req) || later(req) != onLater {
				return false
			}
			for i := 0; i+1 < len(headers); i += 2 {
				w.Header().Set(headers[i], headers[i+1])
			}
			hubs.QuayError(w, code, typ, detail)
			return true
		}
	}
	body := func(onLater bool, text string, length int) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, req *http.Request) bool {
			if !rig.isListing(req) || later(req) != onLater {
				return false
			}
			if length > 0 {
				w.Header().Set("Content-Length", strconv.Itoa(length))
			}
			_, _ = io.WriteString(w, text)
			return true
		}
	}
	for _, tc := range []struct {
		name  string
		fault func(w http.ResponseWriter, r *http.Request) bool
		page  func(k int, page map[string]any)
		want  []string
	}{
		{name: "401", fault: status(false, 401, "invalid_token", "OAuth access token could not be validated"),
			want: []string{"page 1", "401", "OAuth access token could not be validated"}},
		{name: "403 on page 2", fault: status(true, 403, "insufficient_scope", "Unauthorized"), want: []string{"page 2", "403"}},
		{name: "429 with Retry-After", fault: status(true, 429, "rate_limited", "slow down", "Retry-After", "120"),
			want: []string{"page 2", "429", "Retry-After: 120", "does not wait"}},
		{name: "500 on page 2", fault: status(true, 500, "internal", "Internal Server Error"), want: []string{"page 2", "500"}},
		{name: "502 on page 1, every retry", fault: status(false, 502, "bad_gateway", "Bad Gateway"), want: []string{"page 1", "502"}},
		{name: "truncated body", fault: body(true, `{"repositories": [{"namespace": "acme", "name": "r2"`, 4096), want: []string{"page 2", "unexpected EOF"}},
		{name: "garbage body", fault: body(false, `<html>maintenance</html>`, 0), want: []string{"page 1", "not a page of repositories"}},
		{name: "no repositories field", fault: body(false, `{"next_page": "x"}`, 0), want: []string{"page 1", "it has no repositories"}},
		{name: "next_page repeats", page: func(k int, p map[string]any) {
			if k == 2 {
				p["next_page"] = base64.RawURLEncoding.EncodeToString([]byte("start_id:2"))
			}
		}, want: []string{"page 2", "next_page is the one page 1 gave", "would not end"}},
		{name: "empty page with a next page", page: func(k int, p map[string]any) {
			if k == 1 {
				p["repositories"] = []any{}
			}
		}, want: []string{"page 1", "without repositories names a next page"}},
		{name: "a repository listed twice", page: func(k int, p map[string]any) {
			if k == 3 {
				hubs.QuayRepositories(p)[0]["name"] = "r0"
			}
		}, want: []string{"page 3", `lists "r0" again (page 1 listed it)`, "shifted"}},
		{name: "another namespace", page: func(k int, p map[string]any) {
			if k == 1 {
				hubs.QuayRepositories(p)[1]["namespace"] = "mallory"
			}
		}, want: []string{"page 1", `"r1" of another namespace, "mallory"`}},
		{name: "an application repository", page: func(k int, p map[string]any) {
			if k == 2 {
				hubs.QuayRepositories(p)[0]["kind"] = "application"
			}
		}, want: []string{"page 2", `of kind "application"`}},
		{name: "a repository without a name", page: func(k int, p map[string]any) {
			if k == 1 {
				hubs.QuayRepositories(p)[0]["name"] = ""
			}
		}, want: []string{"page 1", "without a name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig.setFault(tc.fault)
			rig.quay.SetPageHook(tc.page)
			defer func() {
				rig.setFault(nil)
				rig.quay.SetPageHook(nil)
			}()
			rig.host.reset()
			err := fetchFails(t, rig.newSource(t, registry.QuayConfig{Namespace: "acme", Timeout: 20 * time.Second}), tc.want...)
			if strings.Contains(err.Error(), "did not finish within") {
				t.Errorf("the fetch waited for its deadline: %v", err)
			}
			if n := rig.host.count(isManifest); n != 0 {
				t.Errorf("%d manifest requests after a failed listing:\n%s", n, rig.host.log())
			}
		})
	}

	// A next_page that never ends stops at the page limit.
	generated := 0
	rig.quay.SetPageHook(func(_ int, p map[string]any) {
		generated++
		p["repositories"] = []map[string]any{{"namespace": "acme", "name": fmt.Sprintf("gen-%d", generated), "kind": "image"}}
		p["next_page"] = base64.RawURLEncoding.EncodeToString([]byte("start_id:" + strconv.Itoa(generated)))
	})
	fetchFails(t, registry.QuayPageLimit(rig.newSource(t, registry.QuayConfig{Namespace: "acme"}), 4), "page 5", "more than 4 pages")
	rig.quay.SetPageHook(nil)

	// The healed API lists everything.
	if got := len(fetch(t, rig.newSource(t, registry.QuayConfig{Namespace: "acme"})).Entries); got != 5 {
		t.Errorf("healed: %d entries, want 5", got)
	}
}

// A robot token or an OAuth token never shows in an error, the source's
// name or a log line, whatever fails: a wrong robot token at the token
// service, an API that echoes the bearer token it was sent, a registry
// that echoes the Basic credentials. A rotated token is read at the next
// fetch.
func TestQuaySecretsStayOut(t *testing.T) {
	t.Parallel()
	rig := newQuayRig(t)
	rig.put(t, "db", specYAML("db"))
	rig.quay.SetPublic(suiteNamespace, "db", false)
	dir := t.TempDir()
	robotFile, apiFile := dir+"/robot", dir+"/api"
	const wrong = "WRONGROBOT0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ABCD"
	if err := writeFile(robotFile, wrong); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(apiFile, quayOAuthToken); err != nil {
		t.Fatal(err)
	}
	auth := registry.Auth{Type: "basic", Username: quayRobot, PasswordFile: robotFile, TokenFile: apiFile}
	src := rig.newSource(t, registry.QuayConfig{Namespace: "acme", Auth: auth})
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	secrets := []string{wrong, quayRobotToken, quayOAuthToken,
		base64.StdEncoding.EncodeToString([]byte(quayRobot + ":" + wrong)),
		base64.StdEncoding.EncodeToString([]byte(quayRobot + ":" + quayRobotToken))}
	check := func(what string, err error) {
		t.Helper()
		log.Error("fetch failed", "source", src.String(), "auth", auth, "error", err)
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) || strings.Contains(src.String(), s) || strings.Contains(logs.String(), s) {
				t.Errorf("%s: a secret shows: %v\n%s", what, err, logs.String())
			}
		}
	}

	// The wrong robot token: the registry refuses every pull.
	l, err := src.Fetch(context.Background(), registry.FetchOptions{})
	if err == nil {
		if len(l.Entries) != 1 || l.Entries[0].Err == nil {
			t.Fatalf("a wrong robot token read %+v", l.Entries)
		}
		err = l.Entries[0].Err
	}
	check("wrong robot token", err)

	// The API echoes the bearer token it got; the token service echoes
	// the Basic credentials.
	if err := writeFile(robotFile, quayRobotToken); err != nil {
		t.Fatal(err)
	}
	rig.setFault(func(w http.ResponseWriter, req *http.Request) bool {
		if !rig.isListing(req) {
			return false
		}
		hubs.QuayError(w, http.StatusUnauthorized, "invalid_token", "refused "+req.Header.Get("Authorization"))
		return true
	})
	check("API echo", fetchFails(t, src, "401", "[REDACTED]"))
	rig.setFault(func(w http.ResponseWriter, req *http.Request) bool {
		if req.URL.Path != "/v2/auth" {
			return false
		}
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"errors":[{"code":"DENIED","message":"refused %s"}]}`, req.Header.Get("Authorization"))
		return true
	})
	l, err = src.Fetch(context.Background(), registry.FetchOptions{})
	if err == nil {
		err = l.Entries[0].Err
	}
	if err == nil {
		t.Fatal("a token service that refuses everything: no error")
	}
	check("token service echo", err)

	// Healed, with the rotated robot token: it reads.
	rig.setFault(nil)
	if l := fetch(t, src); len(l.Entries) != 1 || l.Entries[0].Err != nil {
		t.Errorf("after the rotation: %+v", l.Entries)
	}
}

// Bad configuration: every problem of the block at once, each naming its
// field as the registries file writes it.
func TestNewQuayValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  registry.QuayConfig
		want []string
	}{
		{registry.QuayConfig{}, []string{"quay.namespace is required"}},
		{registry.QuayConfig{Namespace: "Acme"}, []string{"quay.namespace \"Acme\""}},
		{registry.QuayConfig{Namespace: "a"}, []string{"quay.namespace \"a\""}},
		{registry.QuayConfig{Namespace: "acme", Auth: registry.Auth{Type: "basic", Username: quayRobot, PasswordEnv: "P"}},
			[]string{"quay.auth: token_env or token_file is required with type basic"}},
		{registry.QuayConfig{Namespace: "acme", Auth: registry.Auth{Type: "basic", Username: quayRobot, TokenEnv: "T"}},
			[]string{"quay.auth: auth type basic needs a password"}},
		{registry.QuayConfig{Namespace: "acme", Auth: registry.Auth{Type: "basic", Username: quayRobot, PasswordEnv: "P", TokenEnv: "T", TokenFile: "f"}},
			[]string{"quay.auth: set only one of token_env, token_file"}},
		{registry.QuayConfig{Namespace: "acme", Auth: registry.Auth{Type: "token", TokenEnv: "T", PasswordEnv: "P"}},
			[]string{"quay.auth: auth type token does not use password_env"}},
		{registry.QuayConfig{Namespace: "acme", Auth: registry.Auth{Type: "google"}}, []string{"quay.auth.type google is not one Quay takes"}},
		{registry.QuayConfig{Namespace: "acme", APIURL: "quay.io"}, []string{"quay.api_url"}},
		{registry.QuayConfig{Namespace: "acme", Host: "https://quay.io"}, []string{"quay.host"}},
		{registry.QuayConfig{Namespace: "acme", Tag: "a:b"}, []string{"quay.tag"}},
		// Everything wrong at once: each problem, each with its field.
		{registry.QuayConfig{Namespace: "A!", Auth: registry.Auth{Type: "basic", Username: quayRobot}, APIURL: "ftp://x", Tag: "a:b"},
			[]string{"quay.namespace \"A!\"", "quay.auth: auth type basic needs a password", "quay.auth: token_env or token_file", "quay.api_url", "quay.tag"}},
	} {
		_, err := registry.NewQuay(tc.cfg)
		if err == nil {
			t.Errorf("NewQuay(%+v): no error, want %q", tc.cfg, tc.want)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(tc.want) {
			t.Errorf("NewQuay(%+v): %d problems, want %d: %v", tc.cfg, len(lines), len(tc.want), err)
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(lines[i], "quay.") || !strings.Contains(lines[i], w) {
				t.Errorf("NewQuay(%+v): problem %d is %q, want one naming %q", tc.cfg, i, lines[i], w)
			}
		}
	}
	q, err := registry.NewQuay(registry.QuayConfig{Namespace: "acme", Auth: registry.Auth{Type: "token", TokenEnv: "T"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := q.String(); got != "quay quay.io/acme (auth token(from env T))" {
		t.Errorf("String() = %q", got)
	}
	for _, c := range []struct {
		change registry.Change
		entry  string
	}{
		{registry.Change{Repository: "acme/db", Tag: "latest"}, "db"},
		{registry.Change{Host: "quay.io", Repository: "acme/tools/db", Tag: "latest"}, "tools/db"},
		{registry.Change{Repository: "acme/db", Tag: "dev"}, ""},
		{registry.Change{Repository: "other/db", Tag: "latest"}, ""},
		{registry.Change{Host: "quay.example.com", Repository: "acme/db", Tag: "latest"}, ""},
	} {
		if e, ok := q.Select(c.change); e != c.entry || ok != (c.entry != "") {
			t.Errorf("Select(%+v) = %q, %v; want %q", c.change, e, ok, c.entry)
		}
	}
}

// The API is https://HOST by default, on quay.io or a self-hosted Quay;
// api_url replaces it.
func TestQuayAPIURL(t *testing.T) {
	t.Parallel()
	var asked []string
	var mu sync.Mutex
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		fmt.Fprint(w, `{"repositories": []}`)
	}))
	t.Cleanup(api.Close)
	q, err := registry.NewQuay(registry.QuayConfig{Namespace: "acme", APIURL: api.URL + "/quay/"})
	if err != nil {
		t.Fatal(err)
	}
	if l := fetch(t, q); len(l.Entries) != 0 {
		t.Errorf("entries %v", names(l))
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(asked, []string{"/quay/api/v1/repository"}) {
		t.Errorf("asked %v", asked)
	}
	d := (&registry.QuayBlock{Namespace: "acme"}).Describe()
	if d.Location != "quay.io/acme" || d.Auth != "anonymous" {
		t.Errorf("Describe() = %+v", d)
	}
}
