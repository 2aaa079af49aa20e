package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/registry"
)

func TestReferenceFileLoads(t *testing.T) {
	t.Setenv("REFERENCE_REGISTRY_HOST", "registry.example.com")
	// The reference file names dir.path "registry" relative to itself.
	cfg, err := Load(filepath.Join("..", "..", "examples", "registries.reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Names(), ","); got != "team-images,partner-index,bundled,cloud-images,hub-images,ghcr-images,quay-images,team-charts,oci-charts,git-specs,gitlab-specs" {
		t.Fatalf("registries %s", got)
	}
	r, ok := cfg.Lookup("team-images")
	if !ok || r.MaxMarkShare == nil || *r.MaxMarkShare != 0.5 || r.AllowMassDeletion || r.Source == nil {
		t.Fatalf("team-images: %+v", r)
	}
	if cfg.File.Registries[0].Block().(*registry.OCIBlock).Host != "registry.example.com" {
		t.Fatalf("${VAR} not expanded: %q", cfg.File.Registries[0].Block().(*registry.OCIBlock).Host)
	}
	if _, ok := cfg.Lookup("nope"); ok {
		t.Fatal("Lookup found a registry that is not there")
	}
}

func TestDemoFileLoads(t *testing.T) {
	t.Setenv("SPECSYNC_DEMO_REGISTRY", "127.0.0.1:5000")
	if _, err := Load(filepath.Join("..", "..", "examples", "registries.yaml")); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedDir(t *testing.T) {
	cfg, err := Parse([]byte("registries:\n- name: bundled\n  type: dir\n  dir: {embedded: true}\n"), "test", ".")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Registries[0].Source == nil {
		t.Fatal("no source built")
	}
}

func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	oci := "  type: oci\n  oci: {host: r.example.com}\n"
	cases := []struct {
		name, yaml, want string
	}{
		{"empty", "", "at least one registry"},
		{"no registries", "registries: []\n", "at least one registry"},
		{"unknown field", "registries:\n- name: a\n  typo: 1\n" + oci, "unknown field"},
		{"bad name", "registries:\n- name: Bad_Name\n" + oci, `name "Bad_Name" must be a DNS label`},
		{"name too long", "registries:\n- name: " + strings.Repeat("a", 64) + "\n" + oci, "must be a DNS label"},
		{"duplicate name", "registries:\n- name: a\n" + oci + "- name: a\n" + oci, `registries[1] (a): name "a" is already used by registries[0]`},
		{"invalid allow", "registries:\n- name: a\n  allow: ['(']\n" + oci, `allow[0] "(" is not a valid regular expression`},
		{"invalid deny", "registries:\n- name: a\n  deny: ['ok', '[z-a]']\n" + oci, `deny[1] "[z-a]"`},
		{"no type", "registries:\n- name: a\n  oci: {host: h}\n", "type is required"},
		{"unknown type", "registries:\n- name: a\n  type: ftp\n  oci: {host: h}\n", `type "ftp" is not one of`},
		{"two blocks", "registries:\n- name: a\n  type: oci\n  oci: {host: h}\n  dir: {path: .}\n", "exactly one of the oci, http, dir, dockerhub, ghcr"},
		{"no block", "registries:\n- name: a\n  type: oci\n", "exactly one of"},
		{"type block mismatch", "registries:\n- name: a\n  type: oci\n  dir: {path: .}\n", "type oci needs an oci block"},
		{"share too big", "registries:\n- name: a\n  max_mark_share: 1.5\n" + oci, "max_mark_share 1.5 must be in (0, 1]"},
		{"share zero", "registries:\n- name: a\n  max_mark_share: 0\n" + oci, "max_mark_share 0 must be in"},
		{"bad duration", "registries:\n- name: a\n  type: oci\n  oci: {host: h, timeout: soon}\n", "duration"},
		{"missing env", "registries:\n- name: a\n  type: oci\n  oci: {host: '${SPECSYNC_TEST_UNSET_VAR}'}\n", "SPECSYNC_TEST_UNSET_VAR"},
		{"missing dir", "registries:\n- name: a\n  type: dir\n  dir: {path: nowhere}\n", `dir.path "nowhere" is not a readable directory`},
		{"dir is a file", "registries:\n- name: a\n  type: dir\n  dir: {path: file.txt}\n", "is not a readable directory"},
		{"dir both", "registries:\n- name: a\n  type: dir\n  dir: {path: ., embedded: true}\n", "either path or embedded"},
		{"dir neither", "registries:\n- name: a\n  type: dir\n  dir: {}\n", "set path or embedded"},
		{"oci without host", "registries:\n- name: a\n  type: oci\n  oci: {tag: v1}\n", "oci"},
		{"http without url", "registries:\n- name: a\n  type: http\n  http: {timeout: 5s}\n", "http"},
		{"auth unknown type", "registries:\n- name: a\n  type: oci\n  oci: {host: h, auth: {type: magic}}\n", "oci.auth"},
		{"basic auth without password", "registries:\n- name: a\n  type: oci\n  oci: {host: h, auth: {type: basic, username: u}}\n", "oci.auth"},
		{"not yaml", "registries: [\n", "registries file test"},
		{"helm without a block", "registries:\n- name: a\n  type: helm\n  oci: {host: h}\n", "type helm needs a helm block"},
		{"helm neither url nor host", "registries:\n- name: a\n  type: helm\n  helm: {prereleases: true}\n", "set helm.url (a chart repository) or helm.host"},
		{"helm both", "registries:\n- name: a\n  type: helm\n  helm: {url: 'https://c.example.com', host: r.example.com}\n", "not both"},
		{"helm url with prefix", "registries:\n- name: a\n  type: helm\n  helm: {url: 'https://c.example.com', prefix: p}\n", "helm.prefix is for charts in an OCI registry"},
		{"helm host with max_bytes", "registries:\n- name: a\n  type: helm\n  helm: {host: r.example.com, max_bytes: 10}\n", "helm.max_bytes bounds a chart repository's index"},
		{"helm oci url", "registries:\n- name: a\n  type: helm\n  helm: {url: 'oci://r.example.com/charts'}\n", "must be http or https"},
		{"helm auth", "registries:\n- name: a\n  type: helm\n  helm: {url: 'https://c.example.com', auth: {type: token}}\n", "helm.auth: auth type token needs a token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "test", dir)
			if err == nil {
				t.Fatalf("loaded; want an error containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if err == nil || !strings.Contains(err.Error(), "absent.yaml") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestSecretsAreNamedNotRead(t *testing.T) {
	// Loading must not need the secret itself: it is read at fetch time.
	cfg, err := Parse([]byte("registries:\n- name: a\n  type: oci\n  oci: {host: h, auth: {type: token, token_env: SPECSYNC_TEST_TOKEN_NOT_SET}}\n"), "test", ".")
	if err != nil {
		t.Fatalf("a config naming an unset secret variable must load: %v", err)
	}
	if len(cfg.Registries) != 1 {
		t.Fatal("registry missing")
	}
}

// A ${VAR} in a comment is no reference: an unset variable a comment
// mentions neither fails the load nor is reported by the check, while one
// in a value does both, at its line. A plain value is read again after
// the replacement (a number stays a number), a quoted one stays a string.
func TestEnvReferencesAreValuesNotComments(t *testing.T) {
	t.Setenv("SPECSYNC_TEST_PAGE", "50")
	t.Setenv("SPECSYNC_TEST_HOST", "registry.example.com:5000")
	file := "# Set ${SPECSYNC_TEST_UNSET_IN_COMMENT} before loading this file.\n" +
		"registries:\n" +
		"- name: a # ${SPECSYNC_TEST_UNSET_IN_COMMENT} again\n" +
		"  type: oci\n" +
		"  oci: {host: \"${SPECSYNC_TEST_HOST}\", page_size: ${SPECSYNC_TEST_PAGE}}\n"
	cfg, err := Parse([]byte(file), "test", ".")
	if err != nil {
		t.Fatalf("a variable named only in comments failed the load: %v", err)
	}
	if oci := cfg.File.Registries[0].Block().(*registry.OCIBlock); oci.Host != "registry.example.com:5000" || oci.PageSize != 50 {
		t.Fatalf("expanded oci block %+v", oci)
	}
	if res := Check([]byte(file), "test", "."); len(res.Problems) != 0 {
		t.Fatalf("check reported %+v", res.Problems)
	}

	unset := file + "- name: b\n  type: http\n  http: {url: \"https://${SPECSYNC_TEST_UNSET_IN_VALUE}/index.yaml\"}\n"
	if _, err := Parse([]byte(unset), "test", "."); err == nil || !strings.Contains(err.Error(), "SPECSYNC_TEST_UNSET_IN_VALUE") || strings.Contains(err.Error(), "IN_COMMENT") {
		t.Fatalf("load with an unset variable in a value: %v", err)
	}
	res := Check([]byte(unset), "test", ".")
	if len(res.Problems) != 1 || res.Problems[0].Line != 8 || !strings.Contains(res.Problems[0].Message, "SPECSYNC_TEST_UNSET_IN_VALUE") {
		t.Fatalf("check: %+v, want one problem at line 8 naming the variable", res.Problems)
	}
}

func TestHelmBlocks(t *testing.T) {
	cfg, err := Parse([]byte(`registries:
- name: repo
  type: helm
  helm: {url: "https://charts.example.com/stable", prereleases: true, max_chart_bytes: 1048576}
- name: oci-charts
  type: helm
  allow: ["db-.*"]
  helm: {host: europe-docker.pkg.dev, prefix: my-project/charts, repositories: [db-postgres], timeout: 30s}
`), "test", ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cfg.Registries {
		if _, ok := r.Source.(*registry.Helm); !ok {
			t.Errorf("%s: source %T", r.Name, r.Source)
		}
	}
	if h := cfg.File.Registries[1].Block().(*registry.HelmBlock); h.Prefix != "my-project/charts" || time.Duration(h.Timeout) != 30*time.Second {
		t.Errorf("oci-charts: %+v", h)
	}
}
