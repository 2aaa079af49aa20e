package reconcile_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"cloud.google.com/go/firestore"
	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	"github.com/sirupsen/logrus"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// env is one isolated Firestore project with a store, a runner and the
// committer. Every test built on it ends with the invariant checker
// (end): settled, since env.run commits after every run; a test that
// ends otherwise on purpose says so through end.
type env struct {
	t         *testing.T
	client    *firestore.Client
	store     *store.Store
	runner    *reconcile.Runner
	committer *reconcile.Committer
	project   string
	end       *invariant.AtEnd
}

func newEnv(t *testing.T) *env {
	t.Helper()
	client, project := emulatortest.FirestoreProject(t)
	st := store.New(client)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &env{t: t, client: client, store: st, project: project,
		runner:    &reconcile.Runner{Store: st, Logger: quiet},
		committer: &reconcile.Committer{Store: st, Logger: quiet},
		end:       invariant.CheckAtEnd(t, client, invariant.Options{Settled: true})}
}

// run reconciles reg, then commits what it left pending (as
// `specsync-local reconcile` does after its runs), and fails the test on a store
// error.
func (e *env) run(reg reconcile.Registry) store.Run {
	e.t.Helper()
	run, err := e.runner.Reconcile(context.Background(), reg)
	if err != nil {
		e.t.Fatalf("reconcile %s: %v", reg.Name, err)
	}
	e.commit()
	return run
}

// commit runs the committer and returns what it did.
func (e *env) commit() reconcile.Commit {
	e.t.Helper()
	c, err := e.committer.Commit(context.Background())
	if err != nil {
		e.t.Fatalf("commit: %v", err)
	}
	return c
}

func (e *env) specs(registryName string) map[string]store.SpecRecord {
	e.t.Helper()
	recs, err := e.store.OwnedSpecs(context.Background(), registryName)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]store.SpecRecord{}
	for _, r := range recs {
		out[r.Name] = r
	}
	return out
}

func (e *env) status(name string) *store.RegistryStatus {
	e.t.Helper()
	st, err := e.store.RegistryStatus(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) revision() int64 {
	e.t.Helper()
	rev, err := e.store.Revision(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

// specYAML is a small valid spec named name.
func specYAML(name string, plans ...string) string {
	if len(plans) == 0 {
		plans = []string{"default"}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\ndescription: the %s service\nbindable: true\nplans:\n", name, name)
	for _, p := range plans {
		fmt.Fprintf(&b, "  - name: %s\n    description: plan %s\n    parameters:\n      - name: size\n        type: int\n        default: 1\n", p, p)
	}
	return b.String()
}

// dirRegistry is a dir registry over a map the test edits between runs.
func dirRegistry(t *testing.T, name string, fsys fstest.MapFS, policy reconcile.Policy) reconcile.Registry {
	t.Helper()
	src, err := registry.NewDir(registry.DirConfig{FS: fsys, Root: "test:" + name})
	if err != nil {
		t.Fatal(err)
	}
	return reconcile.Registry{Name: name, Source: src, Policy: policy}
}

func specFiles(names ...string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for _, n := range names {
		fsys[n+".yaml"] = &fstest.MapFile{Data: []byte(specYAML(n))}
	}
	return fsys
}

// faults wraps a registry server and breaks it on demand, the way real
// registries break: all down, one catalog page failing, one repository.
type faults struct {
	mu   sync.Mutex
	down bool
	// failLaterPages makes every catalog page but the first answer 500.
	failLaterPages bool
	failRepo       string
	requests       int
}

func (f *faults) set(fn func(f *faults)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faults) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests++
		down, failRepo := f.down, f.failRepo
		laterPage := strings.HasSuffix(r.URL.Path, "/_catalog") && r.URL.Query().Get("last") != ""
		failPage := f.failLaterPages && laterPage
		f.mu.Unlock()
		switch {
		case down:
			http.Error(w, "registry is down", http.StatusServiceUnavailable)
		case failPage:
			http.Error(w, "catalog page failed", http.StatusInternalServerError)
		case failRepo != "" && strings.HasPrefix(r.URL.Path, "/v2/"+failRepo+"/"):
			http.Error(w, "repository failed", http.StatusInternalServerError)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// ociServer is an in-process OCI registry (go-containerregistry's, or the
// reference distribution registry where catalog pagination matters)
// behind a fault injector.
type ociServer struct {
	*faults
	host string
}

func newGGCR(t *testing.T) *ociServer {
	t.Helper()
	f := &faults{}
	srv := httptest.NewServer(f.wrap(ggcr.New(ggcr.Logger(nopLogger()))))
	t.Cleanup(srv.Close)
	return &ociServer{faults: f, host: strings.TrimPrefix(srv.URL, "http://")}
}

func newDistribution(t *testing.T) *ociServer {
	t.Helper()
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	// Only a parsed configuration file gets this default; without it every
	// n= on the catalog is "more than allowed".
	cfg.Catalog.MaxEntries = 1000
	// NewApp logs every request through logrus at info; the test does not
	// want that noise (the registry's own main would apply cfg.Log).
	logrus.SetOutput(io.Discard)
	app := handlers.NewApp(context.Background(), cfg)
	f := &faults{}
	srv := httptest.NewServer(f.wrap(app))
	t.Cleanup(srv.Close)
	return &ociServer{faults: f, host: strings.TrimPrefix(srv.URL, "http://")}
}

func (o *ociServer) push(t *testing.T, repo, label string, platforms ...spec.Platform) {
	t.Helper()
	if _, err := emulator.PushSpecImage(context.Background(), o.host, repo, "latest", label, platforms); err != nil {
		t.Fatalf("push %s: %v", repo, err)
	}
}

func (o *ociServer) pushSpec(t *testing.T, repo, yamlText string) {
	t.Helper()
	o.push(t, repo, base64.StdEncoding.EncodeToString([]byte(yamlText)))
}

func (o *ociServer) registry(t *testing.T, name string, pageSize int) reconcile.Registry {
	t.Helper()
	src, err := registry.NewOCI(registry.OCIConfig{Host: o.host, Insecure: true, PageSize: pageSize})
	if err != nil {
		t.Fatal(err)
	}
	return reconcile.Registry{Name: name, Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}}
}
