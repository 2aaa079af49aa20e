package config_test

import (
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
)

// `config check` reports every problem of a block, each at the line of
// its own field, not the first one at the block; a relative *_file
// (which terraform would refuse at plan time) is one of them, and Load
// refuses the file naming them all.
func TestCheckReportsEveryProblemOfABlockAtItsField(t *testing.T) {
	src := `registries:
  - name: hub
    type: dockerhub
    dockerhub:
      namespace: Acme Corp
      page_size: 500
      auth:
        type: basic
        username: acmebot
        password_file: secrets/dockerhub-pat
  - name: images
    type: oci
    max_mark_share: 2
    oci:
      host: registry.example.com
      tag: "bad tag"
      repositories: [ok, "", ok]
      concurrency: -1
      auth: {type: token, token_file: token}
  - name: charts
    type: helm
    hook: {type: bearer, secret_file: hook-secret}
    helm:
      url: https://charts.example.com
      prefix: team
      max_chart_bytes: -1
`
	res := config.Check([]byte(src), "f.yaml", ".")
	got := map[int][]string{}
	for _, p := range res.Problems {
		got[p.Line] = append(got[p.Line], p.Message)
	}
	want := map[int]string{
		5:  `registries[0] (hub): dockerhub.namespace "Acme Corp" is not a Docker Hub namespace`,
		6:  "registries[0] (hub): dockerhub.page_size 500 must be between 1 and 100",
		10: `registries[0] (hub): dockerhub.auth.password_file "secrets/dockerhub-pat" must be an absolute path`,
		13: "registries[1] (images): max_mark_share 2 must be in (0, 1]",
		16: `registries[1] (images): oci.tag "bad tag"`,
		18: "registries[1] (images): oci.concurrency -1 must not be negative",
		19: `registries[1] (images): oci.auth.token_file "token" must be an absolute path`,
		22: `registries[2] (charts): hook.secret_file "hook-secret" must be an absolute path`,
		25: "registries[2] (charts): helm.prefix is for charts in an OCI registry",
		26: "registries[2] (charts): helm.max_chart_bytes -1 must not be negative",
	}
	for line, w := range want {
		if len(got[line]) != 1 || !strings.Contains(got[line][0], w) {
			t.Errorf("line %d: got %q, want one problem %q", line, got[line], w)
		}
	}
	// Both problems of the repository list, on its (flow) line.
	if l := strings.Join(got[17], "|"); len(got[17]) != 2 || !strings.Contains(l, `oci.repositories[1] "" is not a repository name`) ||
		!strings.Contains(l, `oci.repositories[2] "ok" is listed twice`) {
		t.Errorf("line 17: got %q, want the empty and the repeated repository", got[17])
	}
	if n := len(res.Problems); n != len(want)+2 {
		t.Errorf("%d problems, want %d: %+v", n, len(want)+2, res.Problems)
	}

	_, err := config.Parse([]byte(src), "f.yaml", ".")
	if err == nil {
		t.Fatal("the file loaded")
	}
	for _, w := range []string{"dockerhub.namespace", "dockerhub.page_size", "dockerhub.auth.password_file"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Load's error %q does not name %s", err, w)
		}
	}
}
