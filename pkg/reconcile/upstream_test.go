package reconcile_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/sirupsen/logrus"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
)

// Kinds of upstream request, as counted (what a registry bills, Docker
// Hub's pull limit counting manifest GETs and not HEADs).
const (
	reqCatalog     = "catalog page"
	reqHead        = "HEAD manifest"
	reqGetManifest = "GET manifest"
	reqGetBlob     = "GET blob"
	reqPing        = "GET /v2/"
	// reqSignature is a signature lookup (verify): the referrers API,
	// the referrers tag schema (sha256-<hex>) or cosign's .sig tag.
	reqSignature = "signature lookup"
)

// upstream is the reference distribution registry in process (it
// paginates its catalog with Link headers, as real ones do), counting the
// requests it serves by kind, and failing the requests fail matches.
type upstream struct {
	host string
	mu   sync.Mutex
	n    map[string]int
	fail func(r *http.Request) bool
}

func newUpstream(tb testing.TB) *upstream {
	tb.Helper()
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	cfg.Catalog.MaxEntries = 1000
	logrus.SetOutput(io.Discard)
	app := handlers.NewApp(context.Background(), cfg)
	u := &upstream{n: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.n[requestKind(r)]++
		fail := u.fail != nil && u.fail(r)
		u.mu.Unlock()
		if fail {
			http.Error(w, "injected failure", http.StatusInternalServerError)
			return
		}
		app.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	u.host = strings.TrimPrefix(srv.URL, "http://")
	return u
}

func requestKind(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.HasSuffix(p, "/_catalog"):
		return reqCatalog
	case strings.Contains(p, "/referrers/") || strings.Contains(p, "/manifests/sha256-"):
		return reqSignature
	case strings.Contains(p, "/manifests/") && r.Method == http.MethodHead:
		return reqHead
	case strings.Contains(p, "/manifests/") && r.Method == http.MethodGet:
		return reqGetManifest
	case strings.Contains(p, "/blobs/") && r.Method == http.MethodGet:
		return reqGetBlob
	}
	return r.Method + " " + p
}

// counts returns the requests served since the last call, by kind.
func (u *upstream) counts() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.n
	u.n = map[string]int{}
	return out
}

func (u *upstream) setFail(f func(r *http.Request) bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.fail = f
}

// push pushes a spec image of yamlText as repo:latest. The push's own
// requests are not counted.
func (u *upstream) push(tb testing.TB, repo, yamlText string) {
	tb.Helper()
	if _, err := emulator.PushSpecImage(context.Background(), u.host, repo, "latest", base64.StdEncoding.EncodeToString([]byte(yamlText)), nil); err != nil {
		tb.Fatalf("push %s: %v", repo, err)
	}
	u.counts()
}

// pushLabels pushes an image of repo:latest with exactly these labels.
func (u *upstream) pushLabels(tb testing.TB, repo string, labels map[string]string) {
	tb.Helper()
	if _, err := emulator.PushImageWithLabels(context.Background(), u.host, repo, "latest", labels); err != nil {
		tb.Fatalf("push %s: %v", repo, err)
	}
	u.counts()
}

// pushAll pushes a spec image for each repository, sixteen at a time.
func (u *upstream) pushAll(tb testing.TB, repos []string) {
	tb.Helper()
	var wg sync.WaitGroup
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for r := range work {
				u.push(tb, r, specYAML(strings.ReplaceAll(r, "/", "-")))
			}
		})
	}
	for _, r := range repos {
		work <- r
	}
	close(work)
	wg.Wait()
}

// source is a new OCI source of the registry: a new instance, whose
// manifest cache is empty (cold).
func (u *upstream) source(tb testing.TB, name string) reconcile.Registry {
	tb.Helper()
	src, err := registry.NewOCI(registry.OCIConfig{Host: u.host, Insecure: true, PageSize: 100})
	if err != nil {
		tb.Fatal(err)
	}
	return reconcile.Registry{Name: name, Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}}
}

// formatCounts shows counts in a fixed order.
func formatCounts(c map[string]int) string {
	var b strings.Builder
	for _, k := range []string{reqCatalog, reqHead, reqGetManifest, reqGetBlob, reqPing} {
		fmt.Fprintf(&b, "%s %d, ", k, c[k])
	}
	for k, v := range c {
		switch k {
		case reqCatalog, reqHead, reqGetManifest, reqGetBlob, reqPing:
		default:
			fmt.Fprintf(&b, "%s %d, ", k, v)
		}
	}
	return strings.TrimSuffix(b.String(), ", ")
}
