package verify

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/specsync/specsync/pkg/verify/policy"
)

// Digest names what the verifier accepts: its keys (by fingerprint, not
// by where they are read from), the keyless identity and the trusted
// root's content, the provenance keyring's keys. A source puts it in every entry's Upstream, so that a
// verification recorded under one policy is never taken for another: a
// key removed (rotated out, revoked) or another identity re-verifies every
// entry, while moving a key from one secret to another re-verifies none.
func (v *Verifier) Digest() string { return v.digest }

// materialDigest is the Digest of the policy p loaded as v.
func materialDigest(p policy.Policy, v *Verifier) (string, error) {
	var d struct {
		Keys    []string        `json:"keys,omitempty"`
		Keyless *policy.Keyless `json:"keyless,omitempty"`
		Root    string          `json:"root,omitempty"`
		// Provenance: the keyring's keys (keyring.sums). Absent
		// (omitempty), a policy digests as before the field existed.
		Provenance []string `json:"provenance,omitempty"`
	}
	for _, k := range v.keys {
		d.Keys = append(d.Keys, k.fingerprint)
	}
	// The order keys are listed in, and a key listed twice, accept
	// nothing more.
	slices.Sort(d.Keys)
	d.Keys = slices.Compact(d.Keys)
	if v.keyring != nil {
		d.Provenance = slices.Compact(slices.Sorted(slices.Values(v.keyring.sums)))
	}
	if kl := p.Keyless; kl != nil {
		c := *kl
		c.TrustedRootFile = "" // where it is read from accepts nothing more
		d.Keyless = &c
		b, err := os.ReadFile(kl.TrustedRootFile)
		if err != nil {
			return "", fmt.Errorf("verify.keyless.trusted_root_file %s: %w", kl.TrustedRootFile, err)
		}
		d.Root = hex.EncodeToString(sha256Sum(b))
	}
	b, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(sha256Sum(b))[:32], nil
}
