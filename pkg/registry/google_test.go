package registry_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/specsync/specsync/emulator/googletest"
	"github.com/specsync/specsync/pkg/registry"
)

// Auth type google takes no other field, and sends a token only to
// Google's registries (or Cloud Storage, for http) over HTTPS: anything
// else is a load error, not a surprise at fetch time.
func TestGoogleAuthIsCheckedAtLoad(t *testing.T) {
	t.Parallel()
	google := registry.Auth{Type: registry.AuthGoogle}
	for _, bad := range []struct {
		auth registry.Auth
		want string
	}{
		{registry.Auth{Type: "google", TokenEnv: "T"}, "auth type google does not use token_env"},
		{registry.Auth{Type: "google", Username: "u", PasswordFile: "/p"}, "auth type google does not use username, password_file"},
	} {
		if err := bad.auth.Validate(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want %q", bad.auth, err, bad.want)
		}
	}
	if err := google.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"gcr.io", "eu.gcr.io", "europe-docker.pkg.dev", "us-central1-docker.pkg.dev:443", "EUROPE-docker.pkg.dev"} {
		if _, err := registry.NewOCI(registry.OCIConfig{Host: host, Prefix: "p/r", Auth: google}); err != nil {
			t.Errorf("host %s: %v", host, err)
		}
	}
	for _, c := range []struct {
		cfg  registry.OCIConfig
		want string
	}{
		{registry.OCIConfig{Host: "registry.example.com"}, `oci.host "registry.example.com" is not one`},
		{registry.OCIConfig{Host: "ghcr.io"}, "is not one of Google's registries"},
		{registry.OCIConfig{Host: "pkg.dev.example.com"}, "is not one"},
		{registry.OCIConfig{Host: "gcr.io.example.com"}, "is not one"},
		{registry.OCIConfig{Host: "127.0.0.1:5000"}, "is not one"},
		{registry.OCIConfig{Host: "europe-docker.pkg.dev:5000"}, "is not one"},
		{registry.OCIConfig{Host: "europe-docker.pkg.dev", Insecure: true}, "never sends a Google access token over plain HTTP"},
	} {
		c.cfg.Auth = google
		if _, err := registry.NewOCI(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if _, err := registry.NewHTTP(registry.HTTPConfig{URL: "https://storage.googleapis.com/bucket/index.yaml", Auth: google}); err != nil {
		t.Error(err)
	}
	for _, u := range []string{"http://storage.googleapis.com/bucket/index.yaml", "https://specs.example.com/index.yaml", "https://storage.googleapis.com.example.com/i.yaml"} {
		if _, err := registry.NewHTTP(registry.HTTPConfig{URL: u, Auth: google}); err == nil || !strings.Contains(err.Error(), "http.url") {
			t.Errorf("%s: %v, want an error naming http.url", u, err)
		}
	}
}

// A binary that registered no way to find Google credentials (this test
// binary: it does not import gcpauth) fails the fetch, saying so, and
// sends nothing: the fetch is the registry's error, never a cold start's.
func TestGoogleAuthWithoutCredentialsProviderFailsTheFetch(t *testing.T) {
	t.Parallel()
	reg := googletest.NewRegistry(t, nil)
	src, err := registry.NewOCI(registry.OCIConfig{Host: "europe-docker.pkg.dev", Prefix: "p/r",
		Auth: registry.Auth{Type: registry.AuthGoogle}, Transport: googletest.Transport(reg.Server)})
	if err != nil {
		t.Fatal(err)
	}
	fetchFails(t, src, "registry europe-docker.pkg.dev/p/r: credentials", "no way to find Google credentials", "pkg/registry/gcpauth")
	if n := len(reg.Requests()); n != 0 {
		t.Fatalf("%d requests reached the registry without credentials", n)
	}
}

// arSpecs pushes spec images into an Artifact Registry stand-in: four
// under project/specs (nested down to two levels), and neighbours that are
// not under the prefix. With pages of 2, the prefix and team have three
// children each (two pages), queues one.
func arSpecs(t *testing.T, reg *googletest.Registry) {
	t.Helper()
	s := &server{host: reg.PushHost}
	for _, repo := range []string{"project/specs/postgres", "project/specs/team/redis", "project/specs/team/cache", "project/specs/team/queues/kafka",
		"project/specs-old/mysql", "project/other/mongo", "elsewhere/specs/etcd"} {
		name := repo[strings.LastIndex(repo, "/")+1:]
		s.pushSpec(t, repo, specYAML(name))
	}
	// A path that is only a directory (no image of its own) at
	// project/specs/team, and an image without a spec label.
	s.pushImage(t, "project/specs/tools", "latest", image(t, nil, nil))
}

// On Artifact Registry, a prefix is listed by walking tags/list children
// (gcrane's listing), recursively and every page of each, never by the
// catalog; entries are relative to the prefix.
func TestArtifactRegistryPrefixIsListedByItsChildren(t *testing.T) {
	registry.SetGoogleListPageSize(t, 2)
	reg := googletest.NewRegistry(t, nil)
	arSpecs(t, reg)
	src, err := registry.NewOCI(registry.OCIConfig{Host: "europe-docker.pkg.dev", Prefix: "project/specs",
		Transport: googletest.Transport(reg.Server)})
	if err != nil {
		t.Fatal(err)
	}
	l := fetch(t, registry.FastRetry(src))
	if got := strings.Join(names(l), ","); got != "postgres,team/cache,team/queues/kafka,team/redis" {
		t.Fatalf("entries %s, want postgres,team/cache,team/queues/kafka,team/redis", got)
	}
	for _, e := range l.Entries {
		if e.Err != nil || e.Spec == nil || !strings.HasPrefix(e.Ref, "europe-docker.pkg.dev/project/specs/"+e.Name+"@sha256:") {
			t.Errorf("entry %s: ref %s, err %v", e.Name, e.Ref, e.Err)
		}
	}
	paged := false
	for _, r := range reg.Requests() {
		if strings.HasPrefix(r.URI, "/v2/_catalog") {
			t.Errorf("the catalog was asked: %s", r.URI)
		}
		if strings.Contains(r.URI, "/tags/list?") && strings.Contains(r.URI, "last=") {
			paged = true
		}
		if strings.HasPrefix(r.URI, "/v2/project/other/") || strings.HasPrefix(r.URI, "/v2/elsewhere/") || strings.HasPrefix(r.URI, "/v2/project/specs-old/") {
			t.Errorf("a repository outside the prefix was read: %s", r.URI)
		}
	}
	if !paged {
		t.Error("no tags/list page after the first was asked for: pagination is not exercised")
	}

	// Without a prefix, a Google host is listed by its catalog as any
	// other host (there is no path to walk from).
	reg.Reset()
	whole, err := registry.NewOCI(registry.OCIConfig{Host: "europe-docker.pkg.dev", Transport: googletest.Transport(reg.Server)})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(fetch(t, whole).Entries); got != 7 {
		t.Fatalf("the whole host lists %d entries, want 7", got)
	}
	if !strings.Contains(reqLog(reg), "/v2/_catalog") {
		t.Error("without a prefix the catalog was not asked")
	}
}

// Any failed tags/list request fails the whole listing: a partial walk
// would read as repositories having disappeared.
func TestArtifactRegistryFailedChildrenPageFailsTheListing(t *testing.T) {
	registry.SetGoogleListPageSize(t, 2)
	reg := googletest.NewRegistry(t, nil)
	arSpecs(t, reg)
	src, err := registry.NewOCI(registry.OCIConfig{Host: "europe-docker.pkg.dev", Prefix: "project/specs",
		Transport: googletest.Transport(reg.Server)})
	if err != nil {
		t.Fatal(err)
	}
	src = registry.FastRetry(src)
	fetch(t, src)

	for _, c := range []struct {
		name  string
		fault func(w http.ResponseWriter, r *http.Request) bool
		want  []string
	}{
		{"second page of a child", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasPrefix(r.URL.Path, "/v2/project/specs/team/tags/list") && r.URL.Query().Get("last") != "" {
				http.Error(w, "backend error", http.StatusInternalServerError)
				return true
			}
			return false
		}, []string{"tags/list of project/specs/team: page 2", "500"}},
		{"a child refused", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasPrefix(r.URL.Path, "/v2/project/specs/team/queues/tags/list") {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = w.Write([]byte(`{"errors":[{"code":"DENIED","message":"Permission denied"}]}`))
				return true
			}
			return false
		}, []string{"tags/list of project/specs/team/queues: page 1", "DENIED"}},
		{"a full page without a link", func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/v2/project/specs/tags/list" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"name":"project/specs","child":["postgres","team"],"manifest":{},"tags":[]}`))
				return true
			}
			return false
		}, []string{"tags/list of project/specs: page 1", "may be cut short"}},
		{"a child that is not a path component", func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/v2/project/specs/tags/list" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"name":"project/specs","child":["../x"],"manifest":{},"tags":[]}`))
				return true
			}
			return false
		}, []string{"child \"../x\" is not one path component"}},
	} {
		reg.SetFault(c.fault)
		fetchFails(t, src, c.want...)
	}
	reg.SetFault(nil)
	if got := len(fetch(t, src).Entries); got != 4 {
		t.Fatalf("after the faults: %d entries, want 3", got)
	}
}

func reqLog(reg *googletest.Registry) string {
	var b strings.Builder
	for _, r := range reg.Requests() {
		b.WriteString(r.Method + " " + r.Host + r.URI + "\n")
	}
	return b.String()
}

// Helm's OCI form takes auth type google as the oci source does: only a
// Google registry over HTTPS, a load error naming the helm block's fields
// otherwise. A chart repository (helm.url) takes it in Cloud Storage
// only (https://storage.googleapis.com), refusing any other server at load.
func TestHelmGoogleAuthIsCheckedAtLoad(t *testing.T) {
	t.Parallel()
	google := registry.Auth{Type: registry.AuthGoogle}
	for _, host := range []string{"gcr.io", "europe-docker.pkg.dev", "us-central1-docker.pkg.dev:443"} {
		if _, err := registry.NewHelm(registry.HelmConfig{Host: host, Prefix: "p/charts", Auth: google}); err != nil {
			t.Errorf("host %s: %v", host, err)
		}
	}
	// A chart repository in a Cloud Storage bucket.
	if _, err := registry.NewHelm(registry.HelmConfig{URL: "https://storage.googleapis.com/bucket/charts", Auth: google}); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		cfg  registry.HelmConfig
		want string
	}{
		{registry.HelmConfig{Host: "registry.example.com"}, `helm.host "registry.example.com" is not one of Google's registries (gcr.io, *.gcr.io, *.pkg.dev, over HTTPS), the only ones auth type google sends Google access tokens to`},
		{registry.HelmConfig{Host: "europe-docker.pkg.dev:5000"}, `helm.host "europe-docker.pkg.dev:5000" is not one of Google's registries`},
		{registry.HelmConfig{Host: "europe-docker.pkg.dev", Insecure: true}, "helm.insecure: auth type google never sends a Google access token over plain HTTP; remove helm.insecure"},
		{registry.HelmConfig{URL: "https://charts.example.com"}, `helm.url "https://charts.example.com" is not in Cloud Storage (https://storage.googleapis.com), the only place auth type google sends Google access tokens to`},
		{registry.HelmConfig{URL: "http://storage.googleapis.com/charts"}, `helm.url "http://storage.googleapis.com/charts" is not in Cloud Storage`},
	} {
		c.cfg.Auth = google
		if _, err := registry.NewHelm(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// Helm's OCI form asks for its Google token at fetch time, as the oci
// source does: a binary that registered no way to find Google credentials
// fails the fetch saying so, and sends nothing.
func TestHelmGoogleAuthWithoutCredentialsProviderFailsTheFetch(t *testing.T) {
	t.Parallel()
	reg := googletest.NewRegistry(t, nil)
	src, err := registry.NewHelm(registry.HelmConfig{Host: "europe-docker.pkg.dev", Prefix: "p/charts",
		Auth: registry.Auth{Type: registry.AuthGoogle}, Transport: googletest.Transport(reg.Server)})
	if err != nil {
		t.Fatal(err)
	}
	fetchFails(t, src, "registry europe-docker.pkg.dev/p/charts: credentials", "no way to find Google credentials", "pkg/registry/gcpauth")
	if n := len(reg.Requests()); n != 0 {
		t.Fatalf("%d requests reached the registry without credentials", n)
	}
}
