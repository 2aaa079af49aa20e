package verifytest

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/specsync/specsync/pkg/verify"
)

// PGPKey is an OpenPGP key made for the test (Ed25519, so that making
// one costs no RSA prime search), signing provenance files as `helm
// package --sign` does.
type PGPKey struct {
	Entity *openpgp.Entity
}

// NewPGPKey makes a key whose user id is "name <email>".
func NewPGPKey(t testing.TB, name, email string) *PGPKey {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", email, &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return &PGPKey{Entity: e}
}

// Fingerprint is the key as a Signer names it ("openpgp:" and the
// primary key's fingerprint).
func (k *PGPKey) Fingerprint() string {
	return "openpgp:" + strings.ToUpper(hex.EncodeToString(k.Entity.PrimaryKey.Fingerprint))
}

// UserID is the key's user id.
func (k *PGPKey) UserID() string { return k.Entity.PrimaryIdentity().Name }

// Armored is the public key as `gpg --export --armor` writes it.
func (k *PGPKey) Armored(t testing.TB) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Entity.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String() + "\n"
}

// Keyring is the public keys exported one after the other into one
// armored file, as `gpg --export --armor A B` or `cat a.asc b.asc` make
// it.
func Keyring(t testing.TB, keys ...*PGPKey) string {
	t.Helper()
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k.Armored(t))
	}
	return b.String()
}

// ProvenancePolicy is a verify block accepting the keys, in one keyring
// file (as a Secret Manager volume gives it).
func ProvenancePolicy(t testing.TB, keys ...*PGPKey) *verify.Policy {
	t.Helper()
	f := filepath.Join(t.TempDir(), "keyring.asc")
	if err := os.WriteFile(f, []byte(Keyring(t, keys...)), 0o600); err != nil {
		t.Fatal(err)
	}
	return &verify.Policy{Provenance: &verify.Provenance{KeyringFile: f}}
}

// SignProv is the provenance file `helm package --sign` writes for an
// archive named file: chartYAML (the chart's metadata), a "..." line,
// and the files map naming file with the SHA-256 of archive, clearsigned
// with the key.
func (k *PGPKey) SignProv(t testing.TB, chartYAML, file string, archive []byte) []byte {
	t.Helper()
	return k.Clearsign(t, ProvText(chartYAML, file, archive))
}

// ProvText is the text a provenance file signs.
func ProvText(chartYAML, file string, archive []byte) string {
	return strings.TrimRight(chartYAML, "\n") + "\n...\nfiles:\n  " + file + ": sha256:" + Digest(archive) + "\n"
}

// Clearsign clearsigns text with the key (SHA-512, as helm signs).
func (k *PGPKey) Clearsign(t testing.TB, text string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := clearsign.Encode(&buf, k.Entity.PrivateKey, &packet.Config{DefaultHash: crypto.SHA512})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Digest is the SHA-256 of b in hex.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
