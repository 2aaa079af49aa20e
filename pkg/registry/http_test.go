package registry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/registry"
)

// indexServer serves one index document with an ETag and records what
// clients sent.
type indexServer struct {
	mu          sync.Mutex
	body        string
	etag        string
	status      int
	requests    int
	ifNoneMatch []string
	authz       []string
	srv         *httptest.Server
}

func newIndexServer(t *testing.T, body string) *indexServer {
	t.Helper()
	s := &indexServer{body: body, etag: `"v1"`}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		s.ifNoneMatch = append(s.ifNoneMatch, r.Header.Get("If-None-Match"))
		s.authz = append(s.authz, r.Header.Get("Authorization"))
		body, etag, status := s.body, s.etag, s.status
		s.mu.Unlock()
		if status != 0 {
			http.Error(w, "injected", status)
			return
		}
		if etag != "" && r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Type", "application/yaml")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *indexServer) set(fn func(s *indexServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
}

func newHTTP(t *testing.T, cfg registry.HTTPConfig) *registry.HTTP {
	t.Helper()
	src, err := registry.NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func indent(text string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(text, "\n"), "\n", "\n    ") + "\n"
}

// listDoc is a YAML list of the given specs.
func listDoc(specs ...string) string {
	var b strings.Builder
	for _, s := range specs {
		for i, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
			if i == 0 {
				b.WriteString("- " + line + "\n")
			} else {
				b.WriteString("  " + line + "\n")
			}
		}
	}
	return b.String()
}

func TestHTTPETagAndNotModified(t *testing.T) {
	t.Parallel()
	s := newIndexServer(t, listDoc(specYAML("alpha"), specYAML("beta")))
	src := newHTTP(t, registry.HTTPConfig{URL: s.srv.URL + "/index.yaml"})

	first := fetch(t, src)
	if got := names(first); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Fatalf("entries %v", got)
	}
	if first.ETag != `"v1"` || first.NotModified {
		t.Fatalf("first fetch: etag %q not-modified %v", first.ETag, first.NotModified)
	}
	if first.Entries[0].Ref != s.srv.URL+"/index.yaml#0" {
		t.Errorf("ref %s", first.Entries[0].Ref)
	}

	second, err := src.Fetch(context.Background(), registry.FetchOptions{ETag: first.ETag, PreviousDigest: first.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if !second.NotModified || second.Digest != first.Digest || second.ETag != first.ETag || len(second.Entries) != 0 {
		t.Errorf("second fetch: %+v", second)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.requests != 2 || s.ifNoneMatch[0] != "" || s.ifNoneMatch[1] != `"v1"` {
		t.Errorf("%d requests, If-None-Match %q", s.requests, s.ifNoneMatch)
	}
}

func TestHTTPChangedDocument(t *testing.T) {
	t.Parallel()
	s := newIndexServer(t, listDoc(specYAML("alpha")))
	src := newHTTP(t, registry.HTTPConfig{URL: s.srv.URL})
	first := fetch(t, src)
	s.set(func(s *indexServer) { s.body, s.etag = listDoc(specYAML("alpha", "default", "big")), `"v2"` })
	second, err := src.Fetch(context.Background(), registry.FetchOptions{ETag: first.ETag, PreviousDigest: first.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if second.NotModified || second.ETag != `"v2"` || second.Digest == first.Digest {
		t.Errorf("changed document: not-modified %v etag %s, digest changed %v", second.NotModified, second.ETag, second.Digest != first.Digest)
	}
}

func TestHTTPDocumentForms(t *testing.T) {
	t.Parallel()
	for what, doc := range map[string]string{
		"yaml list":    listDoc(specYAML("alpha"), specYAML("beta")),
		"specs object": "specs:\n" + indent(listDoc(specYAML("alpha"), specYAML("beta"))),
		"json list": `[{"name":"beta","description":"b","plans":[{"name":"p","description":"p"}]},
		               {"name":"alpha","description":"a","plans":[{"name":"p","description":"p"}]}]`,
		"json specs": `{"specs":[{"name":"alpha","description":"a","plans":[{"name":"p","description":"p"}]},
		                         {"name":"beta","description":"b","plans":[{"name":"p","description":"p"}]}]}`,
	} {
		t.Run(what, func(t *testing.T) {
			s := newIndexServer(t, doc)
			l := fetch(t, newHTTP(t, registry.HTTPConfig{URL: s.srv.URL}))
			if got := names(l); !slices.Equal(got, []string{"alpha", "beta"}) {
				t.Fatalf("entries %v from\n%s", got, doc)
			}
			for _, e := range l.Entries {
				if e.Err != nil || e.Spec == nil || e.Spec.ID != "" {
					t.Errorf("%s: spec %+v err %v", e.Name, e.Spec, e.Err)
				}
			}
		})
	}
}

func TestHTTPBadEntriesAmongGood(t *testing.T) {
	t.Parallel()
	doc := listDoc(
		specYAML("good"),
		"name: broken\ndescription: no plans\nplans: []\n",
		"description: nameless\nplans:\n  - name: p\n    description: p\n",
		specYAML("good", "other"),
		specYAML("also-good"),
	)
	s := newIndexServer(t, doc)
	l := fetch(t, newHTTP(t, registry.HTTPConfig{URL: s.srv.URL + "/i"}))
	if got, want := names(l), []string{"also-good", "broken", "entry-2", "good", "good"}; !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	e := l.Entries
	if e[0].Err != nil || e[0].Spec == nil {
		t.Errorf("also-good: %v", e[0].Err)
	}
	if e[1].Err == nil || !strings.Contains(e[1].Err.Error(), "plans") || e[1].Ref != s.srv.URL+"/i#1" {
		t.Errorf("broken: ref %s err %v", e[1].Ref, e[1].Err)
	}
	if e[2].Err == nil || !strings.Contains(e[2].Err.Error(), "name") {
		t.Errorf("nameless: %v", e[2].Err)
	}
	if e[3].Err != nil || e[3].Ref != s.srv.URL+"/i#0" {
		t.Errorf("first good: ref %s err %v", e[3].Ref, e[3].Err)
	}
	if e[4].Err == nil || e[4].Spec != nil || !strings.Contains(e[4].Err.Error(), "already used by entry 0") {
		t.Errorf("second good: spec %v err %v", e[4].Spec, e[4].Err)
	}
}

func TestHTTPFailures(t *testing.T) {
	t.Parallel()
	good := listDoc(specYAML("alpha"), specYAML("beta"))
	handler := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	for _, tc := range []struct {
		what string
		url  string
		cfg  registry.HTTPConfig
		want string
	}{
		{what: "500", want: "500", url: handler(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		})},
		{what: "429", want: "429", url: handler(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "slow down", http.StatusTooManyRequests)
		})},
		{what: "404", want: "404", url: handler(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })},
		{what: "304 without a validator", want: "304", url: handler(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotModified)
		})},
		{what: "not a spec list", want: "list of specs", url: handler(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "just: a mapping\n")
		})},
		{what: "not YAML", want: "neither YAML nor JSON", url: handler(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "- [unclosed\n- {")
		})},
		{what: "empty", want: "empty", url: handler(func(w http.ResponseWriter, r *http.Request) {})},
		{what: "too big", want: "more than", cfg: registry.HTTPConfig{MaxBytes: 64}, url: handler(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, good)
		})},
		{what: "too big, chunked", want: "more than", cfg: registry.HTTPConfig{MaxBytes: 64}, url: handler(func(w http.ResponseWriter, r *http.Request) {
			for _, line := range strings.SplitAfter(good, "\n") {
				fmt.Fprint(w, line)
				w.(http.Flusher).Flush()
			}
		})},
		{what: "truncated", want: "unexpected EOF", url: handler(func(w http.ResponseWriter, r *http.Request) {
			// Promise the whole document, send half of it, hang up.
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/yaml\r\nContent-Length: %d\r\n\r\n%s", len(good), good[:len(good)/2])
			buf.Flush()
		})},
		{what: "truncated chunked", want: "unexpected EOF", url: handler(func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			half := good[:len(good)/2]
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(half), half)
			buf.Flush()
		})},
		{what: "slow", want: "within 200ms", cfg: registry.HTTPConfig{Timeout: 200 * time.Millisecond}, url: handler(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, good[:10])
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		})},
	} {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			cfg.URL = tc.url + "/index.yaml"
			fetchFails(t, newHTTP(t, cfg), tc.want, cfg.URL)
		})
	}
}

func TestHTTPAuthHeader(t *testing.T) {
	const token, password = "tok-123456", "pw-abcdef"
	s := newIndexServer(t, listDoc(specYAML("alpha")))
	t.Setenv("SPECSYNC_HTTP_TOKEN", token)
	t.Setenv("SPECSYNC_HTTP_PW", password)
	fetch(t, newHTTP(t, registry.HTTPConfig{URL: s.srv.URL, Auth: registry.Auth{Type: "token", TokenEnv: "SPECSYNC_HTTP_TOKEN"}}))
	fetch(t, newHTTP(t, registry.HTTPConfig{URL: s.srv.URL, Auth: registry.Auth{Type: "basic", Username: "bob", PasswordEnv: "SPECSYNC_HTTP_PW"}}))
	fetch(t, newHTTP(t, registry.HTTPConfig{URL: s.srv.URL}))
	s.mu.Lock()
	got := slices.Clone(s.authz)
	s.mu.Unlock()
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth("bob", password)
	if want := []string{"Bearer " + token, req.Header.Get("Authorization"), ""}; !slices.Equal(got, want) {
		t.Errorf("Authorization headers %q, want %q", got, want)
	}

	// A server that refuses and echoes the header back must not get the
	// secret into the error.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "refused "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	t.Cleanup(echo.Close)
	for _, auth := range []registry.Auth{
		{Type: "token", TokenEnv: "SPECSYNC_HTTP_TOKEN"},
		{Type: "basic", Username: "bob", PasswordEnv: "SPECSYNC_HTTP_PW"},
	} {
		err := fetchFails(t, newHTTP(t, registry.HTTPConfig{URL: echo.URL, Auth: auth}), "401")
		if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), password) || strings.Contains(err.Error(), req.Header.Get("Authorization")[6:]) {
			t.Errorf("error shows a secret: %v", err)
		}
	}
	fetchFails(t, newHTTP(t, registry.HTTPConfig{URL: s.srv.URL, Auth: registry.Auth{Type: "token", TokenEnv: "SPECSYNC_HTTP_NOPE"}}), "SPECSYNC_HTTP_NOPE")
}

func TestHTTPFilter(t *testing.T) {
	t.Parallel()
	s := newIndexServer(t, listDoc(specYAML("alpha"), specYAML("beta"), specYAML("internal-x"), "name: internal-broken\n"))
	l := fetch(t, newHTTP(t, registry.HTTPConfig{URL: s.srv.URL, Filter: mustFilter(t, nil, []string{"internal-.*"})}))
	if got := names(l); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("entries %v", got)
	}
	l = fetch(t, newHTTP(t, registry.HTTPConfig{URL: s.srv.URL, Filter: mustFilter(t, []string{"beta|internal-.*"}, []string{"internal-broken"})}))
	if got := names(l); !slices.Equal(got, []string{"beta", "internal-x"}) {
		t.Errorf("entries %v", got)
	}
}

func TestNewHTTPValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []registry.HTTPConfig{
		{},
		{URL: "ftp://example.com/x"},
		{URL: "/relative"},
		{URL: "https://user:pw@example.com/index.yaml"},
		{URL: "https://example.com", Timeout: -1},
		{URL: "https://example.com", MaxBytes: -1},
		{URL: "https://example.com", Auth: registry.Auth{Type: "token"}},
	} {
		if _, err := registry.NewHTTP(cfg); err == nil {
			t.Errorf("NewHTTP(%+v) succeeded", cfg)
		}
	}
}
