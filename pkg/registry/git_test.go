package registry_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/gittest"
)

// gitRig is a git source's upstream in the conformance suite: a
// gittest repository, one file at the root an entry.
type gitRig struct{ *gittest.Repo }

func newGitRig(t *testing.T) *gitRig { return &gitRig{gittest.NewRepo(t)} }

func (r *gitRig) put(_ *testing.T, entry, yamlText string) {
	r.Commit(map[string]*string{entry + ".yaml": ptr(yamlText)})
}

func (r *gitRig) putBroken(_ *testing.T, entry string) {
	r.Commit(map[string]*string{entry + ".yaml": ptr("name: [unclosed")})
}

func (r *gitRig) remove(_ *testing.T, entry string) {
	r.Commit(map[string]*string{entry + ".yaml": nil})
}

func (r *gitRig) unavailable(*testing.T) { r.SetDown(true) }

func (r *gitRig) setFault(f func(w http.ResponseWriter, r *http.Request) bool) { r.SetFault(f) }

// isListing is the refs' advertisement: what names the entries' commit.
func (r *gitRig) isListing(req *http.Request) bool { return gittest.IsRefs(req) }

// source bounds a fetch by at least 5 s: the server spawns a process a
// request (git http-backend), which on a loaded machine outlasts the
// suite's 300 ms for a fetch that should succeed. The timeout case still
// meets its fault: a server that answers only once the client gives up.
func (r *gitRig) source(t *testing.T, c suiteConfig) registry.Source {
	return newGit(t, r.Repo, registry.GitConfig{Timeout: max(c.timeout, 5*time.Second), Paths: []string{"*.yaml"}})
}

var ptr = gittest.Ptr

// newGit is a git source of the repository: its URL, ref main and
// specs/*.yaml unless c says otherwise.
func newGit(t *testing.T, r *gittest.Repo, c registry.GitConfig) *registry.Git {
	t.Helper()
	if c.URL == "" {
		c.URL = r.URL()
	}
	if c.Ref == "" {
		c.Ref = "main"
	}
	if c.Paths == nil {
		c.Paths = []string{"specs/*.yaml"}
	}
	c.Transport = r.Transport()
	src, err := registry.NewGit(c)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// Entries are the selected files, named by their path without the
// extension; each file is a spec as a dir source's file is.
func TestGitListsTheFilesItsGlobsSelect(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Commit(map[string]*string{
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
	src := newGit(t, r, registry.GitConfig{Paths: []string{"specs/*", "services/**/spec.yaml"},
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
	r := gittest.NewRepo(t)
	r.Commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a")), "specs/b.yaml": ptr(specYAML("b"))})
	src := newGit(t, r, registry.GitConfig{})
	ctx := context.Background()
	first := fetch(t, src)
	if n := len(r.Requests()); n != 2 {
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
	reqs := r.Requests()
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
	r.Commit(map[string]*string{"specs/b.yaml": ptr(specYAML("b", "default", "large"))})
	l, err = src.Fetch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.Requests()); n != 2 || l.NotModified || l.ETag == first.ETag {
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
	r := gittest.NewRepo(t)
	r.Commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a")), "other/b.yaml": ptr(specYAML("b"))})
	first := fetch(t, newGit(t, r, registry.GitConfig{}))
	for name, c := range map[string]registry.GitConfig{
		"paths":  {Paths: []string{"specs/*.yaml", "other/*.yaml"}},
		"filter": {Filter: mustFilter(t, nil, []string{"specs/a"})},
	} {
		l, err := newGit(t, r, c).Fetch(context.Background(), registry.FetchOptions{ETag: first.ETag, PreviousDigest: first.Digest})
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
	r := gittest.NewRepo(t)
	r.Commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a")), "specs/b.yaml": ptr(specYAML("b"))})
	src := newGit(t, r, registry.GitConfig{})
	var once sync.Once
	r.SetFault(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method == http.MethodPost {
			once.Do(func() {
				// A force-push of a history without the old commit.
				r.ForcePushWithout("specs/b.yaml")
			})
		}
		return false
	})
	fetchFails(t, src, "fetching the commit", "moved")
	// The next fetch reads what the force-push left.
	r.SetFault(nil)
	if got := names(fetch(t, src)); !slices.Equal(got, []string{"specs/a"}) {
		t.Errorf("after the force-push: %v, want [specs/a]", got)
	}
}

// What fails the fetch whole, never a listing short of entries: a
// missing ref, a repository gone, credentials refused, an empty
// repository, a pack over max_bytes. No error shows the token.
func TestGitFailuresFailTheFetchWhole(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a"))})
	token := "ghp_canary" + strings.Repeat("x", 20)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.RequireBasic(registry.GitTokenUser, token)
	good := registry.GitConfig{Auth: registry.GitAuth{Type: "token", TokenFile: tokenFile}}
	fetch(t, newGit(t, r, good))

	empty := gittest.NewEmptyRepo(t)
	for _, c := range []struct {
		name string
		src  registry.Source
		want []string
	}{
		{"missing ref", newGit(t, r, registry.GitConfig{Ref: "release", Auth: good.Auth}), []string{"no ref release"}},
		{"repository gone", newGit(t, r, registry.GitConfig{URL: r.ServerURL() + "/gone.git", Auth: good.Auth}), []string{"404"}},
		{"no credentials", newGit(t, r, registry.GitConfig{}), []string{"401"}},
		{"empty repository", newGit(t, empty, registry.GitConfig{}), []string{"empty"}},
		{"pack over max_bytes", newGit(t, r, registry.GitConfig{Auth: good.Auth, MaxBytes: 64}), []string{"max_bytes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := fetchFails(t, c.src, c.want...)
			if strings.Contains(err.Error(), token) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
	// A server that echoes the credentials it refused.
	r.SetFault(func(w http.ResponseWriter, req *http.Request) bool {
		http.Error(w, "refused "+req.Header.Get("Authorization"), http.StatusForbidden)
		return true
	})
	err := fetchFails(t, newGit(t, r, good), "403", "[REDACTED]")
	if code, _ := registry.Status(err); code != http.StatusForbidden {
		t.Errorf("the redacted refusal carries status %d, want 403 (registry.Status)", code)
	}
	if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(registry.GitTokenUser+":"+token))) {
		t.Errorf("the error shows the credentials: %v", err)
	}
}

// A force-push is an ordinary change: the ref's new commit is read, and a
// file the rewrite dropped is gone. An annotated tag names the commit it
// peels to.
func TestGitReadsWhatTheRefNamesNow(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a")), "specs/b.yaml": ptr(specYAML("b"))})
	r.Git("tag", "-a", "-m", "release", "v1")
	r.Git("push", "--quiet", "origin", "v1")
	src := newGit(t, r, registry.GitConfig{})
	if got := names(fetch(t, src)); !slices.Equal(got, []string{"specs/a", "specs/b"}) {
		t.Fatalf("before: %v", got)
	}
	r.ForcePushWithout("specs/b.yaml")
	if got := names(fetch(t, src)); !slices.Equal(got, []string{"specs/a"}) {
		t.Errorf("after a force-push dropping b: %v, want [specs/a]", got)
	}
	tag := newGit(t, r, registry.GitConfig{Ref: "v1"})
	if got := names(fetch(t, tag)); !slices.Equal(got, []string{"specs/a", "specs/b"}) {
		t.Errorf("at the annotated tag v1: %v, want both files", got)
	}
}

// A targeted run reads the named entries only; a name the globs or the
// filter do not select is refused, a name with no file is gone.
func TestGitFetchEntries(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a")), "specs/b.yaml": ptr(specYAML("b"))})
	src := newGit(t, r, registry.GitConfig{Filter: mustFilter(t, nil, []string{"specs/denied"})})
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
	r.Requests()
	if l, err := src.FetchEntries(context.Background(), []string{"other/x"}, registry.FetchOptions{}); err != nil || len(l.Entries) != 0 || len(r.Requests()) != 0 {
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
		{"no selected path", registry.GitPush{Ref: "refs/heads/main", Complete: true, Paths: []string{"notes/x.yaml"}}, nil, false},
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

// A GitHub App's installation token is asked for once and kept until
// near its expiry; the git server gets it as x-access-token's password.
// A token the server refuses is dropped, and a key GitHub does not know
// fails the fetch without showing the key.
func TestGitGitHubAppToken(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Commit(map[string]*string{"specs/a.yaml": ptr(specYAML("a"))})
	app := gittest.NewApp(t, 4242, 77, func(tok string) { r.RequireBasic(registry.GitTokenUser, tok) })
	r.RequireBasic(registry.GitTokenUser, "nothing issued yet")
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, []byte(app.KeyPEM()), 0o600); err != nil {
		t.Fatal(err)
	}
	auth := registry.GitAuth{Type: "github_app", AppID: 4242, InstallationID: 77, PrivateKeyFile: keyFile, APIURL: app.URL()}
	src := newGit(t, r, registry.GitConfig{Auth: auth})
	fetch(t, src)
	fetch(t, src)
	if n := len(app.Issued()); n != 1 {
		t.Fatalf("two fetches asked for %d installation tokens, want 1 (kept until near its expiry)", n)
	}
	// The server stops taking it (revoked): the fetch fails, and the
	// next one asks for a new token.
	r.RequireBasic(registry.GitTokenUser, "revoked")
	fetchFails(t, src, "401")
	fetch(t, src)
	if n := len(app.Issued()); n != 2 {
		t.Errorf("after a refused token: %d tokens asked for, want 2", n)
	}
	// A token that expires within the margin is replaced.
	app.SetTTL(4 * time.Minute)
	short := newGit(t, r, registry.GitConfig{Auth: auth})
	fetch(t, short)
	fetch(t, short)
	if n := len(app.Issued()); n != 4 {
		t.Errorf("a token expiring in 4 minutes was reused: %d tokens, want 4", n)
	}

	other := gittest.NewApp(t, 4242, 77, func(string) {})
	if err := os.WriteFile(keyFile, []byte(other.KeyPEM()), 0o600); err != nil {
		t.Fatal(err)
	}
	err := fetchFails(t, newGit(t, r, registry.GitConfig{Auth: auth}), "installation token", "401")
	if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "eyJ") {
		t.Errorf("the error shows the key or the JWT: %v", err)
	}
}

// BenchmarkGitFetch: a repository of 200 spec files, fetched unchanged
// (the refs alone), with every file's hint (the pack, nothing parsed)
// and without (the pack, every file parsed).
func BenchmarkGitFetch(b *testing.B) {
	r := gittest.NewRepo(b)
	files := map[string]*string{}
	for i := range 200 {
		n := fmt.Sprintf("svc-%03d", i)
		files["specs/"+n+".yaml"] = ptr(specYAML(n, "small", "large"))
	}
	r.Commit(files)
	src, err := registry.NewGit(registry.GitConfig{URL: r.URL(), Ref: "main", Paths: []string{"specs/*.yaml"}, Transport: r.Transport()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	first, err := src.Fetch(ctx, registry.FetchOptions{})
	if err != nil {
		b.Fatal(err)
	}
	hints := map[string]registry.Hint{}
	for _, e := range first.Entries {
		hints[e.Name] = registry.Hint{Upstream: e.Upstream, SpecID: e.Name, SpecName: e.Spec.Name, SpecDigest: e.Name}
	}
	for _, c := range []struct {
		name string
		opts registry.FetchOptions
	}{
		{"unchanged", registry.FetchOptions{ETag: first.ETag, PreviousDigest: first.Digest}},
		{"hinted", registry.FetchOptions{Hints: func(context.Context) (map[string]registry.Hint, error) { return hints, nil }}},
		{"parsed", registry.FetchOptions{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := src.Fetch(ctx, c.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
