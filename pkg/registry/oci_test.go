package registry_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

func TestOCISingleAndMultiPlatform(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	single := s.pushImage(t, "svc/single", "latest", specImage(t, specYAML("single"), &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}))
	multi := s.pushIndex(t, "svc/multi", "latest",
		// An attestation first, with a label that would fail: it must be
		// skipped, not read.
		child{image(t, map[string]string{spec.LabelKey: "not: [a spec"}, nil), &v1.Platform{OS: "unknown", Architecture: "unknown"}},
		// An image without the label: the next one's counts.
		child{image(t, nil, nil), &v1.Platform{OS: "linux", Architecture: "s390x"}},
		child{specImage(t, specYAML("multi", "small", "large"), nil), &v1.Platform{OS: "linux", Architecture: "amd64"}},
		child{specImage(t, specYAML("multi-arm-label-ignored"), nil), &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}},
	)

	l := fetch(t, s.oci(t, registry.OCIConfig{}))
	if got, want := names(l), []string{"svc/multi", "svc/single"}; !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	e := byName(l)
	for repo, digest := range map[string]string{"svc/single": single, "svc/multi": multi} {
		if e[repo].Err != nil {
			t.Fatalf("%s: %v", repo, e[repo].Err)
		}
		if want := s.host + "/" + repo + "@" + digest; e[repo].Ref != want {
			t.Errorf("%s: ref %s, want %s", repo, e[repo].Ref, want)
		}
		if e[repo].Spec.ID != "" {
			t.Errorf("%s: adapter assigned id %q", repo, e[repo].Spec.ID)
		}
	}
	if got := e["svc/single"].Spec; got.Name != "single" || !reflect.DeepEqual(got.Platforms, []spec.Platform{{OS: "linux", Architecture: "arm64", Variant: "v8"}}) {
		t.Errorf("single: name %s platforms %v", got.Name, got.Platforms)
	}
	got := e["svc/multi"].Spec
	if got.Name != "multi" || len(got.Plans) != 2 {
		t.Errorf("multi: spec %s with %d plans, want the amd64 image's label", got.Name, len(got.Plans))
	}
	wantPlatforms := []spec.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}, {OS: "linux", Architecture: "s390x"}}
	if !reflect.DeepEqual(got.Platforms, wantPlatforms) {
		t.Errorf("multi: platforms %v, want %v", got.Platforms, wantPlatforms)
	}
	if l.Digest != registry.ListingDigest(l.Entries) {
		t.Errorf("listing digest %s is not ListingDigest(entries)", l.Digest)
	}
}

func TestOCIEntriesWithoutSpecAndBadLabel(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	for _, n := range []string{"a", "b", "d"} {
		s.pushSpec(t, "good/"+n, specYAML("good-"+n))
	}
	// Invalid spec: plans[0] has no description.
	s.pushSpec(t, "bad/label", "name: bad\ndescription: a bad one\nplans:\n  - name: p\n")
	s.pushImage(t, "plain/image", "latest", image(t, map[string]string{"maintainer": "someone"}, nil))
	s.pushImage(t, "other/tag-only", "v1", specImage(t, specYAML("tag-only"), nil))
	// An artifact whose config is not an image config (a Helm chart, say).
	artifact := mutate.MediaType(mutate.ConfigMediaType(empty.Image, "application/vnd.cncf.helm.config.v1+json"), types.OCIManifestSchema1)
	s.pushImage(t, "charts/thing", "latest", artifact)

	l := fetch(t, s.oci(t, registry.OCIConfig{Repositories: []string{"good/a", "good/b", "good/d", "bad/label", "plain/image", "other/tag-only", "charts/thing", "never/pushed"}}))
	if got, want := names(l), []string{"bad/label", "good/a", "good/b", "good/d"}; !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	e := byName(l)
	for _, n := range []string{"good/a", "good/b", "good/d"} {
		if e[n].Err != nil || e[n].Spec == nil {
			t.Errorf("%s: %v", n, e[n].Err)
		}
	}
	bad := e["bad/label"]
	if bad.Err == nil || bad.Spec != nil {
		t.Fatalf("bad/label: spec %v, err %v", bad.Spec, bad.Err)
	}
	for _, want := range []string{"bad/label", "plans[0].description", spec.LabelKey} {
		if !strings.Contains(bad.Err.Error(), want) {
			t.Errorf("bad/label error %q does not name %q", bad.Err, want)
		}
	}
	if !strings.Contains(bad.Ref, "@sha256:") {
		t.Errorf("bad/label ref %q has no digest", bad.Ref)
	}

	// A different tag: only the repository that has it offers something.
	l = fetch(t, s.oci(t, registry.OCIConfig{Tag: "v1"}))
	if got, want := names(l), []string{"other/tag-only"}; !slices.Equal(got, want) {
		t.Fatalf("tag v1: entries %v, want %v", got, want)
	}
}

func TestOCICatalogPagination(t *testing.T) {
	t.Parallel()
	s := newDistribution(t, nil)
	var want []string
	for i := range 7 {
		repo := fmt.Sprintf("team/svc-%d", i)
		s.pushSpec(t, repo, specYAML(fmt.Sprintf("svc-%d", i)))
		want = append(want, repo)
	}
	s.reset()
	l := fetch(t, s.oci(t, registry.OCIConfig{PageSize: 2}))
	if got := names(l); !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v\nrequests:\n%s", got, want, s.log())
	}
	if n := s.count(isCatalog); n < 4 {
		t.Errorf("%d catalog requests for 7 repositories at 2 a page, want at least 4", n)
	}
	if n := s.count(func(_, uri string) bool { return isCatalog("", uri) && !strings.Contains(uri, "n=2") }); n != 0 {
		t.Errorf("%d catalog requests without n=2:\n%s", n, s.log())
	}
}

// A full last page without a Link header is either the end of the catalog
// or a registry that cut the list at n. The page after it, asked for by
// "last", tells them apart; a registry that ignores "last" fails the fetch
// rather than have the repositories past the cut marked.
func TestOCICatalogFullPageWithoutLink(t *testing.T) {
	t.Parallel()
	push := func(s *server, n int) []string {
		var repos []string
		for i := range n {
			repo := fmt.Sprintf("r%d", i)
			s.pushSpec(t, repo, specYAML(fmt.Sprintf("s%d", i)))
			repos = append(repos, repo)
		}
		s.reset()
		return repos
	}
	probes := func(s *server) int {
		return s.count(func(_, uri string) bool { return isCatalog("", uri) && strings.Contains(uri, "last=") })
	}

	t.Run("cut at n, last ignored", func(t *testing.T) {
		// go-containerregistry's registry returns n repositories in map
		// order and no Link header.
		s := newGGCR(t)
		push(s, 5)
		err := fetchFails(t, s.oci(t, registry.OCIConfig{PageSize: 2}),
			"ignores catalog pagination", "oci.page_size", "oci.repositories")
		// Map order decides which probe gives it away: the first one, or,
		// when its answer happens to lie past "last", the next (5
		// repositories at 2 a page leave no third new page).
		if !regexp.MustCompile(`catalog page [23]:`).MatchString(err.Error()) {
			t.Errorf("error %q does not name catalog page 2 or 3 (the probes)", err)
		}
		// Larger pages see it all in one request, with no probe.
		s.reset()
		if got := len(fetch(t, s.oci(t, registry.OCIConfig{PageSize: 10})).Entries); got != 5 {
			t.Errorf("page size 10: %d entries, want 5", got)
		}
		if n, p := s.count(isCatalog), probes(s); n != 1 || p != 0 {
			t.Errorf("page size 10: %d catalog requests, %d probes; want 1 and 0:\n%s", n, p, s.log())
		}
	})

	t.Run("last honoured, no Link", func(t *testing.T) {
		s := newDistribution(t, nil)
		want := push(s, 7)
		s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
			if isCatalog("", r.URL.RequestURI()) {
				w = noLink{w}
				s.handler.ServeHTTP(w, r)
				return true
			}
			return false
		})
		if got := names(fetch(t, s.oci(t, registry.OCIConfig{PageSize: 2}))); !slices.Equal(got, want) {
			t.Fatalf("entries %v, want %v\n%s", got, want, s.log())
		}
		// 2+2+2+1: the first page, then three pages by "last".
		if n, p := s.count(isCatalog), probes(s); n != 4 || p != 3 {
			t.Errorf("%d catalog requests, %d by last; want 4 and 3:\n%s", n, p, s.log())
		}
	})

	t.Run("exact multiple of the page size", func(t *testing.T) {
		s := newDistribution(t, nil)
		want := push(s, 4)
		if got := names(fetch(t, s.oci(t, registry.OCIConfig{PageSize: 2}))); !slices.Equal(got, want) {
			t.Fatalf("entries %v, want %v\n%s", got, want, s.log())
		}
		if n := s.count(isCatalog); n > 3 {
			t.Errorf("%d catalog requests for 4 repositories at 2 a page, want at most 3:\n%s", n, s.log())
		}
	})

	t.Run("n and last ignored, whole list every time", func(t *testing.T) {
		s := newDistribution(t, nil)
		want := push(s, 5)
		s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
			if !isCatalog("", r.URL.RequestURI()) {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"repositories":["r4","r3","r2","r1","r0"]}`)
			return true
		})
		if got := names(fetch(t, s.oci(t, registry.OCIConfig{PageSize: 2}))); !slices.Equal(got, want) {
			t.Fatalf("entries %v, want %v\n%s", got, want, s.log())
		}
		if p := probes(s); p != 1 {
			t.Errorf("%d probes, want 1:\n%s", p, s.log())
		}
	})

	t.Run("the probe fails", func(t *testing.T) {
		s := newGGCR(t)
		push(s, 2)
		s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
			if isCatalog("", r.URL.RequestURI()) && r.URL.Query().Has("last") {
				http.Error(w, "injected", http.StatusServiceUnavailable)
				return true
			}
			return false
		})
		fetchFails(t, s.oci(t, registry.OCIConfig{PageSize: 2}), "catalog page 2", "without a Link header", "503")
	})
}

// noLink drops the Link header of a catalog page.
type noLink struct{ http.ResponseWriter }

func (w noLink) WriteHeader(code int) {
	w.Header().Del("Link")
	w.ResponseWriter.WriteHeader(code)
}

func (w noLink) Write(b []byte) (int, error) {
	w.Header().Del("Link")
	return w.ResponseWriter.Write(b)
}

func TestOCICatalogFaultsFailTheFetch(t *testing.T) {
	t.Parallel()
	s := newDistribution(t, nil)
	for i := range 5 {
		s.pushSpec(t, fmt.Sprintf("r%d", i), specYAML(fmt.Sprintf("s%d", i)))
	}
	src := s.oci(t, registry.OCIConfig{PageSize: 2})
	laterPage := func(r *http.Request) bool {
		return r.URL.Path == "/v2/_catalog" && r.URL.Query().Get("last") != ""
	}
	for _, tc := range []struct {
		status int
		want   []string
	}{
		{http.StatusInternalServerError, []string{"catalog page 2", s.host}},
		{http.StatusTooManyRequests, []string{"catalog page 2", "429"}},
		{http.StatusBadGateway, []string{"catalog page 2"}},
	} {
		s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
			if laterPage(r) {
				http.Error(w, "injected", tc.status)
				return true
			}
			return false
		})
		fetchFails(t, src, tc.want...)
	}

	// A page whose body is cut short.
	s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
		if laterPage(r) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"repositories":["r2",`)
			return true
		}
		return false
	})
	fetchFails(t, src, "catalog page 2")

	s.setFault(nil)
	if got := len(fetch(t, src).Entries); got != 5 {
		t.Errorf("after the faults: %d entries, want 5", got)
	}
}

func TestOCITimeoutFailsTheFetch(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	for _, r := range []string{"a", "b", "slow"} {
		s.pushSpec(t, r, specYAML(r))
	}
	stall := func(match func(r *http.Request) bool) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if !match(r) {
				return false
			}
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return true
		}
	}

	s.setFault(stall(func(r *http.Request) bool { return r.URL.Path == "/v2/_catalog" }))
	start := time.Now()
	fetchFails(t, s.oci(t, registry.OCIConfig{Timeout: 300 * time.Millisecond}), "catalog page 1", "within 300ms")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("fetch took %s with a 300ms timeout", d)
	}

	// One slow repository is not that entry's error: the listing is
	// incomplete.
	s.setFault(stall(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/v2/slow/") }))
	fetchFails(t, s.oci(t, registry.OCIConfig{Timeout: 300 * time.Millisecond}), "within 300ms")
}

func TestOCIOneRepositoryFailing(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	for _, r := range []string{"a", "b", "c"} {
		s.pushSpec(t, r, specYAML(r))
	}
	for _, tc := range []struct {
		what  string
		fault func(w http.ResponseWriter, r *http.Request) bool
	}{
		{"manifest 500", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasPrefix(r.URL.Path, "/v2/b/manifests/") {
				http.Error(w, "injected", http.StatusInternalServerError)
				return true
			}
			return false
		}},
		{"config blob 500", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasPrefix(r.URL.Path, "/v2/b/blobs/") {
				http.Error(w, "injected", http.StatusInternalServerError)
				return true
			}
			return false
		}},
		{"manifest 401", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasPrefix(r.URL.Path, "/v2/b/manifests/") {
				w.WriteHeader(http.StatusUnauthorized)
				return true
			}
			return false
		}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			s.setFault(tc.fault)
			// A new source each time: a warm one would not ask again.
			l := fetch(t, s.oci(t, registry.OCIConfig{}))
			e := byName(l)
			if len(l.Entries) != 3 {
				t.Fatalf("entries %v, want a, b, c", names(l))
			}
			if e["a"].Err != nil || e["c"].Err != nil || e["a"].Spec == nil || e["c"].Spec == nil {
				t.Errorf("good entries: a %v, c %v", e["a"].Err, e["c"].Err)
			}
			if e["b"].Err == nil || !strings.Contains(e["b"].Err.Error(), "repository b") {
				t.Errorf("b: error %v, want one naming the repository", e["b"].Err)
			}
		})
	}
}

func TestOCIRegistryDownWithExplicitRepositories(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	s.pushSpec(t, "a", specYAML("a"))
	s.pushSpec(t, "b", specYAML("b"))
	s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	fetchFails(t, s.oci(t, registry.OCIConfig{Repositories: []string{"a", "b"}}), "all 2 repositories failed")
	fetchFails(t, s.oci(t, registry.OCIConfig{}), "catalog page 1")

	// Nobody listening at all.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := ln.Addr().String()
	ln.Close()
	for _, repos := range [][]string{nil, {"a"}} {
		src, err := registry.NewOCI(registry.OCIConfig{Host: host, Insecure: true, Repositories: repos, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		fetchFails(t, registry.FastRetry(src), host)
	}
}

func TestOCIBasicAuth(t *testing.T) {
	const password = "s3cret-pa55word"
	s := newDistribution(t, map[string]string{"alice": password})
	for _, r := range []string{"x/one", "x/two", "x/three"} {
		s.pushSpec(t, r, specYAML(strings.TrimPrefix(r, "x/")))
	}
	pwFile := t.TempDir() + "/password"
	if err := writeFile(pwFile, password+"\n"); err != nil {
		t.Fatal(err)
	}
	good := registry.Auth{Type: "basic", Username: "alice", PasswordFile: pwFile}
	l := fetch(t, s.oci(t, registry.OCIConfig{Auth: good, PageSize: 2}))
	if got := names(l); !slices.Equal(got, []string{"x/one", "x/three", "x/two"}) {
		t.Fatalf("entries %v", got)
	}
	for _, e := range l.Entries {
		if e.Err != nil || strings.Contains(e.Ref, password) {
			t.Errorf("%s: ref %s err %v", e.Name, e.Ref, e.Err)
		}
	}

	t.Setenv("SPECSYNC_TEST_USER", "alice")
	t.Setenv("SPECSYNC_TEST_WRONG", "not-"+password)
	wrong := registry.Auth{Type: "basic", UsernameEnv: "SPECSYNC_TEST_USER", PasswordEnv: "SPECSYNC_TEST_WRONG"}
	for _, tc := range []struct {
		what string
		cfg  registry.OCIConfig
		want []string
	}{
		{"wrong password, catalog", registry.OCIConfig{Auth: wrong}, []string{"catalog page 1"}},
		{"wrong password, explicit repositories", registry.OCIConfig{Auth: wrong, Repositories: []string{"x/one", "x/two"}}, []string{"all 2 repositories failed"}},
		{"no credentials", registry.OCIConfig{}, []string{"catalog page 1"}},
		{"password variable unset", registry.OCIConfig{Auth: registry.Auth{Type: "basic", Username: "alice", PasswordEnv: "SPECSYNC_TEST_UNSET"}}, []string{"SPECSYNC_TEST_UNSET", "not set"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			err := fetchFails(t, s.oci(t, tc.cfg), tc.want...)
			for _, secret := range []string{password, "not-" + password} {
				if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), secret) {
					t.Errorf("error shows the password: %v", err)
				}
			}
		})
	}
}

func TestOCITokenAuth(t *testing.T) {
	t.Parallel()
	const token = "ya29.test-access-token"
	s := newGGCR(t)
	s.pushSpec(t, "tok/a", specYAML("a"))
	s.pushSpec(t, "tok/b", specYAML("b"))
	// A registry that takes bearer tokens only, like Artifact Registry
	// with a Google access token: it challenges with a realm, and a client
	// that already holds a token must use it rather than go there.
	s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/token" {
			http.Error(w, "the token endpoint must not be used", http.StatusForbidden)
			return true
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="test"`, s.url))
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return true
		}
		return false
	})
	tokenFile := t.TempDir() + "/token"
	if err := writeFile(tokenFile, token); err != nil {
		t.Fatal(err)
	}
	s.reset()
	l := fetch(t, s.oci(t, registry.OCIConfig{Auth: registry.Auth{Type: "token", TokenFile: tokenFile}}))
	if got := names(l); !slices.Equal(got, []string{"tok/a", "tok/b"}) {
		t.Fatalf("entries %v\n%s", got, s.log())
	}
	for _, e := range l.Entries {
		if e.Err != nil {
			t.Errorf("%s: %v", e.Name, e.Err)
		}
	}
	if n := s.count(func(_, uri string) bool { return strings.HasPrefix(uri, "/token") }); n != 0 {
		t.Errorf("%d requests to the token endpoint", n)
	}

	wrongFile := t.TempDir() + "/wrong"
	if err := writeFile(wrongFile, "wrong-"+token); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []registry.OCIConfig{
		{Auth: registry.Auth{Type: "token", TokenFile: wrongFile}},
		{Auth: registry.Auth{Type: "token", TokenFile: wrongFile}, Repositories: []string{"tok/a"}},
		{},
	} {
		err := fetchFails(t, s.oci(t, cfg))
		if strings.Contains(err.Error(), token) {
			t.Errorf("error shows the token: %v", err)
		}
	}
}

func TestOCIFilterSkipsDeniedRepositories(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	for _, r := range []string{"svc/a", "svc/b", "private/x", "other/y"} {
		s.pushSpec(t, r, specYAML(strings.ReplaceAll(r, "/", "-")))
	}
	s.reset()
	f := mustFilter(t, []string{"svc/.*", "private/.*"}, []string{"private/.*"})
	l := fetch(t, s.oci(t, registry.OCIConfig{Filter: f}))
	if got := names(l); !slices.Equal(got, []string{"svc/a", "svc/b"}) {
		t.Fatalf("entries %v", got)
	}
	if n := s.count(func(_, uri string) bool {
		return strings.HasPrefix(uri, "/v2/private/") || strings.HasPrefix(uri, "/v2/other/")
	}); n != 0 {
		t.Errorf("%d requests for filtered repositories:\n%s", n, s.log())
	}
}

func TestOCIWarmCache(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	s.pushSpec(t, "one", specYAML("one"))
	s.pushIndex(t, "two", "latest",
		child{specImage(t, specYAML("two"), nil), &v1.Platform{OS: "linux", Architecture: "amd64"}},
		child{specImage(t, specYAML("two"), nil), &v1.Platform{OS: "linux", Architecture: "arm64"}})
	s.pushImage(t, "three", "latest", image(t, nil, nil)) // offers nothing, cached as such
	src := s.oci(t, registry.OCIConfig{})

	first := fetch(t, src)
	first.Entries[0].Spec.Name = "mutated by a caller"
	first.Entries[1].Spec.Platforms[0].OS = "plan9"

	s.reset()
	second := fetch(t, src)
	// The image without a spec label is no entry, but its part is in
	// the digest (what the tag lookups alone can tell).
	if second.Digest != registry.ListingDigest(slices.Concat(second.Entries, second.Quiet)) || len(second.Entries) != 2 ||
		len(second.Quiet) != 1 || second.Quiet[0].Name != "three" {
		t.Fatalf("second fetch: %v, quiet %v", names(second), second.Quiet)
	}
	if n := s.count(isManifest); n != 3 {
		t.Errorf("warm fetch made %d manifest requests for 3 repositories, want 3:\n%s", n, s.log())
	}
	if n := s.count(func(method, uri string) bool { return isManifest(method, uri) && method != http.MethodHead }); n != 0 {
		t.Errorf("warm fetch made %d manifest GETs, want HEAD only", n)
	}
	if n := s.count(isBlob); n != 0 {
		t.Errorf("warm fetch made %d blob requests, want 0", n)
	}
	if e := byName(second); e["one"].Spec.Name != "one" || e["two"].Spec.Platforms[0].OS != "linux" {
		t.Errorf("cached specs were shared with an earlier caller: %+v %+v", e["one"].Spec, e["two"].Spec.Platforms)
	}
	third := fetch(t, src)
	if third.Digest != second.Digest {
		t.Errorf("unchanged registry: digest %s then %s", second.Digest, third.Digest)
	}

	// A new image under the tag is a new digest: read, and the old one
	// forgotten.
	s.pushSpec(t, "one", specYAML("one", "default", "extra"))
	fourth := fetch(t, src)
	if fourth.Digest == third.Digest {
		t.Error("a changed spec left the listing digest unchanged")
	}
	if got := len(byName(fourth)["one"].Spec.Plans); got != 2 {
		t.Errorf("after the push: %d plans, want 2", got)
	}
	if n := registry.CacheSize(src); n != 3 {
		t.Errorf("cache holds %d manifests, want the 3 current ones", n)
	}
}

func TestOCIListingDigest(t *testing.T) {
	t.Parallel()
	a, b := newGGCR(t), newGGCR(t)
	for _, s := range []*server{a, b} {
		s.pushSpec(t, "x", specYAML("x"))
		s.pushSpec(t, "y", specYAML("y"))
	}
	la := fetch(t, a.oci(t, registry.OCIConfig{}))
	lb := fetch(t, b.oci(t, registry.OCIConfig{}))
	// Refs name the host, so two registries never share a digest; the
	// same registry fetched by two instances does.
	if la.Digest == lb.Digest {
		t.Error("listings of two hosts have one digest")
	}
	if again := fetch(t, a.oci(t, registry.OCIConfig{})); again.Digest != la.Digest {
		t.Errorf("a cold and a warm instance disagree: %s %s", la.Digest, again.Digest)
	}
}

func TestNewOCIValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []registry.OCIConfig{
		{},
		{Host: "https://registry.example.com"},
		{Host: "registry.example.com/project"},
		{Host: "registry.example.com", Tag: "not a tag"},
		{Host: "registry.example.com", Repositories: []string{"UPPER"}},
		{Host: "registry.example.com", Repositories: []string{""}},
		{Host: "registry.example.com", Repositories: []string{"a", "a"}},
		{Host: "registry.example.com", PageSize: -1},
		{Host: "registry.example.com", Concurrency: -1},
		{Host: "registry.example.com", Timeout: -time.Second},
		{Host: "registry.example.com", Auth: registry.Auth{Type: "basic", Username: "u"}},
	} {
		if _, err := registry.NewOCI(cfg); err == nil {
			t.Errorf("NewOCI(%+v) succeeded", cfg)
		}
	}
	if _, err := registry.NewOCI(registry.OCIConfig{Host: "us-docker.pkg.dev", Repositories: []string{"project/repo/image"}}); err != nil {
		t.Error(err)
	}
}

func TestOCIContextCancelled(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	s.pushSpec(t, "a", specYAML("a"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.oci(t, registry.OCIConfig{}).Fetch(ctx, registry.FetchOptions{}); err == nil {
		t.Error("fetch with a cancelled context succeeded")
	}
}
