package reconcile_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
	"github.com/specsync/specsync/pkg/store"
)

func helmChart(name, version string, plans ...string) helmtest.Chart {
	c := helmtest.Chart{Name: name, Version: version, Description: "the " + name + " chart"}
	if len(plans) > 0 {
		var b strings.Builder
		for _, p := range plans {
			b.WriteString("- {name: " + p + ", description: plan " + p + "}\n")
		}
		c.Annotations = map[string]string{registry.PlansAnnotation: b.String()}
	}
	return c
}

func helmRegistry(t *testing.T, name string, repo *helmtest.Repo) reconcile.Registry {
	return reconcile.Registry{Name: name, Source: repo.Source(t, registry.HelmConfig{}), Policy: defaultPolicy}
}

func storedVersion(t *testing.T, rec store.SpecRecord) string {
	t.Helper()
	s, err := rec.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return s.MaintenanceVersion
}

// A chart whose new version's archive is broken keeps its last good
// version, active, with the error recorded; the other charts are
// reconciled; the fixed archive is adopted with the same id. A chart gone
// from the index is marked, and unmarked when it comes back.
func TestScenarioBrokenChartKeepsLastGoodVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	repo := helmtest.NewRepo(t)
	repo.Add(t, helmChart("alpha", "1.0.0"))
	repo.Add(t, helmChart("beta", "1.0.0"))
	repo.Add(t, helmChart("gamma", "1.0.0"))
	reg := helmRegistry(t, "charts", repo)
	if run := e.run(reg); run.Counts.Created != 3 {
		t.Fatalf("first run: %+v", run.Counts)
	}
	good := e.specs("charts")["beta"]

	repo.AddVersion(t, helmtest.Version{Chart: helmChart("beta", "1.1.0"), Archive: []byte("\x1f\x8b not really gzip")})
	repo.Add(t, helmChart("alpha", "1.1.0"))
	run := e.run(reg)
	if run.Counts.Updated != 1 || run.Counts.EntryErrors != 1 || run.Counts.Marked != 0 {
		t.Fatalf("broken beta 1.1.0: %+v", run.Counts)
	}
	if len(run.Errors) != 1 || run.Errors[0].Entry != "beta" || !strings.Contains(run.Errors[0].Message, "chart beta version 1.1.0: archive") {
		t.Fatalf("entry errors %+v", run.Errors)
	}
	beta := e.specs("charts")["beta"]
	if beta.State != api.SpecActive || beta.Digest != good.Digest || beta.EntryError == "" || storedVersion(t, beta) != "1.0.0" {
		t.Fatalf("beta %+v: want 1.0.0 kept, active, with the error", beta)
	}
	if v := storedVersion(t, e.specs("charts")["alpha"]); v != "1.1.0" {
		t.Fatalf("alpha is at %s", v)
	}
	// The next run reads the index again (a listing with an entry error
	// gives no ETag), finds the same listing (the broken archive is
	// cached by its digest: not downloaded again) and writes nothing.
	repo.Reset()
	wantResult(t, e.run(reg), api.ResultUnchanged)
	if got := repo.Requests(); len(got) != 1 || got[0] != "GET /charts/index.yaml" {
		t.Fatalf("repeat run's requests: %v", got)
	}

	repo.Add(t, helmChart("beta", "1.1.0"))
	if run := e.run(reg); run.Counts.Updated != 1 || run.Counts.EntryErrors != 0 {
		t.Fatalf("fixed beta: %+v", run.Counts)
	}
	beta = e.specs("charts")["beta"]
	if beta.ID != good.ID || beta.EntryError != "" || storedVersion(t, beta) != "1.1.0" || beta.Generation != 2 {
		t.Fatalf("fixed beta %+v", beta)
	}

	repo.Remove("gamma")
	if run := e.run(reg); run.Counts.Marked != 1 || e.specs("charts")["gamma"].State != api.SpecMarked {
		t.Fatalf("gamma gone: %+v", run.Counts)
	}
	repo.Add(t, helmChart("gamma", "1.0.0"))
	if run := e.run(reg); run.Counts.Unmarked != 1 || e.specs("charts")["gamma"].State != api.SpecActive {
		t.Fatalf("gamma back: %+v", run.Counts)
	}
}

// A 304 is taken as an unchanged listing only when the last run's listing
// is a baseline: after a run that held a version back (or failed), the run
// fetches without validators, so a held-back chart version is adopted as
// soon as the instance that blocked it is gone, though the index did not
// change, and an unchanged index after an outage is not an empty listing.
func TestScenarioHeldBackChartAdoptedBehindAnETag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	repo := helmtest.NewRepo(t)
	repo.Add(t, helmChart("db", "1.0.0", "small", "large"))
	reg := helmRegistry(t, "charts", repo)
	e.run(reg)
	rec := e.specs("charts")["db"]
	sp, _ := rec.Spec()
	large, _ := sp.PlanByName("large")
	if _, err := e.store.CreateInstance(ctx, store.Instance{ID: "i1", SpecID: rec.ID, PlanID: large.ID, MaintenanceVersion: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateInstance(ctx, store.Instance{ID: "i2", SpecID: rec.ID, PlanID: large.ID, MaintenanceVersion: "0.9.0"}); err == nil {
		t.Fatal("a provision naming another chart version was accepted")
	}
	repo.Add(t, helmChart("db", "2.0.0", "small"))
	if run := e.run(reg); run.Counts.HeldBack != 1 {
		t.Fatalf("2.0.0: %+v", run.Counts)
	}
	if v := storedVersion(t, e.specs("charts")["db"]); v != "1.0.0" {
		t.Fatalf("stored %s while 2.0.0 is held back", v)
	}
	if _, err := e.store.DeleteInstance(ctx, "i1"); err != nil {
		t.Fatal(err)
	}
	repo.Reset()
	if run := e.run(reg); run.Counts.Updated != 1 || run.Result != api.ResultSucceeded {
		t.Fatalf("after the instance went: %s %+v %s", run.Result, run.Counts, run.Guard)
	}
	if v := storedVersion(t, e.specs("charts")["db"]); v != "2.0.0" {
		t.Fatalf("stored %s after the release", v)
	}

	// An outage, then the same index: the run after the failed one reads
	// it whole, and a later one is skipped by its 304.
	repo.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	wantResult(t, e.run(reg), api.ResultFetchFailed)
	repo.SetFault(nil)
	wantResult(t, e.run(reg), api.ResultSucceeded)
	wantResult(t, e.run(reg), api.ResultUnchanged)
	if s := e.specs("charts")["db"]; s.State != api.SpecActive || storedVersion(t, s) != "2.0.0" {
		t.Fatalf("db after the outage: %+v", s)
	}
}

// Secrets never travel on the helm path: a chart repository behind basic
// auth with a canary password that echoes the Authorization header it
// refuses, for the index and for one archive. The canary (and its base64
// form) is in no Firestore document, status, entry error or log line.
func TestScenarioHelmSecretCanary(t *testing.T) {
	t.Parallel()
	canary := "canary-helm-" + strings.Repeat("7f", 8)
	basic := base64.StdEncoding.EncodeToString([]byte("robot:" + canary))
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(canary+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	invariant.CheckAtEnd(t, e.client, invariant.Options{Settled: true, Canaries: []string{canary, basic}})
	var logs strings.Builder
	var mu sync.Mutex
	e.runner.Logger = slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))

	repo := helmtest.NewRepo(t)
	repo.Add(t, helmChart("alpha", "1.0.0"))
	repo.Add(t, helmChart("beta", "1.0.0"))
	var refuseArchive, refuseAll atomic.Bool
	repo.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		got := r.Header.Get("Authorization")
		if got != "Basic "+basic || refuseAll.Load() || (refuseArchive.Load() && strings.HasSuffix(r.URL.Path, "beta-1.1.0.tgz")) {
			http.Error(w, "refused "+got, http.StatusUnauthorized)
			return true
		}
		return false
	})
	src := repo.Source(t, registry.HelmConfig{Auth: registry.Auth{Type: "basic", Username: "robot", PasswordFile: pwFile}})
	reg := reconcile.Registry{Name: "private", Source: src, Policy: defaultPolicy}
	if run := e.run(reg); run.Counts.Created != 2 {
		t.Fatalf("first run: %+v", run.Counts)
	}
	refuseArchive.Store(true)
	repo.Add(t, helmChart("beta", "1.1.0"))
	if run := e.run(reg); run.Counts.EntryErrors != 1 || !strings.Contains(run.Errors[0].Message, "[REDACTED]") {
		t.Fatalf("refused archive: %+v %+v", run.Counts, run.Errors)
	}
	refuseAll.Store(true)
	run := e.run(reg)
	wantResult(t, run, api.ResultFetchFailed)
	if !strings.Contains(e.status("private").LastRun.Error, "401") {
		t.Fatalf("status error %q", e.status("private").LastRun.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), canary) || strings.Contains(logs.String(), basic) {
		t.Fatalf("a log line holds the canary:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
