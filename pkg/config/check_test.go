package config_test

import (
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
)

func TestCheckReportsEveryProblemWithItsLine(t *testing.T) {
	src := `registries:
  - name: a
    type: http
    http:
      url: https://example.com/i.yaml
      auth: {type: token, token_env: T, colour: red}
      timeout: [1]
    max_mark_share: 2
  - name: b
    type: nope
    http: {url: "https://example.com"}
  - name: c
    type: dir
    dir: {embedded: true}
    deny: "not-a-list"
`
	res := config.Check([]byte(src), "f.yaml", ".")
	got := map[int]string{}
	for _, p := range res.Problems {
		got[p.Line] += p.Message + "|"
	}
	for line, want := range map[int]string{
		6:  "registries[0].http.auth.colour: unknown field",
		7:  "registries[0].http.timeout: want a duration",
		8:  "registries[0] (a): max_mark_share 2 must be in (0, 1]",
		10: `registries[1] (b): type "nope" is not one of oci, http, dir`,
		15: "registries[2].deny: want a list",
	} {
		if !strings.Contains(got[line], want) {
			t.Errorf("line %d: got %q, want %q", line, got[line], want)
		}
	}
	if len(res.Problems) != 5 {
		t.Errorf("%d problems, want 5: %+v", len(res.Problems), res.Problems)
	}
	if strings.Join(res.Registries, ",") != "a,b,c" {
		t.Errorf("registries %v", res.Registries)
	}

	if r := config.Check([]byte("registries:\n  - name: a\n    type: [\n"), "f", "."); len(r.Problems) != 1 || r.Problems[0].Line == 0 || !strings.Contains(r.Problems[0].Message, "not valid YAML") {
		t.Errorf("syntax error: %+v", r.Problems)
	}
	if r := config.Check([]byte(""), "f", "."); r.OK() {
		t.Error("an empty file passed")
	}
	ok := config.Check([]byte("registries:\n  - name: ex\n    type: dir\n    dir: {embedded: true}\n"), "f", ".")
	if !ok.OK() {
		t.Errorf("a good file: %+v", ok.Problems)
	}
}

// A helm block's problems are reported at the field they are about.
func TestCheckReportsHelmProblemsAtTheirLines(t *testing.T) {
	src := `registries:
  - name: charts
    type: helm
    helm:
      url: https://charts.example.com
      prefix: team/charts
  - name: oci-charts
    type: helm
    helm:
      host: registry.example.com
      auth:
        type: basic
        username: robot
  - name: typo
    type: helm
    helm:
      url: https://charts.example.com
      prerelease: true
`
	res := config.Check([]byte(src), "f.yaml", ".")
	got := map[int]string{}
	for _, p := range res.Problems {
		got[p.Line] += p.Message + "|"
	}
	for line, want := range map[int]string{
		6:  "registries[0] (charts): helm.prefix is for charts in an OCI registry",
		11: "registries[1] (oci-charts): helm.auth: auth type basic needs a password",
		18: "registries[2].helm.prerelease: unknown field",
	} {
		if !strings.Contains(got[line], want) {
			t.Errorf("line %d: got %q, want %q", line, got[line], want)
		}
	}
	if len(res.Problems) != 3 {
		t.Errorf("%d problems, want 3: %+v", len(res.Problems), res.Problems)
	}
}
