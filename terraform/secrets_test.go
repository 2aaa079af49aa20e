//go:build deploycheck

package terraform_test

// Secrets: one per credential the code names, created empty, written only
// write-only (never in the plan or the state), and the credentials'
// digests checked against the secrets written.

import (
	"archive/zip"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func TestSecrets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sc   scenario
		file string
		env  map[string]string
	}{
		{reference(t), "../" + referenceRegistries, referenceEnv},
		{outside, "", nil},
	} {
		m := planOf(t, c.sc)
		path := c.file
		if path == "" {
			path = writeTemp(t, c.sc)
		}
		g := goRegistriesOf(t, path, c.env)
		var got []string
		for _, s := range m.ofType("google_secret_manager_secret") {
			got = append(got, s.Key)
			if s.one("replication") == nil {
				t.Errorf("%s: %s has no replication", c.sc.name, s.addr())
			}
		}
		// Auth type google names no credential: its sources need none.
		want := append([]string{"SPECSYNC_ADMIN_TOKEN", "SPECSYNC_BROKER_PASSWORD"}, append(g.SecretEnvs, g.SecretFiles...)...)
		want = append(want, append(g.HookSecretEnvs, g.HookSecretFiles...)...)
		sort.Strings(got)
		sort.Strings(want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: secrets %v, want %v (the credentials and every registry credential the config names)", c.sc.name, got, want)
		}
		// Created empty: no version unless asked.
		if n := len(m.ofType("google_secret_manager_secret_version")); n != 0 {
			t.Errorf("%s: %d secret versions by default; secrets are created empty", c.sc.name, n)
		}
	}

	f := parseTF(t, ".")
	for name, body := range f.bodies {
		walkAttrs(body, func(a *hclsyntax.Attribute) {
			if a.Name == "secret_data" {
				t.Errorf("%s: secret_data would store a value in the state; use secret_data_wo", name)
			}
		})
	}
	sv := f.variables["secret_values"]
	for _, flag := range []string{"ephemeral", "sensitive"} {
		a, ok := sv.Body.Attributes[flag]
		if v, _ := a.Expr.Value(nil); !ok || v.False() {
			t.Errorf("variable secret_values must be %s", flag)
		}
	}
	// The digests are plain inputs: not secrets (the catalog's environment
	// holds them), so not marked sensitive, which would only hide them
	// from the plan while suggesting they need protecting.
	for _, name := range []string{"broker_password_sha256", "admin_token_sha256"} {
		v, ok := f.variables[name]
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
}

func walkAttrs(b *hclsyntax.Body, f func(*hclsyntax.Attribute)) {
	for _, a := range b.Attributes {
		f(a)
	}
	for _, nb := range b.Blocks {
		walkAttrs(nb.Body, f)
	}
}

// With write_secrets, one write-only version per secret named, whose
// value is in neither the plan nor anything terraform keeps.
var writeSecrets = scenario{
	name:  "write-secrets",
	files: map[string]string{"registries.yaml": ownRegistries},
	// As a team passes them: an ephemeral variable of the root module,
	// given in the environment at apply time.
	args: `  write_secrets = ["SPECSYNC_ADMIN_TOKEN", "SPECSYNC_BROKER_PASSWORD", "HOOKED_SECRET"]
  secret_values = var.secret_values
`,
	root: `variable "secret_values" {
  type      = map(string)
  sensitive = true
  ephemeral = true
}
`,
	env: []string{`TF_VAR_secret_values={"SPECSYNC_ADMIN_TOKEN":"` + testCredentials["SPECSYNC_ADMIN_TOKEN"] + `","SPECSYNC_BROKER_PASSWORD":"` + testCredentials["SPECSYNC_BROKER_PASSWORD"] + `","HOOKED_SECRET":"hook-secret-value-0123456789"}`},
}

// wrongSecrets: a written credential whose digest is not the one the
// catalog checks would lock every caller out, and a secret that does not
// exist cannot be written: the plan fails instead.
var wrongSecrets = scenario{
	name:  "wrong-secrets",
	files: map[string]string{"registries.yaml": ownRegistries},
	args: `  write_secrets = ["SPECSYNC_ADMIN_TOKEN", "SPECSYNC_BROKER_PASSWORD"]
  secret_values = {
    SPECSYNC_ADMIN_TOKEN     = "` + testCredentials["SPECSYNC_ADMIN_TOKEN"] + `-not-the-hashed-one"
    SPECSYNC_BROKER_PASSWORD = "` + testCredentials["SPECSYNC_BROKER_PASSWORD"] + `-not-the-hashed-one"
  }
`,
}

var unknownSecret = scenario{
	name:  "unknown-secret",
	files: map[string]string{"registries.yaml": ownRegistries},
	args: `  write_secrets = ["NO_SUCH_SECRET"]
  secret_values = { NO_SUCH_SECRET = "x" }
`,
}

func TestWrittenSecretsNeverReachThePlan(t *testing.T) {
	t.Parallel()
	m := planOf(t, writeSecrets)
	versions := m.ofType("google_secret_manager_secret_version")
	var keys []string
	for _, v := range versions {
		keys = append(keys, v.Key)
		if got := v.str("secret_data_wo"); got != "" {
			t.Errorf("%s: the plan holds the secret's value", v.addr())
		}
		if asString(v.Attrs["secret_data_wo_version"]) != "1" {
			t.Errorf("%s: secret_data_wo_version %v, want 1 (a first version)", v.addr(), v.Attrs["secret_data_wo_version"])
		}
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "HOOKED_SECRET,SPECSYNC_ADMIN_TOKEN,SPECSYNC_BROKER_PASSWORD" {
		t.Errorf("initial versions for %v, want the three secrets written", keys)
	}
	// Nowhere terraform writes: the plan file (and every file in it), the
	// state, the plan as JSON.
	if strings.Contains(m.json, testCredentials["SPECSYNC_ADMIN_TOKEN"]) {
		t.Error("the plan's JSON holds a secret value")
	}
	scanned := 0
	err := walkFiles(m.dir, func(path string, b []byte) {
		scanned++
		for _, secret := range []string{testCredentials["SPECSYNC_ADMIN_TOKEN"], testCredentials["SPECSYNC_BROKER_PASSWORD"], "hook-secret-value-0123456789"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds a secret value", path)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 5 {
		t.Fatalf("scanned %d files of the root module: the check would be vacuous", scanned)
	}

	out := flat(planFailure(t, wrongSecrets))
	for key, variable := range map[string]string{"SPECSYNC_BROKER_PASSWORD": "broker_password_sha256", "SPECSYNC_ADMIN_TOKEN": "admin_token_sha256"} {
		if !strings.Contains(out, key+" does not have the SHA-256 "+variable+" says") {
			t.Errorf("writing a %s that does not match %s does not fail the plan:\n%s", key, variable, out)
		}
	}
	if out := flat(planFailure(t, unknownSecret)); !strings.Contains(out, "write_secrets names secrets that do not exist: NO_SUCH_SECRET") {
		t.Errorf("writing an unknown secret does not fail the plan by name:\n%s", out)
	}
}

// walkFiles calls f with every file under dir (the root module: its plan,
// state and terraform's working files), the providers aside, and with
// every file inside a zip archive (a saved plan is one), uncompressed.
func walkFiles(dir string, f func(path string, b []byte)) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(path, "/.terraform/providers/") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f(path, b)
		if z, err := zip.NewReader(bytes.NewReader(b), int64(len(b))); err == nil {
			for _, zf := range z.File {
				r, err := zf.Open()
				if err != nil {
					return err
				}
				inner, err := io.ReadAll(r)
				r.Close()
				if err != nil {
					return err
				}
				f(path+"!"+zf.Name, inner)
			}
		}
		return nil
	})
}
