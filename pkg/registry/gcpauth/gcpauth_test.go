package gcpauth_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/googletest"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/gcpauth"
	"github.com/specsync/specsync/pkg/registry/helmtest"
)

// These tests set the process's environment (where Application Default
// Credentials are found), so none of them runs in parallel.

const arHost = "europe-docker.pkg.dev"

// world is an Artifact Registry stand-in holding two specs under
// project/specs, behind a token server whose service account key file
// GOOGLE_APPLICATION_CREDENTIALS names.
type world struct {
	tokens *googletest.TokenServer
	reg    *googletest.Registry
	src    *registry.OCI
}

func newWorld(t *testing.T, lifetime time.Duration) *world {
	t.Helper()
	w := &world{tokens: googletest.NewTokenServer(t, "canary-gcpauth")}
	w.tokens.SetLifetime(lifetime)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", w.tokens.KeyFile(t))
	w.reg = googletest.NewRegistry(t, w.tokens)
	for _, repo := range []string{"postgres", "team/redis"} {
		n := filepath.Base(repo)
		label := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("name: %s\ndescription: the %s\nplans:\n  - name: p\n    description: p\n", n, n)))
		if _, err := emulator.PushSpecImage(context.Background(), w.reg.PushHost, "project/specs/"+repo, "latest", label, nil); err != nil {
			t.Fatal(err)
		}
	}
	w.src = w.oci(t)
	return w
}

// oci is a source for the stand-in, by its Artifact Registry name.
func (w *world) oci(t *testing.T) *registry.OCI {
	t.Helper()
	src, err := registry.NewOCI(registry.OCIConfig{Host: arHost, Prefix: "project/specs",
		Auth: registry.Auth{Type: registry.AuthGoogle}, Transport: googletest.Transport(w.reg.Server)})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// fetch fetches and checks that both specs came, through the realm with
// the server's current token.
func (w *world) fetch(t *testing.T) {
	t.Helper()
	w.reg.Reset()
	l, err := w.src.Fetch(context.Background(), registry.FetchOptions{})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(l.Entries) != 2 || l.Entries[0].Spec == nil || l.Entries[1].Spec == nil {
		t.Fatalf("fetch: %+v, want postgres and team/redis", l.Entries)
	}
	cur, _ := w.tokens.Current()
	presented := 0
	for _, r := range w.reg.Requests() {
		if r.AccessToken != "" {
			presented++
			if r.AccessToken != cur.Value {
				t.Errorf("the realm was shown a token that is not the current one")
			}
		}
	}
	if presented == 0 {
		t.Fatal("no access token reached the realm: the Docker token exchange did not happen")
	}
	if refused := w.tokens.Refused(); len(refused) > 0 {
		t.Fatalf("the token server refused assertions: %v", refused)
	}
}

// fails fetches, expects an error that mentions want and no token, and
// returns it.
func (w *world) fails(t *testing.T, want ...string) error {
	t.Helper()
	l, err := w.src.Fetch(context.Background(), registry.FetchOptions{})
	if err == nil {
		t.Fatalf("fetch succeeded with %d entries, want an error", len(l.Entries))
	}
	t.Logf("fetch error: %v", err)
	for _, s := range want {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	for _, tok := range w.tokens.Issued() {
		if strings.Contains(err.Error(), tok.Value) {
			t.Fatalf("an access token is in the error: %q", err)
		}
	}
	return err
}

func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// The acceptance test of auth type google: a service account key file
// whose token_uri is a token server issuing tokens that live 4 seconds, an
// Artifact Registry that takes only the current token. The token is
// obtained once and reused while it is valid; a fetch after it expired
// gets a new one, and succeeds.
func TestTokenReusedWhileValidAndRefreshedAfterExpiry(t *testing.T) {
	gcpauth.SetEarlyRefresh(t, time.Second)
	w := newWorld(t, 4*time.Second)

	w.fetch(t)
	if n := w.tokens.Requests(); n != 1 {
		t.Fatalf("%d token requests for the first fetch, want 1", n)
	}
	w.fetch(t)
	if n := w.tokens.Requests(); n != 1 {
		t.Fatalf("%d token requests after a second fetch within the token's life, want 1 (reused)", n)
	}

	first := w.tokens.Issued()[0]
	sleepUntil(first.Expiry.Add(100 * time.Millisecond))
	if _, valid := w.tokens.Current(); valid {
		t.Fatal("the first token has not expired")
	}
	w.fetch(t)
	if n := w.tokens.Requests(); n != 2 {
		t.Fatalf("%d token requests after the token expired, want 2 (refreshed)", n)
	}
}

// The token is replaced before it expires, once it is within the early
// refresh window, so that no fetch starts with a token that could expire
// before it ends.
func TestTokenRefreshedBeforeItExpires(t *testing.T) {
	gcpauth.SetEarlyRefresh(t, 3*time.Second)
	w := newWorld(t, 5*time.Second)
	w.fetch(t)
	first := w.tokens.Issued()[0]
	// Two seconds and a bit into its five: within the last three.
	sleepUntil(first.Expiry.Add(-3*time.Second + 300*time.Millisecond))
	w.fetch(t)
	issued := w.tokens.Issued()
	if len(issued) != 2 {
		t.Fatalf("%d tokens issued, want 2: the token was not refreshed within its early-refresh window", len(issued))
	}
	if refreshedAt := issued[1].Expiry.Add(-5 * time.Second); !refreshedAt.Before(first.Expiry) {
		t.Fatalf("the new token was asked for %s after the first expired, not before", refreshedAt.Sub(first.Expiry))
	}
}

// A token server that is down fails the fetch (nothing is listed, so
// nothing can be marked) with an error naming the cause and no secret;
// the next fetch after it is back succeeds.
func TestTokenServerDownFailsTheFetch(t *testing.T) {
	// Tokens that live less than the default window are asked for anew
	// at every fetch.
	w := newWorld(t, time.Minute)
	w.fetch(t)
	w.tokens.SetDown(true)
	w.fails(t, "registry europe-docker.pkg.dev/project/specs: credentials", "auth type google: access token", "cannot fetch token", w.tokens.URL)
	w.tokens.SetDown(false)
	w.fetch(t)
}

// A registry that refuses the token the source holds (another holder of
// the credentials refreshed, and the stand-in takes only the newest) fails
// the fetch the same way: its 401, no secret.
func TestRegistryRefusingAStaleTokenFailsTheFetch(t *testing.T) {
	w := newWorld(t, time.Hour)
	w.fetch(t)
	w.tokens.Rotate()
	w.fails(t, "registry europe-docker.pkg.dev/project/specs", "/v2/token", "UNAUTHORIZED")
}

// Missing credentials are that fetch's error, saying how to provide them;
// once provided, the next fetch finds them (the failure is not kept).
func TestMissingCredentialsSayHowToProvideThem(t *testing.T) {
	w := newWorld(t, time.Hour)
	key, err := os.ReadFile(os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"))
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "key.json")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", missing)
	w.src = w.oci(t)
	w.fails(t, "credentials", "no Application Default Credentials", "GOOGLE_APPLICATION_CREDENTIALS", "gcloud auth application-default login", missing)
	if n := len(w.reg.Requests()); n != 0 {
		t.Fatalf("%d requests reached the registry without credentials", n)
	}
	if err := os.WriteFile(missing, key, 0o600); err != nil {
		t.Fatal(err)
	}
	w.fetch(t)
}

// Deployed, the credentials are the function's service account, whose
// tokens come from the metadata server.
func TestMetadataServerCredentials(t *testing.T) {
	w := newWorld(t, time.Hour)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("HOME", t.TempDir()) // no gcloud credentials either
	t.Setenv("GCE_METADATA_HOST", w.tokens.MetadataHost)
	w.src = w.oci(t)
	w.fetch(t)
	w.fetch(t)
	if n := w.tokens.Requests(); n != 1 {
		t.Fatalf("%d token requests to the metadata server, want 1", n)
	}
}

// A registry that names a token realm on another host gets no Google
// token: the source refuses to send it, whatever go-containerregistry
// would do with a realm.
func TestTokenGoesToNoOtherHost(t *testing.T) {
	w := newWorld(t, time.Hour)
	w.reg.SetFault(func(rw http.ResponseWriter, r *http.Request) bool {
		if r.Host == arHost && r.Header.Get("Authorization") == "" {
			rw.Header().Set("WWW-Authenticate", `Bearer realm="https://token.example.com/v2/token",service="`+arHost+`"`)
			rw.WriteHeader(http.StatusUnauthorized)
			return true
		}
		return false
	})
	w.fails(t, "refusing to send Google credentials to https://token.example.com")
	for _, r := range w.reg.Requests() {
		if r.Host != arHost && r.Credentials {
			t.Fatalf("credentials went to %s%s", r.Host, r.URI)
		}
	}
}

// An http source may read an index document from Cloud Storage with the
// token, as a bearer token; a redirect to plain HTTP does not carry it.
func TestCloudStorageIndex(t *testing.T) {
	tokens := googletest.NewTokenServer(t, "canary-gcs")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", tokens.KeyFile(t))
	var seen []string
	gcs := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		cur, valid := tokens.Current()
		if !valid || r.Header.Get("Authorization") != "Bearer "+cur.Value {
			http.Error(rw, `{"error":{"code":401,"message":"Invalid Credentials"}}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("redirect") != "" {
			http.Redirect(rw, r, "http://storage.googleapis.com/specs/index.yaml", http.StatusFound)
			return
		}
		fmt.Fprint(rw, "- name: db\n  description: a db\n  plans:\n    - name: p\n      description: p\n")
	}))
	t.Cleanup(gcs.Close)
	src := func(u string) *registry.HTTP {
		s, err := registry.NewHTTP(registry.HTTPConfig{URL: u, Auth: registry.Auth{Type: registry.AuthGoogle},
			Client: &http.Client{Transport: googletest.Transport(gcs)}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	l, err := src("https://storage.googleapis.com/specs/index.yaml").Fetch(context.Background(), registry.FetchOptions{})
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Spec == nil {
		t.Fatalf("fetch: %v %+v", err, l)
	}
	_, err = src("https://storage.googleapis.com/specs/index.yaml?redirect=1").Fetch(context.Background(), registry.FetchOptions{})
	if err == nil || !strings.Contains(err.Error(), "refusing to send Google credentials to http://storage.googleapis.com") {
		t.Fatalf("a redirect to plain HTTP: %v", err)
	}
	if len(seen) != 2 {
		t.Fatalf("the server saw %d requests, want 2 (the redirect's target never reached)", len(seen))
	}
}

// Helm charts in Artifact Registry (`helm push CHART
// oci://europe-docker.pkg.dev/PROJECT/REPOSITORY`) are read with the
// process's Google identity as the oci source reads images: the current
// access token at the realm, reused while it is valid, and a realm that
// the registry names elsewhere gets no token.
func TestHelmChartsInArtifactRegistry(t *testing.T) {
	tokens := googletest.NewTokenServer(t, "canary-gcpauth-helm")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", tokens.KeyFile(t))
	reg := googletest.NewRegistry(t, tokens)
	for _, name := range []string{"postgresql", "redis"} {
		helmtest.PushChart(t, reg.PushHost, "project/charts/"+name, helmtest.Chart{Name: name, Version: "1.2.3", Description: "the " + name + " chart"})
	}
	helmtest.PushChart(t, reg.PushHost, "elsewhere/charts/mysql", helmtest.Chart{Name: "mysql", Version: "8.0.0", Description: "the mysql chart"})
	src, err := registry.NewHelm(registry.HelmConfig{Host: arHost, Prefix: "project/charts",
		Auth: registry.Auth{Type: registry.AuthGoogle}, Transport: googletest.Transport(reg.Server)})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		reg.Reset()
		l, err := src.Fetch(context.Background(), registry.FetchOptions{})
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if len(l.Entries) != 2 || l.Entries[0].Name != "postgresql" || l.Entries[1].Name != "redis" ||
			l.Entries[0].Spec == nil || l.Entries[1].Spec == nil {
			t.Fatalf("entries %+v, want the specs of postgresql and redis", l.Entries)
		}
		cur, _ := tokens.Current()
		presented := 0
		for _, r := range reg.Requests() {
			if r.AccessToken != "" {
				presented++
				if r.AccessToken != cur.Value {
					t.Error("the realm was shown a token that is not the current one")
				}
			}
		}
		if presented == 0 {
			t.Fatal("no access token reached the realm: the Docker token exchange did not happen")
		}
	}
	if n := tokens.Requests(); n != 1 {
		t.Fatalf("%d token requests for two fetches within the token's life, want 1 (reused)", n)
	}

	reg.SetFault(func(rw http.ResponseWriter, r *http.Request) bool {
		if r.Host == arHost && r.Header.Get("Authorization") == "" {
			rw.Header().Set("WWW-Authenticate", `Bearer realm="https://token.example.com/v2/token",service="`+arHost+`"`)
			rw.WriteHeader(http.StatusUnauthorized)
			return true
		}
		return false
	})
	reg.Reset()
	_, err = src.Fetch(context.Background(), registry.FetchOptions{})
	if err == nil || !strings.Contains(err.Error(), "refusing to send Google credentials to https://token.example.com") {
		t.Fatalf("a realm on another host: %v", err)
	}
	for _, tok := range tokens.Issued() {
		if strings.Contains(err.Error(), tok.Value) {
			t.Fatalf("an access token is in the error: %q", err)
		}
	}
	for _, r := range reg.Requests() {
		if r.Host != arHost && r.Credentials {
			t.Fatalf("credentials went to %s%s", r.Host, r.URI)
		}
	}
}

// A Helm chart repository in a Cloud Storage bucket is read with the
// process's Google identity, as an http index is: the index and the
// archives beside it carry the current access token as a bearer token;
// an archive the index names on another host is asked for without it (as
// helm sends no credentials to another host), and that chart alone fails.
func TestHelmChartRepositoryInCloudStorage(t *testing.T) {
	tokens := googletest.NewTokenServer(t, "canary-gcs-helm")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", tokens.KeyFile(t))
	redis := helmtest.Chart{Name: "redis", Version: "7.2.0", Description: "the redis chart"}
	pg := helmtest.Chart{Name: "postgresql", Version: "16.1.0", Description: "the postgresql chart"}
	archives := map[string][]byte{"/bucket/charts/redis-7.2.0.tgz": redis.Archive(t), "/bucket/charts/postgresql-16.1.0.tgz": pg.Archive(t)}
	index := fmt.Sprintf(`apiVersion: v1
entries:
  redis:
    - {name: redis, version: 7.2.0, description: the redis chart, urls: [redis-7.2.0.tgz], digest: %s}
  postgresql:
    - {name: postgresql, version: 16.1.0, description: the postgresql chart, urls: [postgresql-16.1.0.tgz], digest: %s}
  elsewhere:
    - {name: elsewhere, version: 1.0.0, description: a chart on another host, urls: ["https://charts.example.com/elsewhere-1.0.0.tgz"]}
`, helmtest.Digest(archives["/bucket/charts/redis-7.2.0.tgz"]), helmtest.Digest(archives["/bucket/charts/postgresql-16.1.0.tgz"]))
	var seen []string
	gcs := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Host+r.URL.Path)
		if r.Host != "storage.googleapis.com" && r.Header.Get("Authorization") != "" {
			t.Errorf("%s%s got credentials", r.Host, r.URL.Path)
		}
		cur, valid := tokens.Current()
		if r.Host != "storage.googleapis.com" || !valid || r.Header.Get("Authorization") != "Bearer "+cur.Value {
			http.Error(rw, `{"error":{"code":401,"message":"Invalid Credentials"}}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/bucket/charts/index.yaml" {
			fmt.Fprint(rw, index)
			return
		}
		if a, ok := archives[r.URL.Path]; ok {
			rw.Write(a)
			return
		}
		http.NotFound(rw, r)
	}))
	t.Cleanup(gcs.Close)
	src, err := registry.NewHelm(registry.HelmConfig{URL: "https://storage.googleapis.com/bucket/charts",
		Auth: registry.Auth{Type: registry.AuthGoogle}, Client: &http.Client{Transport: googletest.Transport(gcs)}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := src.Fetch(context.Background(), registry.FetchOptions{})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	got := map[string]registry.Entry{}
	for _, e := range l.Entries {
		got[e.Name] = e
	}
	if got["redis"].Spec == nil || got["postgresql"].Spec == nil {
		t.Fatalf("entries %+v, want the specs of redis and postgresql", l.Entries)
	}
	if e := got["elsewhere"]; e.Err == nil || e.Spec != nil {
		t.Errorf("the chart on another host: %+v, want that chart's error", e)
	}
	if len(seen) != 4 {
		t.Errorf("requests %v, want the index, two archives and the one elsewhere", seen)
	}
}
