//go:build deploycheck

package terraform_test

// Secrets: one per credential, created empty, written only write-only,
// and the credentials' digests checked against the secrets written.

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// secretSettings are the settings that hold secrets; they must come from
// Secret Manager, never from a plain environment variable. Each may also be
// given as its SHA-256 digest (KEY_SHA256) or a file (KEY_FILE) where the
// code reads those.
var secretSettings = map[string]bool{"SPECSYNC_ADMIN_TOKEN": true, "SPECSYNC_BROKER_PASSWORD": true}

// testCredentials are the credentials whose digests the tests give the
// module (inputs).
var testCredentials = map[string]string{
	"SPECSYNC_ADMIN_TOKEN":     "test-admin-token-0123456789abcdef",
	"SPECSYNC_BROKER_PASSWORD": "test-broker-password-0123456789ab",
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// secretIDOf is the Secret Manager id of the secret keyed key.
func secretIDOf(t *testing.T, m *module, key string) string {
	t.Helper()
	s := m.instance("google_secret_manager_secret.credential", key)
	if s == nil {
		t.Fatalf("no secret for %s", key)
	}
	return s.str("secret_id")
}

func TestSecrets(t *testing.T) {
	m := evaluated(t, nil)
	g := loadGoRegistries(t)
	var got []string
	for _, s := range m.ofType("google_secret_manager_secret") {
		got = append(got, s.Key)
		if s.one("replication") == nil {
			t.Errorf("%s has no replication", s.addr())
		}
	}
	want := append([]string{"SPECSYNC_ADMIN_TOKEN", "SPECSYNC_BROKER_PASSWORD"}, append(g.SecretEnvs, g.SecretFiles...)...)
	want = append(want, append(g.HookSecretEnvs, g.HookSecretFiles...)...)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("secrets %v, want %v (the credentials and every registry credential the config names)", got, want)
	}
	// Created empty: no version unless asked, and never a value in the state.
	if n := len(m.ofType("google_secret_manager_secret_version")); n != 0 {
		t.Errorf("%d secret versions by default; secrets are created empty", n)
	}
	for name, body := range m.bodies {
		walkAttrs(body, func(a *hclsyntax.Attribute) {
			if a.Name == "secret_data" {
				t.Errorf("%s: secret_data would store a value in the state; use secret_data_wo", name)
			}
		})
	}
	sv := m.variables["secret_values"]
	for _, flag := range []string{"ephemeral", "sensitive"} {
		a, ok := sv.Body.Attributes[flag]
		if v, _ := a.Expr.Value(nil); !ok || v.False() {
			t.Errorf("variable secret_values must be %s", flag)
		}
	}
	// With write_secrets, one write-only version per secret named.
	values := map[string]string{}
	for _, k := range want {
		values[k] = "value-of-" + k + "-0123456789"
		if c, ok := testCredentials[k]; ok {
			values[k] = c // must match the digest the catalog gets
		}
	}
	w := evaluated(t, map[string]cty.Value{"write_secrets": ctyFromGo(want), "secret_values": ctyFromGo(values)})
	versions := w.ofType("google_secret_manager_secret_version")
	if len(versions) != len(want) {
		t.Errorf("%d initial versions, want %d", len(versions), len(want))
	}
	for _, v := range versions {
		if v.str("secret_data_wo") != values[v.Key] {
			t.Errorf("%s does not write its secret's value", v.addr())
		}
	}
	for name, v := range w.outVals {
		for _, secret := range values {
			if strings.Contains(v.GoString(), secret) {
				t.Errorf("output %s exposes a secret value", name)
			}
		}
	}
	// A written credential whose digest is not the one the catalog checks
	// would lock every caller out: the plan fails instead.
	for key, variable := range map[string]string{"SPECSYNC_BROKER_PASSWORD": "broker_password_sha256", "SPECSYNC_ADMIN_TOKEN": "admin_token_sha256"} {
		wrong := map[string]string{key: testCredentials[key] + "-not-the-hashed-one"}
		bad, err := loadModule(".", inputs(map[string]cty.Value{"write_secrets": ctyFromGo([]string{key}), "secret_values": ctyFromGo(wrong)}))
		if err != nil {
			t.Fatal(err)
		}
		if joined := strings.Join(bad.errs, "\n"); !strings.Contains(joined, key) || !strings.Contains(joined, variable) {
			t.Errorf("writing a %s that does not match %s does not fail the plan: %v", key, variable, bad.errs)
		}
	}
	// The digests are plain inputs: not secrets (the catalog's environment
	// holds them), so not marked sensitive, which would only hide them
	// from the plan while suggesting they need protecting.
	for _, name := range []string{"broker_password_sha256", "admin_token_sha256"} {
		v, ok := m.variables[name]
		if !ok {
			t.Errorf("no variable %s", name)
			continue
		}
		for _, flag := range []string{"sensitive", "ephemeral"} {
			if a, ok := v.Body.Attributes[flag]; ok {
				if val, _ := a.Expr.Value(nil); val.True() {
					t.Errorf("variable %s is %s; a digest is neither", name, flag)
				}
			}
		}
		if _, ok := v.Body.Attributes["default"]; ok {
			t.Errorf("variable %s has a default; every deployment needs its own credentials", name)
		}
	}
	// A secret that does not exist cannot be written.
	bad, err := loadModule(".", inputs(map[string]cty.Value{"write_secrets": ctyFromGo([]string{"NO_SUCH_SECRET"}), "secret_values": ctyFromGo(map[string]string{"NO_SUCH_SECRET": "x"})}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(bad.errs, "\n"), "NO_SUCH_SECRET") {
		t.Errorf("writing an unknown secret does not fail the plan: %v", bad.errs)
	}
}

func walkAttrs(b *hclsyntax.Body, f func(*hclsyntax.Attribute)) {
	for _, a := range b.Attributes {
		f(a)
	}
	for _, nb := range b.Blocks {
		walkAttrs(nb.Body, f)
	}
}
