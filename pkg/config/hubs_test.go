package config

import (
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
)

func TestDockerHubAndGHCRBlocks(t *testing.T) {
	cfg, err := Parse([]byte(`registries:
- name: hub
  type: dockerhub
  allow: ["svc-.*"]
  dockerhub: {namespace: acme, auth: {type: basic, username: robot, password_env: SPECSYNC_TEST_UNSET_PAT}}
- name: gh
  type: ghcr
  ghcr: {owner: AcmeCorp, owner_type: org, page_size: 50, timeout: 30s, auth: {type: token, token_file: /secrets/gh/token}}
`), "test", ".")
	if err != nil {
		t.Fatalf("a config naming unset secrets must load: %v", err)
	}
	hub, ok := cfg.Registries[0].Source.(*registry.DockerHub)
	if !ok || hub.String() != "dockerhub acme (auth basic(username robot, password from env SPECSYNC_TEST_UNSET_PAT))" {
		t.Errorf("hub: %T %v", cfg.Registries[0].Source, cfg.Registries[0].Source)
	}
	gh, ok := cfg.Registries[1].Source.(*registry.GHCR)
	if !ok || gh.String() != "ghcr org acmecorp (auth token(from file /secrets/gh/token))" {
		t.Errorf("gh: %T %v", cfg.Registries[1].Source, cfg.Registries[1].Source)
	}
	if g := cfg.File.Registries[1].Block().(*registry.GHCRBlock); g.PageSize != 50 || g.OwnerType != "org" {
		t.Errorf("ghcr block %+v", g)
	}

	for _, c := range []struct{ name, yaml, want string }{
		{"no block", "registries:\n- name: a\n  type: dockerhub\n", "exactly one of the oci, http, dir, dockerhub, ghcr"},
		{"type block mismatch", "registries:\n- name: a\n  type: ghcr\n  dockerhub: {namespace: acme}\n", "type ghcr needs a ghcr block"},
		{"two blocks", "registries:\n- name: a\n  type: ghcr\n  ghcr: {owner: a, owner_type: org}\n  dockerhub: {namespace: acme}\n", "found 2"},
		{"no namespace", "registries:\n- name: a\n  type: dockerhub\n  dockerhub: {tag: v1}\n", "dockerhub.namespace is required"},
		{"token auth on Docker Hub", "registries:\n- name: a\n  type: dockerhub\n  dockerhub: {namespace: acme, auth: {type: token, token_env: T}}\n", "dockerhub.auth.type token"},
		{"anonymous GHCR", "registries:\n- name: a\n  type: ghcr\n  ghcr: {owner: acme, owner_type: org}\n", "ghcr.auth is required"},
		{"bad owner type", "registries:\n- name: a\n  type: ghcr\n  ghcr: {owner: acme, owner_type: team, auth: {type: token, token_env: T}}\n", `ghcr.owner_type "team"`},
		{"unknown type", "registries:\n- name: a\n  type: gitlab\n  dockerhub: {namespace: acme}\n", `type "gitlab" is not one of oci, http, dir, dockerhub, ghcr`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "test", ".")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// config check reports each source's problems at the line of the field.
func TestCheckLocatesDockerHubAndGHCRProblems(t *testing.T) {
	src := `registries:
  - name: hub
    type: dockerhub
    dockerhub:
      namespace: Acme/Team
      tag: latest
  - name: hub-auth
    type: dockerhub
    dockerhub:
      namespace: acme
      auth:
        type: token
        token_env: HUB_TOKEN
  - name: gh
    type: ghcr
    ghcr:
      owner: acme
      owner_type: organisation
      auth: {type: token, token_env: GH_TOKEN}
  - name: gh-page
    type: ghcr
    ghcr:
      owner: acme
      owner_type: org
      page_size: 500
      auth: {type: token, token_env: GH_TOKEN}
`
	res := Check([]byte(src), "f.yaml", ".")
	got := map[int]string{}
	for _, p := range res.Problems {
		got[p.Line] += p.Message + "|"
	}
	for line, want := range map[int]string{
		5:  `registries[0] (hub): dockerhub.namespace "Acme/Team"`,
		12: "registries[1] (hub-auth): dockerhub.auth.type token",
		18: `registries[2] (gh): ghcr.owner_type "organisation"`,
		25: "registries[3] (gh-page): ghcr.page_size 500",
	} {
		if !strings.Contains(got[line], want) {
			t.Errorf("line %d: got %q, want %q", line, got[line], want)
		}
	}
	if len(res.Problems) != 4 {
		t.Errorf("%d problems, want 4: %+v", len(res.Problems), res.Problems)
	}
}
