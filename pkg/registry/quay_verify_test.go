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

// A signature's push (hooks mark it Referrer: Quay's updated_tags holds
// cosign's sha256-<hex>.sig) names the repository's entry when the source
// verifies, and nothing when it does not; a deleted one names nothing.
func TestQuaySelectsASignaturePushWhenItVerifies(t *testing.T) {
	t.Parallel()
	sig := registry.Change{Repository: "acme/tools/db", Tag: "sha256-" + strings.Repeat("ab", 32) + ".sig", Referrer: true}
	for _, c := range []struct {
		name   string
		verify bool
		change registry.Change
		entry  string
	}{
		{"verifying", true, sig, "tools/db"},
		{"not verifying", false, sig, ""},
		{"verifying, another namespace", true, registry.Change{Repository: "other/db", Tag: sig.Tag, Referrer: true}, ""},
		{"verifying, deleted", true, registry.Change{Repository: "acme/tools/db", Tag: sig.Tag, Referrer: true, Deleted: true}, ""},
	} {
		cfg := registry.QuayConfig{Namespace: "acme"}
		if c.verify {
			cfg.Verify = verifytest.Policy(t, verifytest.NewKey(t))
		}
		q, err := registry.NewQuay(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := q.Select(c.change); e != c.entry || ok != (c.entry != "") {
			t.Errorf("%s: Select(%+v) = %q, %v; want %q", c.name, c.change, e, ok, c.entry)
		}
	}
}
