package config_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/specsync/specsync/examples"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/registry"
)

// exampleSpec is one of the example spec files (examples/registry).
func exampleSpec(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(examples.Registry, examples.RegistryDir+"/"+name+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bundleJSON is a config bundle as terraform writes it.
func bundleJSON(t *testing.T, registries string, files map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(config.Bundle{Version: config.BundleVersion, Registries: registries, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// entries fetches a registry of cfg and returns its entries' names and
// refs, failing on any entry error.
func entries(t *testing.T, cfg *config.Config, name string) map[string]string {
	t.Helper()
	r, ok := cfg.Lookup(name)
	if !ok {
		t.Fatalf("no registry %s in %v", name, cfg.Names())
	}
	l, err := r.Source.Fetch(context.Background(), registry.FetchOptions{})
	if err != nil {
		t.Fatalf("fetch %s: %v", name, err)
	}
	out := map[string]string{}
	for _, e := range l.Entries {
		if e.Err != nil {
			t.Errorf("%s: entry %s: %v", name, e.Name, e.Err)
		}
		out[e.Name] = e.Ref
	}
	return out
}

// The bundle's files are a file system by the book (fstest.TestFS reads
// every file and directory every way io/fs offers).
func TestBundleFilesAreAFileSystem(t *testing.T) {
	t.Parallel()
	fsys, err := config.NewFilesFS(map[string]string{"registries.yaml": "x", "specs/redis.yaml": "redis", "specs/db/postgresql.yaml": "pg", "specs/.hidden": ""})
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(fsys, "registries.yaml", "specs/redis.yaml", "specs/db/postgresql.yaml", "specs/.hidden"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(fsys, "specs/nope.yaml"); !strings.Contains(err.Error(), fs.ErrNotExist.Error()) {
		t.Errorf("a missing file: %v", err)
	}
}

// A bundle's dir source reads the bundle's files under its path; ${VAR}
// references are expanded from the environment as a file's are.
func TestParseBundle(t *testing.T) {
	t.Setenv("SPECSYNC_TEST_BUNDLE_HOST", "registry.example.com")
	registries := `registries:
  - name: team-images
    type: oci
    oci: {host: "${SPECSYNC_TEST_BUNDLE_HOST}", prefix: team}
  - name: bundled
    type: dir
    dir: {path: specs}
  - name: nested
    type: dir
    dir: {path: ./more/specs/}
`
	cfg, err := config.ParseBundle(bundleJSON(t, registries, map[string]string{
		"specs/redis.yaml":         exampleSpec(t, "redis"),
		"specs/postgresql.yaml":    exampleSpec(t, "postgresql"),
		"specs/notes.txt":          "not a spec: ignored",
		"more/specs/rabbitmq.yaml": exampleSpec(t, "rabbitmq"),
	}), "gs://deploy/registries.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Names(), ","); got != "team-images,bundled,nested" {
		t.Fatalf("registries %s", got)
	}
	if r, _ := cfg.Lookup("team-images"); r.Block().(*registry.OCIBlock).Host != "registry.example.com" {
		t.Errorf("${VAR} not expanded: %q", r.Block().(*registry.OCIBlock).Host)
	}
	got := entries(t, cfg, "bundled")
	if len(got) != 2 || got["redis"] != "bundle:specs/redis.yaml" || got["postgresql"] != "bundle:specs/postgresql.yaml" {
		t.Errorf("bundled entries %v", got)
	}
	if got := entries(t, cfg, "nested"); len(got) != 1 || got["rabbitmq"] != "bundle:more/specs/rabbitmq.yaml" {
		t.Errorf("nested entries %v", got)
	}
	// No files at all is a bundle too, when no dir source needs them.
	if _, err := config.ParseBundle([]byte(`{"version": 1, "registries": "registries:\n- {name: a, type: http, http: {url: 'https://example.com/index.yaml'}}\n"}`), "gs://b/o"); err != nil {
		t.Errorf("a bundle without files: %v", err)
	}
}

// What is wrong with a bundle is said, with the object's name.
func TestParseBundleRefusals(t *testing.T) {
	t.Parallel()
	dir := "registries:\n- {name: d, type: dir, dir: {path: specs}}\n"
	spec := map[string]string{"specs/redis.yaml": "name: redis\n"}
	for name, c := range map[string]struct {
		data string
		want string
	}{
		"not JSON":          {"registries:\n- name: a\n", "not a config bundle"},
		"two documents":     {`{"version": 1, "registries": ""} {}`, "more after its JSON object"},
		"unknown version":   {`{"version": 2, "registries": "", "files": {}}`, "version 2 is not one this specsync reads (1)"},
		"no version":        {`{"registries": ""}`, "version 0 is not one this specsync reads (1)"},
		"unknown field":     {`{"version": 1, "registries": "", "file": {}}`, `unknown field "file"`},
		"bad registries":    {string(bundleJSON(t, "registries: []\n", nil)), "registries file gs://deploy/o: registries: at least one registry is required"},
		"no files for dir":  {string(bundleJSON(t, dir, map[string]string{"other/redis.yaml": "x"})), `dir.path "specs": the config bundle holds no files under specs/`},
		"a file, not a dir": {string(bundleJSON(t, dir, map[string]string{"specs": "x"})), `dir.path "specs": the config bundle holds no files under specs/`},
		"absolute dir":      {string(bundleJSON(t, "registries:\n- {name: d, type: dir, dir: {path: /srv/specs}}\n", spec)), `dir.path "/srv/specs": in a config bundle`},
		"dir outside":       {string(bundleJSON(t, "registries:\n- {name: d, type: dir, dir: {path: ../specs}}\n", spec)), `dir.path "../specs": in a config bundle`},
		"path with ..":      {string(bundleJSON(t, dir, map[string]string{"specs/../x.yaml": "x"})), `files: "specs/../x.yaml" is not a relative`},
		"absolute path":     {string(bundleJSON(t, dir, map[string]string{"/specs/x.yaml": "x"})), `files: "/specs/x.yaml" is not a relative`},
		"file and dir":      {string(bundleJSON(t, dir, map[string]string{"specs": "x", "specs/x.yaml": "x"})), `files: "specs" is a file and the directory of "specs/x.yaml"`},
	} {
		_, err := config.ParseBundle([]byte(c.data), "gs://deploy/o")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "gs://deploy/o") {
			t.Errorf("%s: %v, want an error naming gs://deploy/o and saying %q", name, err, c.want)
		}
	}
}
