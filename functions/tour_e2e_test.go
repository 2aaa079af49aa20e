package functions_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
)

// The README's tour, as written: the local stack on the examples
// registries file, `specsync bootstrap --wait`, a watcher
// (`specsync changes --follow`), an edit of one example spec, and
// `specsync bootstrap --wait` again, which shows that one change, as does
// the watcher: exactly it, nothing more. The files edited are a copy of
// examples/registry (SPECSYNC_LOCAL_SPECS), which the stack re-reads
// before every bootstrap.
func TestE2ETourEditShowsAsExactlyThatChange(t *testing.T) {
	t.Parallel()
	specs := t.TempDir()
	files, err := filepath.Glob("../examples/registry/*.yaml")
	if err != nil || len(files) != 5 {
		t.Fatalf("example specs: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(specs, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	registries, err := os.ReadFile("../examples/registries.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := startStack(t, string(registries), "SPECSYNC_LOCAL_SPECS="+specs)

	// $ specsync bootstrap --wait
	r := s.cli(nil, "bootstrap", "--wait").must(t, 0, "first bootstrap")
	if !regexp.MustCompile(`(?m)^\s+examples\s+succeeded\s+succeeded\s+\+5 ~0 -0\s`).MatchString(r.stdout) {
		t.Fatalf("first bootstrap: want the five examples created:\n%s", r.stdout)
	}

	// $ specsync changes --follow
	cmd := exec.Command(specsyncBinary(t), "changes", "--follow", "--wait", "2s")
	cmd.Env = append(os.Environ(), "SPECSYNC_URL="+s.url, "SPECSYNC_OUTPUT=", "SPECSYNC_CATALOG_URL=",
		"SPECSYNC_BROKER_USERNAME="+brokerUser, "SPECSYNC_BROKER_PASSWORD="+brokerPass)
	out := &lineWatcher{}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	out.waitFor(t, regexp.MustCompile(`^# listed the catalog \(start\): revision 5, 5 services$`), 20*time.Second)

	// $ $EDITOR examples/registry/redis.yaml
	redis := filepath.Join(specs, "redis.yaml")
	b, err := os.ReadFile(redis)
	if err != nil {
		t.Fatal(err)
	}
	const was, now = "description: Redis in-memory cache and key-value store\n", "description: Redis in-memory cache and key-value store, edited on the tour\n"
	if !bytes.Contains(b, []byte(was)) {
		t.Fatalf("redis.yaml has no line %q", was)
	}
	if err := os.WriteFile(redis, bytes.Replace(b, []byte(was), []byte(now), 1), 0o644); err != nil {
		t.Fatal(err)
	}

	// $ specsync bootstrap --wait: that one change.
	r = s.cli(nil, "bootstrap", "--wait").must(t, 0, "bootstrap after the edit")
	if !regexp.MustCompile(`(?m)^\s+examples\s+succeeded\s+succeeded\s+\+0 ~1 -0\s`).MatchString(r.stdout) {
		t.Fatalf("bootstrap after the edit: want exactly one spec updated:\n%s", r.stdout)
	}
	// The watcher prints it.
	out.waitFor(t, regexp.MustCompile(`^6\s+\S+\s+updated\s+examples[/]redis\s+\S+\s+\(5 services\)$`), 20*time.Second)
	// And nothing more, even after another bootstrap (nothing changed).
	r = s.cli(nil, "bootstrap", "--wait").must(t, 0, "bootstrap with nothing edited")
	if !regexp.MustCompile(`(?m)^\s+examples\s+succeeded\s+unchanged\s`).MatchString(r.stdout) {
		t.Errorf("bootstrap with nothing edited: want unchanged:\n%s", r.stdout)
	}
	time.Sleep(3 * time.Second) // one long poll of the watcher's
	out.mu.Lock()
	var changes []string
	for _, l := range out.lines {
		if regexp.MustCompile(`^\d+\s`).MatchString(l) {
			changes = append(changes, l)
		}
	}
	all := strings.Join(out.lines, "\n")
	out.mu.Unlock()
	if len(changes) != 1 {
		t.Errorf("the watcher printed %d changes, want exactly the edit:\n%s", len(changes), all)
	}
	// The change is the edit: the service as the catalog now lists it.
	r = s.cli(nil, "changes", "--since", "5", "-o", "json").must(t, 0, "changes --since 5")
	var page api.ChangePage
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Changes) != 1 {
		t.Fatalf("changes since 5: %v\n%s", err, r.stdout)
	}
	if svc, _ := json.Marshal(page.Changes[0].Service); !strings.Contains(string(svc), "edited on the tour") {
		t.Errorf("the change does not carry the edit: %s", svc)
	}
}
