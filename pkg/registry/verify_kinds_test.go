package registry_test

import (
	"encoding/json"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/verify/policy"
)

// verifyBlocks are, by type, a block whose entries are OCI manifests
// (its source applies the registry's verify block), or "" for a type
// whose entries are not (pkg/config refuses verify on it, saying why).
// A new kind says which it is here.
var verifyBlocks = map[string]string{
	"oci":       `{"host": "registry.example"}`,
	"dockerhub": `{"namespace": "acme"}`,
	"ghcr":      `{"owner": "acme", "owner_type": "org", "auth": {"type": "token", "token_env": "GH_TOKEN"}}`,
	"helm":      `{"host": "registry.example"}`,
	"quay":      `{"namespace": "acme"}`,
	"http":      "",
	"dir":       "",
	"git":       "",
}

// Every kind whose entries are OCI manifests builds its source with the
// registry's verify block (BuildContext.Verify): a block that dropped it
// would publish unsigned entries under a verify block.
func TestEveryOCIKindBuildsWithVerify(t *testing.T) {
	p := &policy.Policy{Keys: []policy.Key{{PEMEnv: "SOME_KEY"}}}
	for _, k := range registry.Kinds() {
		raw, ok := verifyBlocks[k.Type]
		if !ok {
			t.Errorf("kind %s: say in verifyBlocks whether its entries are OCI manifests (a minimal block) or not (\"\")", k.Type)
			continue
		}
		if raw == "" {
			continue
		}
		b := k.New()
		if err := json.Unmarshal([]byte(raw), b); err != nil {
			t.Fatalf("%s: %v", k.Type, err)
		}
		src, err := b.Build(registry.BuildContext{Verify: p})
		if err != nil {
			t.Fatalf("%s: build: %v", k.Type, err)
		}
		got, known := registry.VerifyPolicyOf(src)
		if !known || got != p {
			t.Errorf("%s: the built source applies verify %v (known %v), want the registry's", k.Type, got, known)
		}
	}
}
