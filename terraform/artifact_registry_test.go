package terraform_test

// Artifact Registry read with the reconcile function's own identity
// (auth.type: google): a reader grant per repository the variable names,
// to the reconcile function's account alone, and no secret.

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/specsync/specsync/pkg/registry"
)

// arRepositories: one in the module's project, one in another.
var arRepositories = []string{"europe/specs", "shared-images/us-central1/team-images"}

func TestArtifactRegistryReaders(t *testing.T) {
	m := evaluated(t, map[string]cty.Value{"artifact_registry_repositories": ctyFromGo(arRepositories)})
	fns := functionsByEntryPoint(t, m)
	reconcile := "serviceAccount:" + fns["Reconcile"].one("service_config").str("service_account_email")
	var got []string
	for _, b := range bindingsOf(t, m) {
		if b.Role != "roles/artifactregistry.reader" {
			continue
		}
		if b.Member != reconcile {
			t.Errorf("%s grants the Artifact Registry reader role to %s, want the reconcile function's account %s", b.Addr, b.Member, reconcile)
		}
		got = append(got, b.Scope)
	}
	sort.Strings(got)
	want := []string{"arrepository:shared-images/us-central1/team-images", "arrepository:" + testProject + "/europe/specs"}
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reader grants on %v, want %v", got, want)
	}

	// None by default.
	for _, b := range bindingsOf(t, evaluated(t, nil)) {
		if strings.HasPrefix(b.Scope, "arrepository:") {
			t.Errorf("%s: a reader grant without artifact_registry_repositories", b.Addr)
		}
	}

	for _, bad := range [][]string{
		{"specs"}, {"Europe/specs"}, {"europe/specs/"}, {"europe/Specs"}, {"europe/-specs"},
		{"a-project/europe/specs/extra"}, {"x/europe/specs"},
		{"europe/specs", testProject + "/europe/specs"},
	} {
		bm, err := loadModule(".", inputs(map[string]cty.Value{"artifact_registry_repositories": ctyFromGo(bad)}))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(bm.errs, "\n"), "variable artifact_registry_repositories validation") {
			t.Errorf("artifact_registry_repositories accepts %q", bad)
		}
	}
}

// The registries of the reference file that use auth.type: google (an
// Artifact Registry repository) get no secret: they name none, and the
// module derives secrets from the names alone (TestSecrets compares every
// secret with what the Go code reads).
func TestGoogleAuthNeedsNoSecret(t *testing.T) {
	for k, v := range referenceEnv {
		t.Setenv(k, v)
	}
	m := evaluated(t, nil)
	google := 0
	auths := m.localVals["registry_auths"]
	if auths == cty.NilVal || !auths.CanIterateElements() {
		t.Fatal("no local registry_auths: secrets.tf no longer reads the auth blocks as this test expects")
	}
	for it := auths.ElementIterator(); it.Next(); {
		_, a := it.Element()
		if !a.Type().IsObjectType() || !a.Type().HasAttribute("type") || asString(a.GetAttr("type")) != registry.AuthGoogle {
			continue
		}
		google++
		for k := range a.Type().AttributeTypes() {
			if k != "type" {
				t.Errorf("a google auth of the reference file names %s", k)
			}
		}
	}
	if google == 0 {
		t.Fatalf("%s has no registry with auth type google: the check would be vacuous", referenceRegistries)
	}
	g := loadGoRegistries(t)
	if got, want := len(m.ofType("google_secret_manager_secret")), 2+len(g.SecretEnvs)+len(g.SecretFiles)+len(g.HookSecretEnvs)+len(g.HookSecretFiles); got != want {
		t.Errorf("%d secrets, want %d: the admin token, the broker password, the non-google registries' credentials and the hooks' secrets", got, want)
	}
}
