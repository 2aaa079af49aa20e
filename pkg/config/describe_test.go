package config_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/config"
)

// Describe says where each type of registry is read from, and never
// carries a credential: not the user name, not the variable or file a
// secret comes from, not a URL's user information, query or fragment.
func TestDescribeNamesTheSourceWithoutSecrets(t *testing.T) {
	t.Setenv("DESCRIBE_TOKEN", "tok-secret-1")
	cfg, err := config.Parse([]byte(`registries:
  - name: ar
    type: oci
    oci: {host: europe-west1-docker.pkg.dev, prefix: my-project/specs, auth: {type: google}}
  - name: index
    type: http
    http:
      url: "https://specs.example.com/index.yaml?sig=query-secret#frag-secret"
      auth: {type: basic, username: user-secret, password_env: DESCRIBE_TOKEN}
  - name: hub
    type: dockerhub
    dockerhub: {namespace: acme, auth: {type: basic, username: user-secret, password_env: DESCRIBE_TOKEN}}
  - name: gh
    type: ghcr
    ghcr: {owner: acme, owner_type: org, auth: {type: token, token_env: DESCRIBE_TOKEN}}
  - name: charts
    type: helm
    helm: {url: "https://charts.example.com/stable"}
  - name: oci-charts
    type: helm
    helm: {host: europe-west1-docker.pkg.dev, prefix: my-project/charts, auth: {type: google}}
  - name: examples
    type: dir
    dir: {embedded: true}
`), "test.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]api.Source{
		"ar":         {Type: "oci", Location: "europe-west1-docker.pkg.dev/my-project/specs", Auth: "google"},
		"index":      {Type: "http", Location: "https://specs.example.com/index.yaml", Auth: "basic"},
		"hub":        {Type: "dockerhub", Location: "index.docker.io/acme", Auth: "basic"},
		"gh":         {Type: "ghcr", Location: "ghcr.io/acme", Auth: "token"},
		"charts":     {Type: "helm", Location: "https://charts.example.com/stable", Auth: "anonymous"},
		"oci-charts": {Type: "helm", Location: "oci://europe-west1-docker.pkg.dev/my-project/charts", Auth: "google"},
		"examples":   {Type: "dir", Location: "the examples compiled into the binary"},
	}
	for _, r := range cfg.Registries {
		got := r.Describe()
		if got != want[r.Name] {
			t.Errorf("%s: %+v, want %+v", r.Name, got, want[r.Name])
		}
		b, _ := json.Marshal(got)
		for _, secret := range []string{"secret", "DESCRIBE_TOKEN", "tok-"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s: the description %s carries %q", r.Name, b, secret)
			}
		}
	}
}
