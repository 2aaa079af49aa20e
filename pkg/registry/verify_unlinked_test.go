package registry_test

import (
	"errors"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// A binary that does not link pkg/verify (the operator CLI links only
// the block's shape) cannot honour a verify block: a fetch of a registry
// with one fails whole, saying so, rather than publish entries nobody
// checked. Not parallel: it unlinks the verifier of the whole binary.
func TestVerifyWithoutVerifierLinkedFailsClosed(t *testing.T) {
	reg := newDistribution(t, nil)
	owner := verifytest.NewKey(t)
	d := reg.pushSpec(t, "svc", specYAML("svc"))
	owner.Sign(t, reg.repoOf(t, "svc"), hashOf(t, d))
	src := reg.oci(t, registry.OCIConfig{Verify: verifytest.Policy(t, owner)})

	registry.UnlinkVerifier(t)
	err := fetchFails(t, src, "verify", "not linked into this binary")
	if !errors.Is(err, registry.ErrVerifierNotLinked) {
		t.Errorf("fetch error %v, want registry.ErrVerifierNotLinked", err)
	}
}
