package policy_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/verify/policy"
)

// Terraform makes a secret of every key of verify.keys[*] and
// verify.keyless that ends in _env or _file (terraform/registries.tf):
// those must be exactly what SecretRefs names, so that what the code
// reads at fetch time is what terraform mounts.
func TestSecretFieldsFollowTerraformsConvention(t *testing.T) {
	t.Parallel()
	p := policy.Policy{
		Keys: []policy.Key{{PEMEnv: "v-keys-env"}, {PEMFile: "v-keys-file"}},
		Keyless: &policy.Keyless{
			TrustedRootFile: "v-root-file", Identity: "v-identity", IdentityRegexp: "v-identity-re",
			Issuer: "v-issuer", IssuerRegexp: "v-issuer-re",
		},
		// Never with keys at once (Validate), but SecretRefs names both.
		Provenance: &policy.Provenance{KeyringEnv: "v-keyring-env", KeyringFile: "v-keyring-file"},
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Keys       []map[string]string `json:"keys"`
		Keyless    map[string]string   `json:"keyless"`
		Provenance map[string]string   `json:"provenance"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var tfEnvs, tfFiles []string
	for _, m := range append(doc.Keys, doc.Keyless, doc.Provenance) {
		for k, v := range m {
			switch {
			case strings.HasSuffix(k, "_env"):
				tfEnvs = append(tfEnvs, v)
			case strings.HasSuffix(k, "_file"):
				tfFiles = append(tfFiles, v)
			case strings.Contains(k, "pem") || strings.Contains(k, "key") || strings.Contains(k, "root"):
				t.Errorf("field %s names key material but ends in neither _env nor _file: terraform would not make it a secret", k)
			}
		}
	}
	envs, files := p.SecretRefs()
	slices.Sort(envs)
	slices.Sort(files)
	slices.Sort(tfEnvs)
	slices.Sort(tfFiles)
	if !slices.Equal(envs, tfEnvs) || !slices.Equal(files, tfFiles) {
		t.Errorf("SecretRefs %v %v; terraform's convention finds %v %v", envs, files, tfEnvs, tfFiles)
	}
}
