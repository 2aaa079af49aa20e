package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/specsync/specsync/pkg/failure"
)

// Verify checks that a signature of the manifest digest in repo
// satisfies the policy. The signatures are looked up with opts (the
// source's transport, auth and retries): referrers first, cosign's
// sha256-<hex>.sig tag only when no referrer signature verifies.
//
// Its error says what the caller does, through failure's kinds:
//   - failure.Invalid, holding a *Rejection: the entry's own error (no
//     signature, none that verifies, another identity or key, another
//     digest): the entry keeps its last verified version;
//   - any other kind: the lookup failed (a 5xx, a timeout, a refused
//     connection, a garbage answer to the lookup): the fetch fails whole
//     and nothing is marked.
func (v *Verifier) Verify(ctx context.Context, repo name.Repository, digest v1.Hash, opts ...remote.Option) (Result, error) {
	opts = discoverCtx(ctx, opts)
	// One puller for the lookup's requests: the registry's ping and
	// token are had once, not once a request.
	p, err := remote.NewPuller(opts...)
	if err != nil {
		return Result{}, lookupFailure("signatures of "+digest.String(), err)
	}
	opts = append(opts, remote.Reuse(p))
	refs, err := referrerSignatures(repo, digest, opts)
	if err != nil {
		return Result{}, err
	}
	res, rej := v.check(digest, refs)
	if rej == nil {
		return res, nil
	}
	tagged, err := tagSignatures(repo, digest, opts)
	if err != nil {
		return Result{}, err
	}
	res, rej2 := v.check(digest, tagged)
	if rej2 == nil {
		return res, nil
	}
	if rej2.Reason > rej.Reason {
		rej = rej2
	}
	return Result{}, failure.Wrap(failure.Invalid, rej)
}

// check returns the first signature the policy accepts, or the most
// telling reason none is.
func (v *Verifier) check(digest v1.Hash, sigs []signature) (Result, *Rejection) {
	worst := &Rejection{Digest: digest.String(), Reason: Missing}
	refuse := func(r Reason, s signature, format string, args ...any) {
		if r > worst.Reason || worst.Reason == Missing {
			worst.Reason = r
			worst.Detail = s.where + ": " + oneLine(fmt.Sprintf(format, args...))
		}
	}
	for _, s := range sigs {
		if s.err != nil {
			refuse(Invalid, s, "%v", s.err)
			continue
		}
		if !slices.Contains(s.claims, digest.String()) {
			refuse(OtherDigest, s, "it signs %s", strings.Join(orNone(s.claims), ", "))
			continue
		}
		signer, reason, err := v.verifyOne(digest, s)
		if err != nil {
			refuse(reason, s, "%v", err)
			continue
		}
		return Result{Digest: digest.String(), Signer: signer, Via: s.via}, nil
	}
	return Result{}, worst
}

// verifyOne verifies one signature with sigstore-go against each key
// and the keyless identity; sigstore-go checks the digest (or payload)
// signed, not only the claim.
func (v *Verifier) verifyOne(digest v1.Hash, s signature) (Signer, Reason, error) {
	artifact := func() sgverify.ArtifactPolicyOption {
		if s.payload != nil {
			return sgverify.WithArtifact(bytes.NewReader(s.payload))
		}
		d, _ := hex.DecodeString(digest.Hex)
		return sgverify.WithArtifactDigest(digest.Algorithm, d)
	}
	vc, err := s.entity.VerificationContent()
	if err != nil {
		return Signer{}, Invalid, err
	}
	leaf := vc.Certificate()
	if leaf == nil {
		if len(v.keys) == 0 {
			return Signer{}, Untrusted, errors.New("signed with a key; verify accepts keyless signatures only")
		}
		for _, k := range v.keys {
			if _, err := k.verifier.Verify(s.entity, sgverify.NewPolicy(artifact(), sgverify.WithKey())); err == nil {
				return Signer{Key: k.fingerprint}, 0, nil
			}
		}
		// A key signature names no key that can be trusted (its hint is
		// the signer's word): another key and an altered payload look
		// alike.
		return Signer{}, Untrusted, fmt.Errorf("verifies with none of the %d keys of verify.keys: signed with another key, or altered since", len(v.keys))
	}
	sum, sumErr := certificate.SummarizeCertificate(leaf)
	who := "an unreadable certificate"
	if sumErr == nil {
		who = fmt.Sprintf("%s (issuer %s)", sum.SubjectAlternativeName, sum.Extensions.Issuer)
	}
	if v.keyless == nil {
		return Signer{}, Untrusted, fmt.Errorf("signed keyless by %s; verify accepts keys only", who)
	}
	res, err := v.keyless.verifier.Verify(s.entity, sgverify.NewPolicy(artifact(), sgverify.WithCertificateIdentity(v.keyless.identity)))
	if err != nil {
		var idErr *sgverify.ErrNoMatchingCertificateIdentity
		if errors.As(err, &idErr) {
			return Signer{}, Untrusted, fmt.Errorf("signed by %s", who)
		}
		return Signer{}, Invalid, fmt.Errorf("signed by %s, which does not verify: %w", who, err)
	}
	c := res.Signature.Certificate
	if c == nil {
		// sigstore-go verified a certificate signature: it summarises
		// it; without a summary nothing says who signed.
		return Signer{}, Invalid, errors.New("verified without a certificate summary")
	}
	return Signer{Identity: c.SubjectAlternativeName, Issuer: c.Extensions.Issuer}, 0, nil
}

func orNone(claims []string) []string {
	if len(claims) == 0 {
		return []string{"no digest it names"}
	}
	return claims
}

// oneLine keeps an error on the one line the status shows.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
