package policy

import (
	"errors"
	"fmt"
)

// Signer is who signed a verified manifest: a keyless signature's
// certificate identity and OIDC issuer, or the fingerprint of the key
// (Fingerprint).
type Signer struct {
	Identity string `json:"identity,omitempty" firestore:"identity,omitempty"`
	Issuer   string `json:"issuer,omitempty" firestore:"issuer,omitempty"`
	Key      string `json:"key,omitempty" firestore:"key,omitempty"`
}

func (s Signer) String() string {
	if s.Key != "" {
		return "key " + s.Key
	}
	return s.Identity + " (issuer " + s.Issuer + ")"
}

// Result is a verified manifest: its digest, who signed it and where the
// signature was found (ViaReferrers, ViaTag).
type Result struct {
	Digest string `json:"digest" firestore:"digest"`
	Signer Signer `json:"signer" firestore:"signer"`
	Via    string `json:"via" firestore:"via"`
}

// Reason is why a manifest is refused.
type Reason int

// Reasons, from the least to the most telling: when several signatures
// are refused, the error gives the most telling reason found.
const (
	// Missing: no signature of the digest was found.
	Missing Reason = iota
	// Invalid: a signature that does not verify (unreadable, altered,
	// a certificate the trusted root does not chain to, no log entry).
	Invalid
	// OtherDigest: a signature of another manifest.
	OtherDigest
	// Untrusted: a valid signature by an identity or key the policy
	// does not accept.
	Untrusted
)

func (r Reason) String() string {
	return [...]string{"missing", "invalid", "other_digest", "untrusted"}[r]
}

// Rejection is why a manifest is not verified: the entry's own error,
// exactly like a bad label. pkg/verify's Verify returns it wrapped as failure.Invalid.
type Rejection struct {
	Digest string
	Reason Reason
	// Detail is one line on the most telling signature refused.
	Detail string
	// Prov is where a chart archive's Helm provenance file was looked
	// for (Digest is then the archive's); "" for an OCI manifest.
	Prov string
}

func (r *Rejection) Error() string {
	what, looked := "manifest", "referrers or cosign's .sig tag"
	if r.Prov != "" {
		what, looked = "archive", r.Prov+": "+r.Detail
	}
	switch r.Reason {
	case Missing:
		return fmt.Sprintf("unsigned: no signature of %s found (%s)", r.Digest, looked)
	case OtherDigest:
		return fmt.Sprintf("signature refused: %s signs another %s (%s)", r.Digest, what, r.Detail)
	case Untrusted:
		return fmt.Sprintf("signature refused: %s is signed, but not by whom verify accepts (%s)", r.Digest, r.Detail)
	default:
		return fmt.Sprintf("signature refused: %s has no signature that verifies (%s)", r.Digest, r.Detail)
	}
}

// Rejected returns the rejection in err's chain: the entry error pkg/verify's
// Verify returns (failure.Invalid), nil for a fetch failure.
func Rejected(err error) *Rejection {
	var r *Rejection
	if errors.As(err, &r) {
		return r
	}
	return nil
}
