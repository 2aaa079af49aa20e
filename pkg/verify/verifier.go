package verify

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	sigsig "github.com/sigstore/sigstore/pkg/signature"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/verify/policy"
)

// Verifier checks signatures against a Policy with its key material
// read (Load).
type Verifier struct {
	keys    []publicKey
	keyless *keylessVerifier
	// keyring is verify.provenance's (helmprov.go).
	keyring *keyring
	digest  string
}

// publicKey is a configured key, its sigstore-go verifier and the
// fingerprint a Signer names it by.
type publicKey struct {
	fingerprint string
	verifier    *sgverify.Verifier
}

type keylessVerifier struct {
	verifier *sgverify.Verifier
	identity sgverify.CertificateIdentity
}

// Load reads the policy's keys and trusted root and builds its
// verifiers. A key or root that cannot be read or parsed is a
// configuration problem of the deployment, not of an entry: its error is
// failure.Precondition (a fetch failure: nothing is marked), naming the
// field and the variable or file, never the material.
func Load(p policy.Policy) (*Verifier, error) {
	if err := p.Validate(); err != nil {
		return nil, failure.Wrap(failure.Invalid, err)
	}
	v := &Verifier{}
	for i, k := range p.Keys {
		at := fmt.Sprintf("verify.keys[%d]", i)
		pemBytes, err := readMaterial(k.PEMEnv, k.PEMFile)
		if err != nil {
			return nil, failure.Wrap(failure.Precondition, fmt.Errorf("%s: %w", at, err))
		}
		keys, err := parsePublicKeys(pemBytes)
		if err != nil {
			return nil, failure.Wrap(failure.Precondition, fmt.Errorf("%s (%s): %w", at, where(k), err))
		}
		for _, pub := range keys {
			pk, err := newPublicKey(pub)
			if err != nil {
				return nil, failure.Wrap(failure.Precondition, fmt.Errorf("%s (%s): %w", at, where(k), err))
			}
			v.keys = append(v.keys, pk)
		}
	}
	if kl := p.Keyless; kl != nil {
		tr, err := root.NewTrustedRootFromPath(kl.TrustedRootFile)
		if err != nil {
			return nil, failure.Wrap(failure.Precondition, fmt.Errorf("verify.keyless.trusted_root_file %s: %w", kl.TrustedRootFile, err))
		}
		opts := []sgverify.VerifierOption{
			// A keyless signature is only as good as the proof of when it
			// was made (the certificate lives minutes): a transparency log
			// entry, and its time or a timestamp authority's.
			sgverify.WithTransparencyLog(1),
			sgverify.WithObserverTimestamps(1),
		}
		if len(tr.CTLogs()) > 0 {
			// The public Sigstore's root lists CT logs, and Fulcio
			// embeds their promise in every certificate: require it
			// wherever the root can check it.
			opts = append(opts, sgverify.WithSignedCertificateTimestamps(1))
		}
		sv, err := sgverify.NewVerifier(tr, opts...)
		if err != nil {
			return nil, failure.Wrap(failure.Precondition, fmt.Errorf("verify.keyless.trusted_root_file %s: %w", kl.TrustedRootFile, err))
		}
		idRe, issRe := kl.IdentityRegexp, kl.IssuerRegexp
		if idRe != "" {
			idRe = policy.Anchored(idRe)
		}
		if issRe != "" {
			issRe = policy.Anchored(issRe)
		}
		id, err := sgverify.NewShortCertificateIdentity(kl.Issuer, issRe, kl.Identity, idRe)
		if err != nil {
			return nil, failure.Wrap(failure.Invalid, fmt.Errorf("verify.keyless: %w", err))
		}
		v.keyless = &keylessVerifier{verifier: sv, identity: id}
	}
	if pv := p.Provenance; pv != nil {
		ring, err := loadKeyring(*pv)
		if err != nil {
			return nil, failure.Wrap(failure.Precondition, err)
		}
		v.keyring = ring
	}
	digest, err := materialDigest(p, v)
	if err != nil {
		return nil, failure.Wrap(failure.Precondition, err)
	}
	v.digest = digest
	return v, nil
}

func where(k policy.Key) string {
	if k.PEMEnv != "" {
		return "env " + k.PEMEnv
	}
	return "file " + k.PEMFile
}

// readMaterial reads an environment variable or a file (a Secret
// Manager volume). Its errors name where, never what.
func readMaterial(env, file string) ([]byte, error) {
	if env != "" {
		v, ok := os.LookupEnv(env)
		if !ok || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("environment variable %s is not set", env)
		}
		return []byte(v), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading %w", err)
	}
	return b, nil
}

// parsePublicKeys reads every PUBLIC KEY block of a PEM document: a file
// may hold several keys (one rotation's old and new).
func parsePublicKeys(b []byte) ([]crypto.PublicKey, error) {
	var out []crypto.PublicKey
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("a PEM block of type %q, want PUBLIC KEY (cosign.pub)", blk.Type)
		}
		pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("a PUBLIC KEY block that does not parse: %w", err)
		}
		out = append(out, pub)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM PUBLIC KEY block found")
	}
	return out, nil
}

func newPublicKey(pub crypto.PublicKey) (publicKey, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return publicKey{}, err
	}
	sum := sha256.Sum256(der)
	sv, err := sigsig.LoadDefaultVerifier(pub)
	if err != nil {
		return publicKey{}, fmt.Errorf("an unsupported public key: %w", err)
	}
	// The bundle's key hint is whatever the signer wrote (or nothing):
	// each configured key is tried on its own, whatever the hint says.
	material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return root.NewExpiringKey(sv, time.Time{}, time.Time{}), nil
	})
	// A key signature needs no timestamp: the key is the owner's, valid
	// until it is taken out of the policy.
	v, err := sgverify.NewVerifier(material, sgverify.WithNoObserverTimestamps())
	if err != nil {
		return publicKey{}, err
	}
	return publicKey{fingerprint: "sha256:" + hex.EncodeToString(sum[:]), verifier: v}, nil
}

// Fingerprint is how a Signer names a public key: SHA-256 of its DER
// (PKIX) encoding, "sha256:<hex>". It reads one PEM PUBLIC KEY block.
func Fingerprint(pemBytes []byte) (string, error) {
	keys, err := parsePublicKeys(pemBytes)
	if err != nil {
		return "", err
	}
	pk, err := newPublicKey(keys[0])
	if err != nil {
		return "", err
	}
	return pk.fingerprint, nil
}
