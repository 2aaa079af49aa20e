package config_test

import (
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
)

// A verify block's problems are each reported at its field's line, all
// at once; verify on a source whose entries are not OCI manifests is
// refused, saying why.
func TestCheckVerifyBlock(t *testing.T) {
	t.Parallel()
	src := `registries:
  - name: signed
    type: oci
    oci: {host: registry.example.com}
    verify:
      keys:
        - pem_env: COSIGN_KEY_2026
        - pem_env: "not a name"
        - {pem_env: A, pem_file: /etc/keys/b.pub}
      keyless:
        trusted_root_file: /etc/sigstore/trusted_root.json
        identity: https://github.com/acme/specs/.github/workflows/release.yml@refs/heads/main
        identity_regexp: "https://github.com/acme/.*"
        issuer_regexp: "(unclosed"
  - name: index
    type: http
    http: {url: "https://example.com/index.yaml"}
    verify:
      keys: [{pem_file: /etc/keys/k.pub}]
  - name: bundled
    type: dir
    dir: {embedded: true}
    verify: {keys: [{pem_file: /etc/keys/k.pub}]}
  - name: charts
    type: helm
    helm: {url: "https://charts.example.com"}
    verify: {keys: [{pem_file: /etc/keys/k.pub}]}
  - name: empty
    type: oci
    oci: {host: registry.example.com}
    verify: {keyless: {trusted_root_file: /r.json}, colour: red}
  - name: repo
    type: git
    git: {url: "https://github.com/acme/specs.git", ref: main, paths: ["specs/*.yaml"]}
    verify: {keys: [{pem_file: /etc/keys/k.pub}]}
`
	res := config.Check([]byte(src), "f.yaml", ".")
	got := map[int]string{}
	for _, p := range res.Problems {
		got[p.Line] += p.Message + "|"
	}
	for line, want := range map[int]string{
		8:  `registries[0] (signed): verify.keys[1].pem_env "not a name" is not an environment variable name`,
		9:  "registries[0] (signed): verify.keys[2]: pem_env and pem_file are both set",
		13: "registries[0] (signed): verify.keyless.identity_regexp: identity is set too",
		14: `registries[0] (signed): verify.keyless.issuer_regexp "(unclosed" is not a regular expression`,
		18: "registries[1] (index): verify: not for a source of type http",
		23: "registries[2] (bundled): verify: not for a source of type dir",
		27: "registries[3] (charts): verify.keys and verify.keyless are not for a helm chart repository",
		31: "registries[4].verify.colour: unknown field",
		35: "registries[5] (repo): verify: not for a source of type git",
	} {
		if !strings.Contains(got[line], want) {
			t.Errorf("line %d: got %q, want %q", line, got[line], want)
		}
	}
	// The last registry's keyless lacks an identity and an issuer: both
	// said, at the keyless block's line.
	if !strings.Contains(got[31], "verify.keyless: identity or identity_regexp is required") ||
		!strings.Contains(got[31], "verify.keyless: issuer or issuer_regexp is required") {
		t.Errorf("line 31: %q, want the missing identity and issuer", got[31])
	}
	if len(res.Problems) != 11 {
		t.Errorf("%d problems, want 11: %+v", len(res.Problems), res.Problems)
	}

	// Load stops at the block too, naming the registry.
	if _, err := config.Parse([]byte(src[:strings.Index(src, "  - name: index")]), "f.yaml", "."); err == nil || !strings.Contains(err.Error(), "registries[0] (signed): verify.keys[1].pem_env") {
		t.Errorf("Parse: %v, want the first registry's verify problems", err)
	}

	good := `registries:
  - name: signed
    type: oci
    oci: {host: registry.example.com}
    verify:
      keys: [{pem_env: COSIGN_KEY}, {pem_file: /etc/keys/old/cosign.pub}]
      keyless:
        trusted_root_file: /etc/sigstore/trusted_root.json
        identity_regexp: "https://github.com/acme/.*"
        issuer: https://token.actions.githubusercontent.com
  - name: charts
    type: helm
    helm: {host: registry.example.com, prefix: charts}
    verify: {keys: [{pem_env: COSIGN_KEY}]}
`
	if r := config.Check([]byte(good), "f.yaml", "."); !r.OK() {
		t.Errorf("a good file: %+v", r.Problems)
	}
	cfg, err := config.Parse([]byte(good), "f.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	v := cfg.Registries[0].Verify
	if v == nil || len(v.Keys) != 2 || v.Keyless == nil || v.Keyless.Issuer != "https://token.actions.githubusercontent.com" {
		t.Errorf("loaded verify block %+v", v)
	}
	envs, files := v.SecretRefs()
	if strings.Join(envs, ",") != "COSIGN_KEY" || strings.Join(files, ",") != "/etc/keys/old/cosign.pub,/etc/sigstore/trusted_root.json" {
		t.Errorf("secret refs %v %v", envs, files)
	}
}

// A chart repository takes verify.provenance (a keyring) and nothing
// else; provenance on any other source is refused, saying why; each
// problem at its field's line.
func TestCheckVerifyProvenance(t *testing.T) {
	t.Parallel()
	src := `registries:
  - name: charts
    type: helm
    helm: {url: "https://charts.example.com"}
    verify:
      provenance: {keyring_file: /etc/keys/helm.asc}
  - name: images
    type: oci
    oci: {host: registry.example.com}
    verify:
      provenance: {keyring_env: HELM_KEYRING}
  - name: oci-charts
    type: helm
    helm: {host: registry.example.com, prefix: charts}
    verify:
      provenance: {keyring_env: HELM_KEYRING}
  - name: both
    type: helm
    helm: {url: "https://charts.example.com"}
    verify:
      provenance: {keyring_env: "not a name", keyring_file: /k.asc}
  - name: neither
    type: helm
    helm: {url: "https://charts.example.com"}
    verify:
      provenance: {}
  - name: unknown
    type: helm
    helm: {url: "https://charts.example.com"}
    verify:
      provenance: {keyring: /k.asc}
  - name: bad-name
    type: helm
    helm: {url: "https://charts.example.com"}
    verify:
      provenance: {keyring_env: "not a name"}
  - name: mixed
    type: helm
    helm: {url: "https://charts.example.com"}
    verify:
      keys: [{pem_file: /etc/keys/k.pub}]
      provenance: {keyring_env: HELM_KEYRING}
`
	res := config.Check([]byte(src), "f.yaml", ".")
	got := map[int]string{}
	for _, p := range res.Problems {
		got[p.Line] += p.Message + "|"
	}
	for line, want := range map[int]string{
		11: "registries[1] (images): verify.provenance: not for a source of type oci: it checks the .prov files beside a helm chart repository's archives",
		16: "registries[2] (oci-charts): verify.provenance: not for a source of type helm",
		21: "registries[3] (both): verify.provenance: keyring_env and keyring_file are both set; set only one",
		26: "registries[4] (neither): verify.provenance: set keyring_env or keyring_file",
		31: "registries[5].verify.provenance.keyring: unknown field",
		36: `registries[6] (bad-name): verify.provenance.keyring_env "not a name" is not an environment variable name`,
		41: "registries[7] (mixed): verify.keys and verify.keyless are not for a helm chart repository",
		42: "registries[7] (mixed): verify.provenance: not with keys or keyless",
	} {
		if !strings.Contains(got[line], want) {
			t.Errorf("line %d: got %q, want %q", line, got[line], want)
		}
	}
	if strings.Contains(got[6], "charts") || got[5] != "" {
		t.Errorf("the chart repository's provenance block is refused: %q %q", got[5], got[6])
	}
	if len(res.Problems) != 8 {
		t.Errorf("%d problems, want 8: %+v", len(res.Problems), res.Problems)
	}

	good := src[:strings.Index(src, "  - name: images")]
	if r := config.Check([]byte(good), "f.yaml", "."); !r.OK() {
		t.Fatalf("a chart repository with verify.provenance: %+v", r.Problems)
	}
	cfg, err := config.Parse([]byte(good), "f.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	v := cfg.Registries[0].Verify
	if v == nil || v.Provenance == nil || v.Provenance.KeyringFile != "/etc/keys/helm.asc" {
		t.Fatalf("loaded verify block %+v", v)
	}
	if envs, files := v.SecretRefs(); len(envs) != 0 || strings.Join(files, ",") != "/etc/keys/helm.asc" {
		t.Errorf("secret refs %v %v, want the keyring file", envs, files)
	}
}
