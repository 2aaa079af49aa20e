package verify

// Helm provenance: a chart repository's signature of a chart version is
// the file beside its archive, NAME-VERSION.tgz.prov, that `helm package
// --sign` writes: an OpenPGP clearsigned message whose text is the
// chart's Chart.yaml, a line "...", and a YAML document whose files map
// names the archive's file name with "sha256:<hex>" of its bytes
// (https://helm.sh/docs/topics/provenance/). The signature makes the text
// the signer's; the files entry binds it to these archive bytes.

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"sigs.k8s.io/yaml"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/verify/policy"
)

// keyring is verify.provenance's keyring read: its keys, and what the
// policy digest knows them by: the SHA-256 of each key as serialized
// (its subkeys, user ids, self-signatures and revocations with it), so a
// subkey revoked or an expiry changed verifies every chart again, while
// the same keys armored or not, in another secret, verify none again.
type keyring struct {
	entities openpgp.EntityList
	sums     []string
}

// loadKeyring reads verify.provenance's keyring. Its errors name where
// it is read from, never what it holds.
func loadKeyring(pv policy.Provenance) (*keyring, error) {
	where := "env " + pv.KeyringEnv
	if pv.KeyringEnv == "" {
		where = "file " + pv.KeyringFile
	}
	b, err := readMaterial(pv.KeyringEnv, pv.KeyringFile)
	if err != nil {
		return nil, fmt.Errorf("verify.provenance: %w", err)
	}
	ents, err := parseKeyring(b)
	if err != nil {
		return nil, fmt.Errorf("verify.provenance (%s): %w", where, err)
	}
	k := &keyring{entities: ents}
	for _, e := range ents {
		var buf bytes.Buffer
		if err := e.Serialize(&buf); err != nil {
			return nil, fmt.Errorf("verify.provenance (%s): key %s: %w", where, fingerprintOf(e), err)
		}
		k.sums = append(k.sums, hex.EncodeToString(sha256Sum(buf.Bytes())))
	}
	return k, nil
}

// parseKeyring reads an armored keyring (`gpg --export --armor`, or
// several such exports one after the other) or a binary one (`gpg
// --export`, pubring.gpg). GnuPG's keybox (pubring.kbx) is not a keyring
// file: it is refused, saying how to export one.
func parseKeyring(b []byte) (openpgp.EntityList, error) {
	trimmed := bytes.TrimSpace(b)
	var ents openpgp.EntityList
	switch {
	case len(trimmed) >= 12 && string(trimmed[8:12]) == "KBXf":
		return nil, errors.New("a GnuPG keybox (pubring.kbx), not a keyring: export the keys with `gpg --export --armor KEYID...`")
	case bytes.HasPrefix(trimmed, []byte("-----BEGIN ")):
		// Each block is decoded on its own: armor.Decode reads ahead
		// (buffered), so a second Decode on the same reader would find
		// nothing and the keys after the first block would be lost.
		begin := []byte("\n-----BEGIN ")
		for rest := trimmed; len(rest) > 0; {
			one := rest
			if i := bytes.Index(rest[1:], begin); i >= 0 {
				one, rest = rest[:i+2], rest[i+2:]
			} else {
				rest = nil
			}
			blk, err := armor.Decode(bytes.NewReader(one))
			if err != nil {
				return nil, fmt.Errorf("an armored block that does not decode: %w", err)
			}
			if blk.Type != openpgp.PublicKeyType {
				return nil, fmt.Errorf("an armored block of type %q, want %q (`gpg --export --armor`)", blk.Type, openpgp.PublicKeyType)
			}
			got, err := openpgp.ReadKeyRing(blk.Body)
			if err != nil {
				return nil, fmt.Errorf("a public key block that does not parse: %w", err)
			}
			ents = append(ents, got...)
		}
	default:
		got, err := openpgp.ReadKeyRing(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("neither an armored nor a binary OpenPGP keyring: %w", err)
		}
		ents = got
	}
	if len(ents) == 0 {
		return nil, errors.New("no OpenPGP public key found in it (want what `gpg --export --armor KEYID...` writes)")
	}
	for _, e := range ents {
		if e.PrivateKey != nil {
			// A secret key in a function's secret is a signing key one
			// leak away; verifying needs the public half only.
			return nil, fmt.Errorf("key %s is a secret key: give the public keyring (`gpg --export --armor`)", fingerprintOf(e))
		}
	}
	return ents, nil
}

func fingerprintOf(e *openpgp.Entity) string {
	return strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))
}

// KeyringFingerprint is how a Signer names an OpenPGP key: "openpgp:"
// and its primary key's fingerprint in upper-case hex, as `gpg
// --fingerprint` shows it without spaces.
func KeyringFingerprint(e *openpgp.Entity) string { return "openpgp:" + fingerprintOf(e) }

// provFiles is the part of a provenance file's text after "..." that
// specsync reads (helm's provenance.SumCollection).
type provFiles struct {
	Files map[string]string `json:"files"`
}

// VerifyProvenance checks a chart archive's provenance file: prov must be
// a clearsigned message signed by a key of verify.provenance's keyring,
// whose files map names file (the archive's file name) with sum
// ("sha256:<hex>" of the archive bytes read). The Result names sum and
// the signer: its key's fingerprint and user id.
//
// Every refusal is failure.Invalid holding a *Rejection (the chart
// version's own error); prov's retrieval is the caller's.
func (v *Verifier) VerifyProvenance(prov []byte, file, sum string) (Result, error) {
	refuse := func(r Reason, format string, args ...any) (Result, error) {
		return Result{}, failure.Wrap(failure.Invalid, &Rejection{Digest: sum, Reason: r, Detail: oneLine(fmt.Sprintf(format, args...))})
	}
	if v.keyring == nil {
		return refuse(Untrusted, "verify has no provenance keyring; a chart repository is verified with verify.provenance")
	}
	block, _ := clearsign.Decode(prov)
	if block == nil {
		return refuse(Invalid, "not a clearsigned OpenPGP message")
	}
	// A signature packet that does not parse falls to VerifySignature
	// below; the issuer read here only names who signed when refused.
	issuer := issuerOf(prov)
	signer, err := block.VerifySignature(v.keyring.entities, nil)
	switch {
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		return refuse(Untrusted, "signed by key %s, which is not in verify.provenance's keyring", issuer)
	case errors.Is(err, pgperrors.ErrKeyExpired), errors.Is(err, pgperrors.ErrKeyRevoked):
		return refuse(Untrusted, "signed by key %s: %v", issuer, err)
	case err != nil:
		// An altered text (the Chart.yaml part or the files) fails here:
		// the signature covers every byte of it.
		return refuse(Invalid, "signed by key %s, which does not verify: %v", issuer, err)
	}
	text := block.Plaintext
	// Helm writes the Chart.yaml, "\n...\n", then the files document
	// (YAML's document end marker, since a clearsigned text cannot hold
	// "---" at a line's start undisturbed); helm reads the second part.
	parts := bytes.Split(text, []byte("\n...\n"))
	if len(parts) < 2 {
		return refuse(Invalid, "the signed text has no \"...\" line between the Chart.yaml and the files")
	}
	var files provFiles
	if err := yaml.Unmarshal(parts[1], &files); err != nil {
		return refuse(Invalid, "the signed files do not parse: %v", err)
	}
	got, ok := files.Files[file]
	if !ok {
		names := make([]string, 0, len(files.Files))
		for n := range files.Files {
			names = append(names, n)
		}
		slices.Sort(names)
		return refuse(OtherDigest, "it signs %s, not %s", strings.Join(orNone(names), ", "), file)
	}
	if !strings.EqualFold(got, sum) {
		return refuse(OtherDigest, "it signs %s as %s", file, got)
	}
	id := ""
	if pi := signer.PrimaryIdentity(); pi != nil {
		id = pi.Name
	}
	return Result{Digest: sum, Signer: Signer{Key: KeyringFingerprint(signer), Identity: id}, Via: ViaProvenance}, nil
}

// The registry finds VerifyProvenance by this interface (a chart
// repository's fetch asserts it): a signature that drifts fails here, at
// build time, not at a fetch.
var _ registry.ProvenanceVerifier = (*Verifier)(nil)

// ViaProvenance is a Result's Via for a chart verified by its Helm
// provenance file.
const ViaProvenance = "helm-provenance"

// issuerOf names the key a clearsigned message says signed it: its
// fingerprint when the signature carries one, else its key id; "an
// unnamed key" when it says neither.
func issuerOf(prov []byte) string {
	block, _ := clearsign.Decode(prov)
	if block == nil || block.ArmoredSignature == nil {
		return "an unnamed key"
	}
	p, err := packet.NewReader(block.ArmoredSignature.Body).Next()
	if err != nil {
		return "an unnamed key"
	}
	sig, ok := p.(*packet.Signature)
	switch {
	case !ok:
		return "an unnamed key"
	case len(sig.IssuerFingerprint) > 0:
		return strings.ToUpper(hex.EncodeToString(sig.IssuerFingerprint))
	case sig.IssuerKeyId != nil:
		return fmt.Sprintf("id %016X", *sig.IssuerKeyId)
	}
	return "an unnamed key"
}
