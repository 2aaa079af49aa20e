package reconcile_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/gittest"
	"github.com/specsync/specsync/pkg/store"
)

// gitRegistry is a git source of repo's specs/*.yaml at main, built anew
// (as a new instance builds it: nothing in memory from an earlier run).
func gitRegistry(t *testing.T, repo *gittest.Repo) reconcile.Registry {
	t.Helper()
	src, err := registry.NewGit(registry.GitConfig{URL: repo.URL(), Ref: "main", Paths: []string{"specs/*.yaml"}, Transport: repo.Transport()})
	if err != nil {
		t.Fatal(err)
	}
	return reconcile.Registry{Name: "git", Source: src, Policy: defaultPolicy}
}

// A git registry through the reconcile: an unchanged repository costs one
// upstream request (the refs) and one Firestore read (the status); a
// changed file is updated and the others cost nothing upstream; a ref
// that moves between the refs and the pack (a force-push) fails the run,
// which marks nothing; the force-push itself is read, and the file it
// dropped is marked; a targeted run of a removed file marks it alone.
func TestScenarioGitRepository(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	repo := gittest.NewRepo(t)
	repo.Commit(map[string]*string{
		"specs/a.yaml": gittest.Ptr(specYAML("a")),
		"specs/b.yaml": gittest.Ptr(specYAML("b")),
		"specs/c.yaml": gittest.Ptr(specYAML("c")),
		"specs/d.yaml": gittest.Ptr(specYAML("d")),
	})
	if run := e.run(gitRegistry(t, repo)); run.Result != api.ResultSucceeded || run.Counts.Created != 4 {
		t.Fatalf("first run: %s %+v %s", run.Result, run.Counts, run.Error)
	}

	repo.Requests()
	run := e.run(gitRegistry(t, repo))
	if reqs := repo.Requests(); run.Result != api.ResultUnchanged || len(reqs) != 1 || run.Ops != (store.Counts{Reads: 1}) {
		t.Fatalf("unchanged: %s, requests %v, Firestore %+v; want unchanged after 1 request and 1 read", run.Result, reqs, run.Ops)
	}

	repo.Commit(map[string]*string{"specs/b.yaml": gittest.Ptr(specYAML("b", "small", "large"))})
	run = e.run(gitRegistry(t, repo))
	if reqs := repo.Requests(); run.Result != api.ResultSucceeded || run.Counts.Updated != 1 || run.Counts.Unchanged != 3 || len(reqs) != 2 {
		t.Fatalf("b changed: %s %+v, requests %v; want b updated after 2 requests", run.Result, run.Counts, reqs)
	}
	t.Logf("one file changed: Firestore %+v", run.Ops)

	// A push, then the ref moves between the refs and the pack: the run
	// fails, and marks nothing though the new commit has no d.
	repo.Commit(map[string]*string{"specs/a.yaml": gittest.Ptr(specYAML("a", "small", "large"))})
	var once sync.Once
	repo.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost {
			once.Do(func() { repo.ForcePushWithout("specs/d.yaml") })
		}
		return false
	})
	run = e.run(gitRegistry(t, repo))
	repo.SetFault(nil)
	if run.Result != api.ResultFetchFailed || run.Counts.Marked != 0 || e.specs("git")["d"].State != api.SpecActive {
		t.Fatalf("ref moved mid-fetch: %s %+v %q; want the fetch failed and d active", run.Result, run.Counts, run.Error)
	}
	// The next run reads the force-pushed commit: d is gone.
	run = e.run(gitRegistry(t, repo))
	if run.Result != api.ResultSucceeded || run.Counts.Marked != 1 || e.specs("git")["d"].State != api.SpecMarked {
		t.Fatalf("after the force-push: %s %+v", run.Result, run.Counts)
	}

	// A push removing c, named by a webhook: a targeted run marks c and
	// nothing else.
	repo.Commit(map[string]*string{"specs/c.yaml": nil, "specs/a.yaml": nil})
	run, err := e.runner.ReconcileEntries(context.Background(), gitRegistry(t, repo), []string{"specs/c"})
	if err != nil {
		t.Fatal(err)
	}
	e.commit()
	states := map[string]api.SpecState{}
	for n, s := range e.specs("git") {
		states[n] = s.State
	}
	if run.Counts.Marked != 1 || states["c"] != api.SpecMarked || states["a"] != api.SpecActive {
		t.Fatalf("targeted run of specs/c: %+v, states %v; want c marked, a (not named) active", run.Counts, states)
	}
	if got := slices.Sorted(maps.Keys(states)); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("specs %v", got)
	}
}
