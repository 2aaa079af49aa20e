package config_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
)

// The registries of docs/deploy.md's walkthrough ("Real registries, step
// by step") load as written, each with the type its section says, so a
// reader who copies one gets a file that `specsync config check`
// accepts.
func TestDeployGuideRegistriesLoad(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Real registries, step by step\n")
	if !ok {
		t.Fatal(`docs/deploy.md has no "## Real registries, step by step" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	// The values the walkthrough's registry_env gives its ${VAR}s.
	env := map[string]string{
		"AR_HOST":    "europe-west1-docker.pkg.dev",
		"AR_PROJECT": "my-specsync-project",
		"CHARTS_URL": "https://charts.example.com/stable",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	for _, ref := range regexp.MustCompile(`\$\{([A-Z_]+)\}`).FindAllStringSubmatch(section, -1) {
		if _, ok := env[ref[1]]; !ok {
			t.Errorf("the walkthrough references ${%s}, which this test gives no value", ref[1])
		}
	}
	var types []string
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(section, -1) {
		cfg, err := config.Parse([]byte(block[1]), "docs/deploy.md", t.TempDir())
		if err != nil {
			t.Errorf("a registries file of the walkthrough does not load: %v\n%s", err, block[1])
			continue
		}
		for _, r := range cfg.Registries {
			types = append(types, r.Type+"/"+r.Describe().Auth)
		}
	}
	if got, want := strings.Join(types, ","), "oci/google,dockerhub/basic,helm/basic,helm/google"; got != want {
		t.Errorf("the walkthrough's registries are %s, want %s", got, want)
	}
}
