package config

import (
	"strings"
	"testing"
)

// A quay block with several problems: config check reports each one at
// the line of its field, in one run.
func TestCheckLocatesEveryQuayProblem(t *testing.T) {
	src := `registries:
  - name: quay
    type: quay
    quay:
      namespace: Acme
      tag: "a:b"
      auth:
        type: basic
        username: acme+specsync
        password_env: QUAY_ROBOT
      api_url: quay.io
`
	res := Check([]byte(src), "registries.yaml", ".")
	want := map[int]string{
		5:  `quay.namespace "Acme" is not a Quay organization or user name`,
		6:  `quay.tag "a:b"`,
		7:  "quay.auth: token_env or token_file is required with type basic",
		11: `quay.api_url: "quay.io" must be an http or https URL`,
	}
	got := map[int]string{}
	for _, p := range res.Problems {
		got[p.Line] = p.Message
	}
	for line, w := range want {
		if !strings.Contains(got[line], w) {
			t.Errorf("line %d: %q, want a problem containing %q (all: %v)", line, got[line], w, res.Problems)
		}
	}
	if len(res.Problems) != len(want) {
		t.Errorf("%d problems, want %d: %v", len(res.Problems), len(want), res.Problems)
	}
}
