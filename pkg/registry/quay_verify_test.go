package registry_test

import (
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// A private repository's signatures are read with the robot's pull
// token, as its image is: the lookups ask Quay's token service for the
// repository they read, never anonymously, and the entry is offered
// with who signed it.
func TestQuayVerifiesAPrivateRepository(t *testing.T) {
	t.Parallel()
	rig := newQuayRig(t)
	rig.pushSpec(t, suiteNamespace, "db", specYAML("db"), false)
	owner := verifytest.NewKey(t)
	repo, h, opts := rig.manifest(t, "db")
	owner.Sign(t, repo, h, opts...)
	dir := t.TempDir()
	if err := writeFile(dir+"/robot", quayRobotToken); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(dir+"/oauth", quayOAuthToken); err != nil {
		t.Fatal(err)
	}
	auth := registry.Auth{Type: "basic", Username: quayRobot, PasswordFile: dir + "/robot", TokenFile: dir + "/oauth"}
	l := fetch(t, rig.newSource(t, registry.QuayConfig{Namespace: suiteNamespace, Auth: auth, Verify: verifytest.Policy(t, owner)}))
	en := byName(l)["db"]
	if en.Err != nil || en.Spec == nil || en.Spec.Provenance == nil || en.Spec.Provenance.Key != owner.Fingerprint(t) || en.Spec.Provenance.Digest != h.String() {
		t.Fatalf("a signed private repository: %+v (error %v)\n%s", en.Spec, en.Err, rig.host.log())
	}
	if n := rig.host.count(isSignatureLookup); n == 0 {
		t.Errorf("no signature was looked up through Quay:\n%s", rig.host.log())
	}
	if !strings.Contains(rig.host.log(), "/v2/auth") {
		t.Errorf("the lookups never asked Quay's token service:\n%s", rig.host.log())
	}
}
