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

// Each problem once, at its own line: a misspelt field is not reported a
// second time as the block or field it left missing, and a YAML error is
// reported on the line that has it, not where the construct around it
// began.
func TestCheckReportsEachProblemOnceAtItsTrueLine(t *testing.T) {
	for _, c := range []struct {
		name, src string
		line      int
		want      string
	}{
		{"misspelt field in a block", "registries:\n  - name: a\n    type: oci\n    oci:\n      hots: example.com\n", 5, "registries[0].oci.hots: unknown field"},
		{"misspelt block", "registries:\n  - name: a\n    type: oci\n    ocii:\n      host: example.com\n", 4, "registries[0].ocii: unknown field"},
		{"unclosed flow list", "registries:\n  - name: a\n    type: oci\n    oci:\n      host: x\n      insecure: true\n    allow: [\"specs/.*\"\n  - name: b\n", 7, "did not find expected ',' or ']'"},
		{"tab", "registries:\n  - name: a\n    type: oci\n    oci:\n      host: x\n      insecure: true\n\tbad: tab\n", 7, "tab character"},
		{"misplaced list item", "registries:\n  - name: a\n    type: oci\n    oci:\n      host: x\n      insecure: true\n      - y\n", 7, "did not find expected key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := config.Check([]byte(c.src), "f.yaml", ".")
			if len(res.Problems) != 1 {
				t.Fatalf("%d problems, want 1: %+v", len(res.Problems), res.Problems)
			}
			p := res.Problems[0]
			if p.Line != c.line || !strings.Contains(p.Message, c.want) {
				t.Fatalf("got line %d %q, want line %d %q", p.Line, p.Message, c.line, c.want)
			}
			if strings.Contains(p.Message, "line ") {
				t.Errorf("message %q names a line of its own", p.Message)
			}
		})
	}
	// A problem of its own in another field of the registry still shows.
	res := config.Check([]byte("registries:\n  - name: a\n    type: oci\n    oci:\n      host: x\n      tagg: latest\n    max_mark_share: 2\n"), "f.yaml", ".")
	if len(res.Problems) != 2 || res.Problems[0].Line != 6 || res.Problems[1].Line != 7 {
		t.Errorf("want the misspelt tag (6) and max_mark_share (7): %+v", res.Problems)
	}
	// The source's block is named once.
	res = config.Check([]byte("registries:\n  - name: a\n    type: http\n    http:\n      url: ftp://x\n"), "f.yaml", ".")
	if len(res.Problems) != 1 || strings.Contains(res.Problems[0].Message, "http: http:") {
		t.Errorf("http block named twice: %+v", res.Problems)
	}
}
