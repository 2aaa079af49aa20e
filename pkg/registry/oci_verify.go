package registry

// Verification, the one step between reading a manifest and offering its
// spec, for every source whose entries are OCI manifests (oci, dockerhub,
// ghcr, helm charts in an OCI registry): with a verify block, an entry is
// offered only once a signature of its manifest digest satisfies the
// policy (pkg/verify, registered as the Verifier: verifier.go), and carries who signed it (spec.Provenance).
//
// What it costs stays with what moved. A verified digest is recorded in
// the entry's Upstream with the digest of the policy (Verifier's
// Digest), so an unchanged listing is still known from tag lookups alone,
// and a run's hint gives an unchanged entry back without a signature
// lookup; a warm instance remembers each digest it verified. A policy that
// accepts something else changes every Upstream, so every entry is
// verified again. A refused entry has no Upstream: the signature may be
// pushed after the image (cosign signs by digest, after the push), so it
// is looked up again on every run that reads.

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/verify/policy"
)

// verifiedDigests is what a source remembers of the digests it verified:
// the result, under the policy digest it was verified with.
type verifiedDigests struct {
	mu sync.Mutex
	m  map[string]verifiedDigest
}

type verifiedDigest struct {
	policy string
	result policy.Result
}

func (vd *verifiedDigests) get(digest, by string) (policy.Result, bool) {
	vd.mu.Lock()
	defer vd.mu.Unlock()
	r, ok := vd.m[digest]
	return r.result, ok && r.policy == by
}

func (vd *verifiedDigests) put(digest, by string, r policy.Result) {
	vd.mu.Lock()
	defer vd.mu.Unlock()
	if vd.m == nil {
		vd.m = map[string]verifiedDigest{}
	}
	vd.m[digest] = verifiedDigest{by, r}
}

// prune keeps the digests a complete fetch saw.
func (vd *verifiedDigests) prune(keep map[string]bool) {
	vd.mu.Lock()
	defer vd.mu.Unlock()
	if vd.m != nil {
		pruneCache(new(sync.Mutex), vd.m, keep)
	}
}

// loadVerifier loads the policy into c, once a fetch, and only when the
// fetch found a manifest to verify. Its error (a key or trusted root
// that cannot be read) fails the fetch: nothing is marked. A binary with
// no verifier linked fails every fetch of a registry with a verify
// block, found or not: it can never honour the block.
func loadVerifier(c *conn, p *policy.Policy, found bool) error {
	if p == nil || c.verifier != nil {
		return nil
	}
	if !verifierLinked() {
		_, err := c.fail(fmt.Errorf("%s: verify: %w", c.where, ErrVerifierNotLinked))
		return err
	}
	if !found {
		return nil
	}
	v, err := newVerifier(*p)
	if err != nil {
		_, err = c.fail(fmt.Errorf("%s: verify: %w", c.where, err))
		return err
	}
	c.verifier = v
	return nil
}

// upstream is the Upstream of an entry read at a manifest digest in this
// fetch: with verify, it names the policy too.
func (c *conn) upstream(digest string) string {
	if c.verifier == nil {
		return upstreamOf(digest)
	}
	return upstreamOf(digest) + " verify " + c.verifier.Digest()
}

// verifyEntry verifies the manifest digest an entry's spec was read from
// (in repository repo), unless this source verified it under the same
// policy before. Verified, the spec carries its provenance. Refused, the
// spec is that entry's error and the entry has no Upstream (fixed by a
// signature pushed later). fatal is a lookup that failed (a 5xx, a
// timeout): the fetch's failure.
func verifyEntry(ctx context.Context, c *conn, seen *verifiedDigests, repo name.Repository, digest string, e *Entry, what string) (fatal error) {
	if c.verifier == nil || e.Spec == nil {
		return nil
	}
	by := c.verifier.Digest()
	res, ok := seen.get(digest, by)
	if !ok {
		h, err := v1.NewHash(digest)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		// The fetch's puller: its ping and token serve the lookups too.
		res, err = c.verifier.Verify(ctx, repo, h, append(c.opts, remote.Reuse(c.puller))...)
		if policy.Rejected(err) != nil {
			e.Spec, e.Upstream = nil, ""
			e.Err = fmt.Errorf("%s: %w", what, err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		seen.put(digest, by, res)
	}
	e.Spec.Provenance = &spec.Provenance{Digest: res.Digest, Identity: res.Signer.Identity, Issuer: res.Signer.Issuer, Key: res.Signer.Key}
	return nil
}
