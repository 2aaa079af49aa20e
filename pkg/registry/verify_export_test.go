package registry

import "github.com/specsync/specsync/pkg/verify"

// VerifyPolicyOf is the verify policy a built source applies, and
// whether the source is one that knows of verify at all.
func VerifyPolicyOf(src Source) (*verify.Policy, bool) {
	switch s := src.(type) {
	case *OCI:
		return s.cfg.Verify, true
	case *DockerHub:
		return s.oci.cfg.Verify, true
	case *GHCR:
		return s.oci.cfg.Verify, true
	case *Helm:
		return s.cfg.Verify, true
	}
	return nil, false
}
