package functions_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/store"
)

// `specsync-local reconcile` has no commit topic: it runs the committer in
// process after its runs, so the feed it leaves is committed (dense, up
// to the catalog revision, nothing pending), and says so.
func TestE2ELocalReconcileCommits(t *testing.T) {
	t.Parallel()
	requireEmulators(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "specs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"alpha", "beta", "gamma"} {
		body := fmt.Sprintf("name: %s\ndescription: the %s service\nplans:\n  - name: p\n    description: p\n", n, n)
		if err := os.WriteFile(filepath.Join(dir, "specs", n+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "registries.yaml")
	if err := os.WriteFile(cfg, []byte("registries:\n  - name: local\n    type: dir\n    dir:\n      path: specs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	project := emulatortest.ProjectID(t)
	run := func() string {
		t.Helper()
		cmd := exec.Command(binary(t, "specsync-local"), "reconcile", "-config", cfg, "-project", project)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("specsync-local reconcile: %v\n%s\n%s", err, out.String(), errb.String())
		}
		return out.String()
	}
	if out := run(); !strings.Contains(out, "catalog: 3 changes committed, revision 3") {
		t.Fatalf("the first run's summary does not say it committed:\n%s", out)
	}
	client, err := firestore.NewClient(context.Background(), project)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if rev, err := store.New(client).Revision(context.Background()); err != nil || rev != 3 {
		t.Fatalf("catalog revision %d (%v), want 3", rev, err)
	}
	invariant.Require(t, client, invariant.Options{Settled: true, Feed: true})
	if out := run(); !strings.Contains(out, "catalog: 0 changes committed, revision 3") {
		t.Fatalf("the unchanged run's summary:\n%s", out)
	}
}
