package registry_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/bcrypt"

	// The reference registry registers its auth and storage backends
	// from init functions, as its main package would.
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

// specYAML is a small valid spec.
func specYAML(name string, plans ...string) string {
	if len(plans) == 0 {
		plans = []string{"default"}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\ndescription: the %s service\nbindable: true\nplans:\n", name, name)
	for _, p := range plans {
		fmt.Fprintf(&b, "  - name: %s\n    description: plan %s\n", p, p)
	}
	return b.String()
}

// label is a spec in the APB label form (base64 YAML).
func label(yamlText string) string { return base64.StdEncoding.EncodeToString([]byte(yamlText)) }

// server is an in-process registry behind a recorder and a fault hook,
// the way real registries fail: one page, one repository, everything.
type server struct {
	t    *testing.T
	host string
	url  string

	mu       sync.Mutex
	requests []string // "METHOD /path?query"
	fault    func(w http.ResponseWriter, r *http.Request) bool
	push     []remote.Option
	handler  http.Handler // the registry behind the fault hook
}

func serve(t *testing.T, h http.Handler) *server {
	t.Helper()
	s := &server{t: t, handler: h}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
		fault := s.fault
		s.mu.Unlock()
		if fault != nil && fault(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	s.host = strings.TrimPrefix(srv.URL, "http://")
	return s
}

// newGGCR is go-containerregistry's registry: fast, no pagination, no auth.
func newGGCR(t *testing.T) *server {
	return serve(t, ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))))
}

// newDistribution is the reference registry with in-memory storage; with
// users (name → password) it demands htpasswd basic auth.
func newDistribution(t *testing.T, users map[string]string) *server {
	t.Helper()
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	// Only a parsed configuration file gets this default; without it every
	// n= on the catalog is "more than allowed".
	cfg.Catalog.MaxEntries = 1000
	var push []remote.Option
	if len(users) > 0 {
		var lines []string
		for u, p := range users {
			hash, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, u+":"+string(hash))
			push = []remote.Option{remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: u, Password: p}))}
		}
		file := filepath.Join(t.TempDir(), "htpasswd")
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "specsync-test", "path": file}}
	}
	s := serve(t, handlers.NewApp(context.Background(), cfg))
	s.push = push
	return s
}

func (s *server) setFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

func (s *server) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// count returns how many requests since the last reset match.
func (s *server) count(match func(method, uri string) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		method, uri, _ := strings.Cut(r, " ")
		if match(method, uri) {
			n++
		}
	}
	return n
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.requests, "\n")
}

func isManifest(_, uri string) bool { return strings.Contains(uri, "/manifests/") }
func isBlob(_, uri string) bool     { return strings.Contains(uri, "/blobs/") }
func isCatalog(_, uri string) bool  { return strings.HasPrefix(uri, "/v2/_catalog") }

// image is an empty image with labels and a platform in its config.
func image(t *testing.T, labels map[string]string, p *v1.Platform) v1.Image {
	t.Helper()
	cf, err := empty.Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Labels = labels
	if p != nil {
		cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	}
	img, err := mutate.ConfigFile(empty.Image, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func specImage(t *testing.T, yamlText string, p *v1.Platform) v1.Image {
	return image(t, map[string]string{spec.LabelKey: label(yamlText)}, p)
}

func (s *server) ref(t *testing.T, repo, tag string) name.Tag {
	t.Helper()
	ref, err := name.NewTag(s.host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// pushImage pushes img as repo:tag and returns its digest.
func (s *server) pushImage(t *testing.T, repo, tag string, img v1.Image) string {
	t.Helper()
	if err := remote.Write(s.ref(t, repo, tag), img, s.push...); err != nil {
		t.Fatalf("push %s:%s: %v", repo, tag, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// pushSpec pushes a single-platform (linux/amd64) spec image as repo:latest.
func (s *server) pushSpec(t *testing.T, repo, yamlText string) string {
	t.Helper()
	return s.pushImage(t, repo, "latest", specImage(t, yamlText, &v1.Platform{OS: "linux", Architecture: "amd64"}))
}

type child struct {
	img      v1.Image
	platform *v1.Platform
}

// pushIndex pushes a multi-platform index as repo:tag and returns its digest.
func (s *server) pushIndex(t *testing.T, repo, tag string, children ...child) string {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, c := range children {
		adds = append(adds, mutate.IndexAddendum{Add: c.img, Descriptor: v1.Descriptor{Platform: c.platform}})
	}
	idx := mutate.AppendManifests(empty.Index, adds...)
	if err := remote.WriteIndex(s.ref(t, repo, tag), idx, s.push...); err != nil {
		t.Fatalf("push index %s:%s: %v", repo, tag, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// oci builds a source for s with fast retries.
func (s *server) oci(t *testing.T, cfg registry.OCIConfig) *registry.OCI {
	t.Helper()
	cfg.Host = s.host
	cfg.Insecure = true
	src, err := registry.NewOCI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return registry.FastRetry(src)
}

func fetch(t *testing.T, src registry.Source) *registry.Listing {
	t.Helper()
	l, err := src.Fetch(context.Background(), registry.FetchOptions{})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return l
}

func fetchFails(t *testing.T, src registry.Source, want ...string) error {
	t.Helper()
	l, err := src.Fetch(context.Background(), registry.FetchOptions{})
	if err == nil {
		t.Fatalf("fetch succeeded with %d entries, want an error", len(l.Entries))
	}
	t.Logf("fetch error: %v", err)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	return err
}

func byName(l *registry.Listing) map[string]registry.Entry {
	out := map[string]registry.Entry{}
	for _, e := range l.Entries {
		out[e.Name] = e
	}
	return out
}

func names(l *registry.Listing) []string {
	var out []string
	for _, e := range l.Entries {
		out = append(out, e.Name)
	}
	return out
}

func mustFilter(t *testing.T, allow, deny []string) *registry.Filter {
	t.Helper()
	f, err := registry.NewFilter(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
