package functions_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
)

// The README's tour: `make run`, then edit a spec and push it with
// `specsync-local push`; the local registry notifies the example
// registry's webhook, as a distribution registry's notification endpoint
// would, and a watcher of the change feed gets exactly that change, with
// no bootstrap after the first.
func TestE2EPushReachesTheWatcherWithoutABootstrap(t *testing.T) {
	t.Parallel()
	registries, err := os.ReadFile("../examples/registries.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The stack binds its registry on a port of its own choosing (never
	// one picked free here and bound later) and its banner says where.
	s := startStack(t, string(registries))
	regAddr := s.registry()
	if !strings.Contains(s.logText(), "the registry notifies the webhook of examples") {
		t.Fatalf("the stack's banner does not say the local registry notifies the examples webhook")
	}
	if op := s.bootstrap(); op.State != api.Succeeded {
		t.Fatalf("first bootstrap: %+v", op)
	}
	r := s.do(http.MethodGet, "/v2/catalog/changes?since=0", "broker", nil)
	var page api.ChangePage
	r.json(t, &page)
	since := page.Revision

	edited, err := os.ReadFile("../examples/registry/redis.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(edited), "description: ", "description: Edited in the tour. ", 1)
	file := filepath.Join(t.TempDir(), "redis.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary(t, "specsync-local"), "push", "-registry", regAddr, file).CombinedOutput()
	if err != nil {
		t.Fatalf("specsync-local push: %v\n%s", err, out)
	}

	// A watcher waiting on the feed gets the change the push made.
	r = s.do(http.MethodGet, fmt.Sprintf("/v2/catalog/changes?since=%d&wait=25s", since), "broker", nil)
	r.json(t, &page)
	if r.status != http.StatusOK || len(page.Changes) != 1 {
		t.Fatalf("the watcher got %d %s, want the one change of the push", r.status, r.body)
	}
	c := page.Changes[0]
	if c.Kind != api.ChangeUpdated || c.Name != "redis" || c.Service == nil || !strings.HasPrefix(c.Service.Description, "Edited in the tour.") {
		t.Errorf("the change: %+v, want redis updated with the edited description", c)
	}
	if n := strings.Count(s.logText(), `"message":"bootstrap started"`); n != 1 {
		t.Errorf("%d bootstraps started, want only the first", n)
	}
}

// `make demo` shows the whole cycle the README promises, ending with one
// push upstream that a waiting watcher hears without a bootstrap.
func TestE2EDemo(t *testing.T) {
	t.Parallel()
	requireEmulators(t)
	cmd := exec.Command(binary(t, "specsync-local"), "demo")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOOGLE_CLOUD_PROJECT="+emulatortest.ProjectID(t), "SPECSYNC_LOCAL_REGISTRY=127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("specsync-local demo: %v\n%s", err, out)
	}
	for _, want := range []string{
		"created 5, updated 0",
		"304 (the catalog did not change)",
		"revision 5   created   wordpress",
		"the watcher heard revision 6: updated redis, \"Now with TLS.",
		"== stopped everything the demo started",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
}
