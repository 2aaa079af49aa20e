package verify

import "github.com/specsync/specsync/pkg/verify/policy"

// The verify block and the results live in pkg/verify/policy, which links
// no sigstore, so that the operator CLI can check a block without linking
// the verifier; these aliases keep this package's callers as they were.
type (
	Policy  = policy.Policy
	Key     = policy.Key
	Keyless = policy.Keyless
	// Provenance is verify.provenance: a chart repository's keyring.
	Provenance = policy.Provenance
	Signer     = policy.Signer
	Result     = policy.Result
	Reason     = policy.Reason
	Rejection  = policy.Rejection
)

// The reasons a manifest is refused (policy.Reason).
const (
	Missing     = policy.Missing
	Invalid     = policy.Invalid
	OtherDigest = policy.OtherDigest
	Untrusted   = policy.Untrusted
)

// Rejected returns the rejection in err's chain (policy.Rejected).
func Rejected(err error) *Rejection { return policy.Rejected(err) }
