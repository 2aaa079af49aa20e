package registry

import (
	"testing"

	"github.com/specsync/specsync/pkg/verify/policy"
)

// VerifyPolicyOf is the verify policy a built source applies, and
// whether the source is one that knows of verify at all.
func VerifyPolicyOf(src Source) (*policy.Policy, bool) {
	switch s := src.(type) {
	case *OCI:
		return s.cfg.Verify, true
	case *DockerHub:
		return s.oci.cfg.Verify, true
	case *GHCR:
		return s.oci.cfg.Verify, true
	case *Quay:
		return s.oci.cfg.Verify, true
	case *Helm:
		return s.cfg.Verify, true
	}
	return nil, false
}

// UnlinkVerifier makes this test binary one that does not link
// pkg/verify, until t ends. Only a test that does not run in parallel
// may call it: the parallel tests wait until it has ended.
func UnlinkVerifier(t testing.TB) {
	verifierMu.Lock()
	saved := verifierLoader
	verifierLoader = nil
	verifierMu.Unlock()
	t.Cleanup(func() {
		verifierMu.Lock()
		verifierLoader = saved
		verifierMu.Unlock()
	})
}
