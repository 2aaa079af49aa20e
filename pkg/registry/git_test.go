package registry_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/registry"
)

// gitRig is a Git repository served over smart HTTP by git's own
// http-backend (net/http/cgi), behind TLS, a Basic auth check, a request
// log and a fault hook. The repository is changed with the git binary
// from a work tree that pushes to it, as a user would.
type gitRig struct {
	t      *testing.T
	srv    *httptest.Server
	bare   string // the served repository
	work   string // the work tree commits are made in
	branch string

	mu       sync.Mutex
	requests []string // "METHOD /path?query"
	fault    func(w http.ResponseWriter, r *http.Request) bool
	user     string // the Basic credentials required ("" none)
	password string
	down     bool
}

// newGitRig serves a repository whose main branch has one empty commit.
func newGitRig(t *testing.T) *gitRig {
	t.Helper()
	r := newEmptyGitRig(t)
	r.commit(nil)
	return r
}

// newEmptyGitRig serves a repository without a commit.
func newEmptyGitRig(t *testing.T) *gitRig {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git source's tests serve repositories with git http-backend: %v", err)
	}
	root := t.TempDir()
	r := &gitRig{t: t, bare: filepath.Join(root, "srv", "specs.git"), work: filepath.Join(root, "work"), branch: "main"}
	r.git(root, "init", "--quiet", "--bare", "--initial-branch=main", r.bare)
	r.git(root, "init", "--quiet", "--initial-branch=main", r.work)
	r.git(r.work, "remote", "add", "origin", r.bare)
	backend := &cgi.Handler{
		Path: gitExec(t, "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Dir(r.bare), "GIT_HTTP_EXPORT_ALL=1", "HOME=" + root},
	}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req.Method+" "+req.URL.RequestURI())
		fault, down, user, pass := r.fault, r.down, r.user, r.password
		r.mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if fault != nil && fault(w, req) {
			return
		}
		if user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// gitExec is a program of git's exec path (git-http-backend).
func gitExec(t *testing.T, name string) string {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), name)
}

func (r *gitRig) git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=specsync", "-c", "user.email=specsync@example.com",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (a nil content removes one), commits and pushes
// the branch; it returns the commit.
func (r *gitRig) commit(files map[string]*string) string {
	r.t.Helper()
	for p, content := range files {
		full := filepath.Join(r.work, filepath.FromSlash(p))
		if content == nil {
			if err := os.Remove(full); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(*content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git(r.work, "add", "--all")
	r.git(r.work, "commit", "--quiet", "--allow-empty", "-m", "change")
	r.git(r.work, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/"+r.branch)
	return r.git(r.work, "rev-parse", "HEAD")
}

func ptr(s string) *string { return &s }

// The conformance suite's entries are files at the root.
func (r *gitRig) put(_ *testing.T, entry, yamlText string) {
	r.commit(map[string]*string{entry + ".yaml": ptr(yamlText)})
}

func (r *gitRig) putBroken(_ *testing.T, entry string) {
	r.commit(map[string]*string{entry + ".yaml": ptr("name: [unclosed")})
}

func (r *gitRig) remove(_ *testing.T, entry string) {
	r.commit(map[string]*string{entry + ".yaml": nil})
}

func (r *gitRig) unavailable(*testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = true
}

func (r *gitRig) setFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fault = f
}

// isListing is the refs' advertisement: what lists the entries' commit.
func (r *gitRig) isListing(req *http.Request) bool {
	return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/info/refs")
}

func (r *gitRig) requireBasic(user, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.password = user, password
}

// counted returns the requests made since the last call.
func (r *gitRig) counted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.requests
	r.requests = nil
	return out
}

func (r *gitRig) url() string { return r.srv.URL + "/specs.git" }

func (r *gitRig) config(c registry.GitConfig) registry.GitConfig {
	if c.URL == "" {
		c.URL = r.url()
	}
	if c.Ref == "" {
		c.Ref = "main"
	}
	if c.Paths == nil {
		c.Paths = []string{"specs/*.yaml"}
	}
	c.Transport = r.srv.Client().Transport
	return c
}

func (r *gitRig) newGit(t *testing.T, c registry.GitConfig) *registry.Git {
	t.Helper()
	src, err := registry.NewGit(r.config(c))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func (r *gitRig) source(t *testing.T, c suiteConfig) registry.Source {
	return r.newGit(t, registry.GitConfig{Timeout: c.timeout, Paths: []string{"*.yaml"}})
}

// Entries are the selected files, named by their path without the
// extension; each file is a spec as a dir source's file is.
func TestGitListsTheFilesItsGlobsSelect(t *testing.T) {
	t.Parallel()
	r := newGitRig(t)
	r.commit(map[string]*string{
		"specs/db.yaml":                   ptr(specYAML("db")),
		"specs/cache.json":                ptr(`{"name":"cache","description":"c","plans":[{"name":"p","description":"p"}]}`),
		"specs/README.md":                 ptr("not a spec"),
		"specs/nested/deep.yaml":          ptr(specYAML("deep")),
		"services/a/b/spec.yaml":          ptr(specYAML("ab")),
		"services/spec.yaml":              ptr(specYAML("top")),
		"elsewhere/ignored.yaml":          ptr(specYAML("ignored")),
		"specs/broken.yaml":               ptr("name: [unclosed"),
		"specs/twice.yaml":                ptr(specYAML("twice")),
		"specs/twice.json":                ptr(`{"name":"twice"}`),
		"services/experimental/spec.yaml": ptr(specYAML("exp")),
	})
	src := r.newGit(t, registry.GitConfig{Paths: []string{"specs/*", "services/**/spec.yaml"},
		Filter: mustFilter(t, nil, []string{"services/experimental/.*"})})
	l := fetch(t, src)
	want := []string{"services/a/b/spec", "services/spec", "specs/broken", "specs/cache", "specs/db", "specs/twice", "specs/twice"}
	if got := names(l); !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	got := byName(l)
	if e := got["specs/db"]; e.Spec == nil || e.Spec.Name != "db" || e.Err != nil || !strings.Contains(e.Ref, "//specs/db.yaml?ref=main") || !strings.HasPrefix(e.Upstream, "git1@") {
		t.Errorf("specs/db: %+v", e)
	}
	if e := got["specs/broken"]; e.Spec != nil || e.Err == nil || !strings.Contains(e.Err.Error(), "specs/broken.yaml") {
		t.Errorf("a broken file is its entry's error naming the file: %+v", e)
	}
	var dups int
	for _, e := range l.Entries {
		if e.Name == "specs/twice" && e.Err != nil && strings.Contains(e.Err.Error(), "already used by file specs/twice.json") {
			dups++
		}
	}
	if dups != 1 {
		t.Errorf("twice.json and twice.yaml: want the second an error naming the first, got %+v", l.Entries)
	}
	if l.ETag == "" {
		t.Error("no ETag: an unchanged repository could not be told")
	}
}

// An unchanged repository costs one request: the refs' advertisement,
// whose commit (in the ETag) is the recorded one. A changed one costs
// the advertisement and the commit's pack, and reads only the files
// whose blob moved: the others come back from the run's hints.
func TestGitUnchangedCostsOneRequestChangedReadsOnlyMovedBlobs(t *testing.T) {
	t.Parallel()
	r := newGitRig(t)
	r.commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a")), "specs/b.yaml": ptr(specYAML("b"))})
	src := r.newGit(t, registry.GitConfig{})
	ctx := context.Background()
	first := fetch(t, src)
	if n := len(r.counted()); n != 2 {
		t.Fatalf("a first fetch made %d requests, want 2 (refs, pack)", n)
	}

	l, err := src.Fetch(ctx, registry.FetchOptions{ETag: first.ETag, PreviousDigest: first.Digest,
		Hints: func(context.Context) (map[string]registry.Hint, error) {
			t.Error("an unchanged repository asked for the run's hints")
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := r.counted()
	if !l.NotModified || l.Digest != first.Digest || l.ETag != first.ETag || len(reqs) != 1 || !strings.Contains(reqs[0], "/info/refs") {
		t.Fatalf("unchanged: NotModified %v, digest %s (want %s), requests %v; want NotModified after one refs request", l.NotModified, l.Digest, first.Digest, reqs)
	}

	// Another commit that leaves both files as they are: same blobs,
	// same listing digest, both given back from the hints.
	hints := map[string]registry.Hint{}
	for _, e := range first.Entries {
		hints[e.Name] = registry.Hint{Upstream: e.Upstream, SpecID: "id-" + e.Name, SpecName: e.Spec.Name, SpecDigest: "d-" + e.Name}
	}
	asked := 0
	opts := registry.FetchOptions{ETag: first.ETag, PreviousDigest: first.Digest,
		Hints: func(context.Context) (map[string]registry.Hint, error) { asked++; return hints, nil }}
	r.commit(map[string]*string{"specs/b.yaml": ptr(specYAML("b", "default", "large"))})
	l, err = src.Fetch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.counted()); n != 2 || l.NotModified || l.ETag == first.ETag {
		t.Fatalf("changed: %d requests, NotModified %v, ETag %s; want 2 requests and a new ETag", n, l.NotModified, l.ETag)
	}
	got := byName(l)
	if a := got["specs/a"]; a.Hint == nil || a.Spec != nil || a.Upstream != hints["specs/a"].Upstream {
		t.Errorf("the unchanged file was not given back from its hint: %+v", a)
	}
	if b := got["specs/b"]; b.Hint != nil || b.Spec == nil || len(b.Spec.Plans) != 2 || b.Upstream == hints["specs/b"].Upstream {
		t.Errorf("the changed file was not read: %+v", b)
	}
	if asked != 1 {
		t.Errorf("the run's hints were asked for %d times, want once", asked)
	}
	if l.Digest == first.Digest {
		t.Error("a file changed and the listing digest did not")
	}
}

// A validator names what selects the files too: the same commit read
// with other globs or another filter is not NotModified.
func TestGitETagNamesTheSelection(t *testing.T) {
	t.Parallel()
	r := newGitRig(t)
	r.commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a")), "other/b.yaml": ptr(specYAML("b"))})
	first := fetch(t, r.newGit(t, registry.GitConfig{}))
	for name, c := range map[string]registry.GitConfig{
		"paths":  {Paths: []string{"specs/*.yaml", "other/*.yaml"}},
		"filter": {Filter: mustFilter(t, nil, []string{"specs/a"})},
	} {
		l, err := r.newGit(t, c).Fetch(context.Background(), registry.FetchOptions{ETag: first.ETag, PreviousDigest: first.Digest})
		if err != nil {
			t.Fatal(err)
		}
		if l.NotModified || l.ETag == first.ETag {
			t.Errorf("%s changed and the listing was NotModified (ETag %s)", name, l.ETag)
		}
	}
}

// The fetch wants the commit the refs named. A ref moved between the two
// requests (here force-pushed away) fails the fetch whole: no listing,
// so the run marks nothing.
func TestGitRefMovedBetweenRefsAndPackFailsTheFetch(t *testing.T) {
	t.Parallel()
	r := newGitRig(t)
	r.commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a")), "specs/b.yaml": ptr(specYAML("b"))})
	src := r.newGit(t, registry.GitConfig{})
	var once sync.Once
	r.setFault(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method == http.MethodPost {
			once.Do(func() {
				// A force-push of a history without the old commit.
				r.git(r.work, "checkout", "--quiet", "--orphan", "rewritten")
				r.git(r.work, "rm", "--quiet", "-r", "--cached", "specs/b.yaml")
				r.git(r.work, "commit", "--quiet", "-m", "rewrite")
				r.git(r.work, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/main")
			})
		}
		return false
	})
	fetchFails(t, src, "fetching the commit", "moved")
	// The next fetch reads what the force-push left.
	r.setFault(nil)
	if got := names(fetch(t, src)); !slices.Equal(got, []string{"specs/a"}) {
		t.Errorf("after the force-push: %v, want [specs/a]", got)
	}
}

// What fails the fetch whole, never a listing short of entries: a
// missing ref, a repository gone, credentials refused, an empty
// repository, a pack over max_bytes. No error shows the token.
func TestGitFailuresFailTheFetchWhole(t *testing.T) {
	t.Parallel()
	r := newGitRig(t)
	r.commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a"))})
	token := "ghp_canary" + strings.Repeat("x", 20)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.requireBasic(registry.GitTokenUser, token)
	good := registry.GitConfig{Auth: registry.GitAuth{Type: "token", TokenFile: tokenFile}}
	fetch(t, r.newGit(t, good))

	empty := newEmptyGitRig(t)
	for _, c := range []struct {
		name string
		src  registry.Source
		want []string
	}{
		{"missing ref", r.newGit(t, registry.GitConfig{Ref: "release", Auth: good.Auth}), []string{"no ref release"}},
		{"repository gone", r.newGit(t, registry.GitConfig{URL: r.srv.URL + "/gone.git", Auth: good.Auth}), []string{"404"}},
		{"no credentials", r.newGit(t, registry.GitConfig{}), []string{"401"}},
		{"empty repository", empty.newGit(t, registry.GitConfig{}), []string{"empty"}},
		{"pack over max_bytes", r.newGit(t, registry.GitConfig{Auth: good.Auth, MaxBytes: 64}), []string{"max_bytes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := fetchFails(t, c.src, c.want...)
			if strings.Contains(err.Error(), token) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
	// A server that echoes the credentials it refused.
	r.setFault(func(w http.ResponseWriter, req *http.Request) bool {
		http.Error(w, "refused "+req.Header.Get("Authorization"), http.StatusForbidden)
		return true
	})
	err := fetchFails(t, r.newGit(t, good), "403", "[REDACTED]")
	if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(registry.GitTokenUser+":"+token))) {
		t.Errorf("the error shows the credentials: %v", err)
	}
}

// A force-push is an ordinary change: the ref's new commit is read, and a
// file the rewrite dropped is gone. An annotated tag names the commit it
// peels to.
func TestGitReadsWhatTheRefNamesNow(t *testing.T) {
	t.Parallel()
	r := newGitRig(t)
	r.commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a")), "specs/b.yaml": ptr(specYAML("b"))})
	r.git(r.work, "tag", "-a", "-m", "release", "v1")
	r.git(r.work, "push", "--quiet", "origin", "v1")
	src := r.newGit(t, registry.GitConfig{})
	if got := names(fetch(t, src)); !slices.Equal(got, []string{"specs/a", "specs/b"}) {
		t.Fatalf("before: %v", got)
	}
	r.git(r.work, "checkout", "--quiet", "--orphan", "rewritten")
	r.git(r.work, "rm", "--quiet", "--cached", "specs/b.yaml")
	r.git(r.work, "commit", "--quiet", "-m", "rewrite")
	r.git(r.work, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/main")
	if got := names(fetch(t, src)); !slices.Equal(got, []string{"specs/a"}) {
		t.Errorf("after a force-push dropping b: %v, want [specs/a]", got)
	}
	tag := r.newGit(t, registry.GitConfig{Ref: "v1"})
	if got := names(fetch(t, tag)); !slices.Equal(got, []string{"specs/a", "specs/b"}) {
		t.Errorf("at the annotated tag v1: %v, want both files", got)
	}
}

// A targeted run reads the named entries only; a name the globs or the
// filter do not select is refused, a name with no file is gone.
func TestGitFetchEntries(t *testing.T) {
	t.Parallel()
	r := newGitRig(t)
	r.commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a")), "specs/b.yaml": ptr(specYAML("b"))})
	src := r.newGit(t, registry.GitConfig{Filter: mustFilter(t, nil, []string{"specs/denied"})})
	l, err := src.FetchEntries(context.Background(), []string{"specs/b", "specs/gone", "other/x", "specs/denied", "../specs/a"}, registry.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(l); !slices.Equal(got, []string{"specs/b"}) {
		t.Errorf("entries %v, want [specs/b]", got)
	}
	slices.Sort(l.Refused)
	if want := []string{"../specs/a", "other/x", "specs/denied"}; !slices.Equal(l.Refused, want) {
		t.Errorf("refused %v, want %v", l.Refused, want)
	}
	r.counted()
	if l, err := src.FetchEntries(context.Background(), []string{"other/x"}, registry.FetchOptions{}); err != nil || len(l.Entries) != 0 || len(r.counted()) != 0 {
		t.Errorf("only refused names: %v, %+v; want no request at all", err, l)
	}
}

// A push selects the entries of the paths it touched that the source
// reads; another repository, another ref, or no selected path, none; a
// push that cannot list every path, the whole registry.
func TestGitSelectPush(t *testing.T) {
	t.Parallel()
	src, err := registry.NewGit(registry.GitConfig{URL: "https://github.com/Acme/specs.git", Ref: "main", Paths: []string{"specs/*.yaml"},
		Filter: mustFilter(t, nil, []string{"specs/denied"})})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		push    registry.GitPush
		entries []string
		whole   bool
	}{
		{"paths", registry.GitPush{URLs: []string{"https://github.com/acme/specs"}, Ref: "refs/heads/main", Complete: true,
			Paths: []string{"specs/a.yaml", "specs/a.yaml", "README.md", "specs/denied.yaml", "specs/b.yaml"}}, []string{"specs/a", "specs/b"}, false},
		{"no selected path", registry.GitPush{Ref: "refs/heads/main", Complete: true, Paths: []string{"docs/x.yaml"}}, nil, false},
		{"another ref", registry.GitPush{Ref: "refs/heads/dev", Complete: true, Paths: []string{"specs/a.yaml"}}, nil, false},
		{"another repository", registry.GitPush{URLs: []string{"https://github.com/acme/other.git"}, Ref: "refs/heads/main", Complete: true, Paths: []string{"specs/a.yaml"}}, nil, false},
		{"incomplete", registry.GitPush{Ref: "refs/heads/main"}, nil, true},
		{"incomplete, another ref", registry.GitPush{Ref: "refs/tags/main2"}, nil, false},
	} {
		entries, whole := src.SelectPush(c.push)
		if !slices.Equal(entries, c.entries) || whole != c.whole {
			t.Errorf("%s: %v whole %v, want %v whole %v", c.name, entries, whole, c.entries, c.whole)
		}
	}
}

// Every problem of a git block is reported at once, each naming its
// field.
func TestGitBlockReportsEveryProblem(t *testing.T) {
	t.Parallel()
	b := &registry.GitBlock{URL: "http://user:pw@example.com/x.git", Ref: "bad..ref", Paths: []string{"/abs", "a/[", "ok/*.yaml"},
		Auth: registry.GitAuth{Type: "github_app", TokenEnv: "X"}}
	_, err := b.Build(registry.BuildContext{})
	if err == nil {
		t.Fatal("a block with every field wrong built")
	}
	for _, want := range []string{"git.url", "git.ref", "git.paths[0]", "git.paths[1]", "git.auth.app_id", "git.auth.installation_id",
		"git.auth.private_key_env or private_key_file", "git.auth.token_env: auth type github_app does not use it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "ok/*.yaml") {
		t.Errorf("a good glob is reported: %v", err)
	}
	for _, ok := range []registry.GitBlock{
		{URL: "https://example.com/x.git", Ref: "refs/tags/v1.2", Paths: []string{"**/*.yaml"}},
		{URL: "https://example.com/x.git", Ref: "main", Paths: []string{"specs/*.json"},
			Auth: registry.GitAuth{Type: "github_app", AppID: 1, InstallationID: 2, PrivateKeyFile: "/k.pem"}},
	} {
		if _, err := ok.Build(registry.BuildContext{}); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// ghApp is GitHub's installation token endpoint in process: it checks
// the JWT's RS256 signature with the app's public key and its claims as
// GitHub documents them, and issues tokens the git server accepts.
type ghApp struct {
	t       *testing.T
	srv     *httptest.Server
	key     *rsa.PrivateKey
	appID   int64
	install int64
	ttl     time.Duration

	mu      sync.Mutex
	issued  []string
	onIssue func(token string)
}

func newGHApp(t *testing.T, appID, install int64, onIssue func(string)) *ghApp {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	a := &ghApp{t: t, key: key, appID: appID, install: install, ttl: time.Hour, onIssue: onIssue}
	a.srv = httptest.NewTLSServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *ghApp) keyPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(a.key)}))
}

func (a *ghApp) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != fmt.Sprintf("/app/installations/%d/access_tokens", a.install) {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	jwt, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if err := a.verify(jwt); !ok || err != nil {
		http.Error(w, fmt.Sprintf(`{"message":"A JSON web token could not be decoded: %v"}`, err), http.StatusUnauthorized)
		return
	}
	buf := make([]byte, 16)
	_, _ = rand.Read(buf)
	tok := "ghs_" + hex.EncodeToString(buf)
	a.mu.Lock()
	a.issued = append(a.issued, tok)
	ttl := a.ttl
	a.mu.Unlock()
	a.onIssue(tok)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"token":%q,"expires_at":%q,"permissions":{"contents":"read"}}`, tok, time.Now().Add(ttl).UTC().Format(time.RFC3339))
}

func (a *ghApp) verify(jwt string) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return errors.New("not three parts")
	}
	var header struct{ Alg, Typ string }
	var claims struct {
		Iat, Exp int64
		Iss      string
	}
	for i, v := range []any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return err
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	now := time.Now().Unix()
	switch {
	case header.Alg != "RS256":
		return fmt.Errorf("alg %s", header.Alg)
	case rsa.VerifyPKCS1v15(&a.key.PublicKey, crypto.SHA256, sum[:], sig) != nil:
		return errors.New("signature")
	case claims.Iss != fmt.Sprint(a.appID):
		return fmt.Errorf("iss %q", claims.Iss)
	case claims.Iat > now || claims.Exp <= now || claims.Exp-claims.Iat > 600:
		return fmt.Errorf("iat %d exp %d now %d", claims.Iat, claims.Exp, now)
	}
	return nil
}

func (a *ghApp) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.issued)
}

// A GitHub App's installation token is asked for once and kept until
// near its expiry; the git server gets it as x-access-token's password.
// A token the server refuses is dropped, and a key GitHub does not know
// fails the fetch without showing the key.
func TestGitGitHubAppToken(t *testing.T) {
	t.Parallel()
	r := newGitRig(t)
	r.commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a"))})
	app := newGHApp(t, 4242, 77, func(tok string) { r.requireBasic(registry.GitTokenUser, tok) })
	r.requireBasic(registry.GitTokenUser, "nothing issued yet")
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, []byte(app.keyPEM()), 0o600); err != nil {
		t.Fatal(err)
	}
	auth := registry.GitAuth{Type: "github_app", AppID: 4242, InstallationID: 77, PrivateKeyFile: keyFile, APIURL: app.srv.URL}
	src := r.newGit(t, registry.GitConfig{Auth: auth})
	fetch(t, src)
	fetch(t, src)
	if n := app.count(); n != 1 {
		t.Fatalf("two fetches asked for %d installation tokens, want 1 (kept until near its expiry)", n)
	}
	// The server stops taking it (revoked): the fetch fails, and the
	// next one asks for a new token.
	r.requireBasic(registry.GitTokenUser, "revoked")
	fetchFails(t, src, "401")
	fetch(t, src)
	if n := app.count(); n != 2 {
		t.Errorf("after a refused token: %d tokens asked for, want 2", n)
	}
	// A token that expires within the margin is replaced.
	app.mu.Lock()
	app.ttl = 4 * time.Minute
	app.mu.Unlock()
	short := r.newGit(t, registry.GitConfig{Auth: auth})
	fetch(t, short)
	fetch(t, short)
	if n := app.count(); n != 4 {
		t.Errorf("a token expiring in 4 minutes was reused: %d tokens, want 4", n)
	}

	other := newGHApp(t, 4242, 77, func(string) {})
	if err := os.WriteFile(keyFile, []byte(other.keyPEM()), 0o600); err != nil {
		t.Fatal(err)
	}
	err := fetchFails(t, r.newGit(t, registry.GitConfig{Auth: auth}), "installation token", "401")
	if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "eyJ") {
		t.Errorf("the error shows the key or the JWT: %v", err)
	}
}
