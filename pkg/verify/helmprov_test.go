package verify_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/verify"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

const provChartYAML = "apiVersion: v2\nname: db\nversion: 1.2.0\ndescription: a database\n"

// provLoad loads a provenance policy whose keyring file holds keyring.
func provLoad(t testing.TB, keyring string) *verify.Verifier {
	t.Helper()
	f := filepath.Join(t.TempDir(), "keyring")
	if err := os.WriteFile(f, []byte(keyring), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := verify.Load(verify.Policy{Provenance: &verify.Provenance{KeyringFile: f}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A provenance file verifies when a key of the keyring signed it and its
// files map names the archive with the SHA-256 of its bytes; the result
// names the archive's digest, the key's fingerprint and its user id. A
// keyring of two keys (a rotation) accepts either.
func TestProvenanceVerifies(t *testing.T) {
	t.Parallel()
	old, next := verifytest.NewPGPKey(t, "Acme Charts", "charts@acme.example"), verifytest.NewPGPKey(t, "Acme Charts 2027", "charts@acme.example")
	archive := []byte("the archive's bytes")
	sum := "sha256:" + verifytest.Digest(archive)
	v := provLoad(t, verifytest.Keyring(t, old, next))
	for _, k := range []*verifytest.PGPKey{old, next} {
		res, err := v.VerifyProvenance(k.SignProv(t, provChartYAML, "db-1.2.0.tgz", archive), "db-1.2.0.tgz", sum)
		if err != nil {
			t.Fatalf("%s: %v", k.UserID(), err)
		}
		if res.Digest != sum || res.Signer.Key != k.Fingerprint() || res.Signer.Identity != k.UserID() || res.Via != verify.ViaProvenance {
			t.Errorf("result %+v, want digest %s, key %s, user id %q", res, sum, k.Fingerprint(), k.UserID())
		}
	}
}

// Every way a provenance file fails is the chart's rejection
// (failure.Invalid holding a *Rejection) of the most telling reason, in
// one line naming what was wrong.
func TestProvenanceRefusals(t *testing.T) {
	t.Parallel()
	owner, stranger := verifytest.NewPGPKey(t, "Acme Charts", "charts@acme.example"), verifytest.NewPGPKey(t, "Mallory", "m@evil.example")
	archive := []byte("the archive's bytes")
	sum := "sha256:" + verifytest.Digest(archive)
	v := provLoad(t, verifytest.Keyring(t, owner))
	signed := owner.SignProv(t, provChartYAML, "db-1.2.0.tgz", archive)
	for name, c := range map[string]struct {
		prov   []byte
		file   string
		reason verify.Reason
		says   string
	}{
		"stranger": {stranger.SignProv(t, provChartYAML, "db-1.2.0.tgz", archive), "db-1.2.0.tgz", verify.Untrusted,
			"which is not in verify.provenance's keyring"},
		"tampered chart": {bytes.Replace(signed, []byte("description: a database"), []byte("description: a databank"), 1), "db-1.2.0.tgz", verify.Invalid,
			"which does not verify"},
		"tampered sum": {owner.Clearsign(t, strings.Replace(verifytest.ProvText(provChartYAML, "db-1.2.0.tgz", archive), "sha256:", "sha256:0", 1)), "db-1.2.0.tgz", verify.OtherDigest,
			"it signs db-1.2.0.tgz as sha256:0"},
		"other archive": {owner.SignProv(t, provChartYAML, "db-1.2.0.tgz", []byte("other bytes")), "db-1.2.0.tgz", verify.OtherDigest,
			"it signs db-1.2.0.tgz as sha256:" + verifytest.Digest([]byte("other bytes"))},
		"other file": {signed, "db-1.3.0.tgz", verify.OtherDigest, "it signs db-1.2.0.tgz, not db-1.3.0.tgz"},
		"no files":   {owner.Clearsign(t, provChartYAML), "db-1.2.0.tgz", verify.Invalid, `no "..." line`},
		"not signed": {[]byte(verifytest.ProvText(provChartYAML, "db-1.2.0.tgz", archive)), "db-1.2.0.tgz", verify.Invalid,
			"not a clearsigned OpenPGP message"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := v.VerifyProvenance(c.prov, c.file, sum)
			rej := verify.Rejected(err)
			if rej == nil || failure.KindOf(err) != failure.Invalid {
				t.Fatalf("error %v (kind %v), want a rejection", err, failure.KindOf(err))
			}
			if rej.Reason != c.reason || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%v (reason %s), want reason %s saying %q in one line", err, rej.Reason, c.reason, c.says)
			}
		})
	}
}

// The keyring is read as gpg exports it, armored or binary, and refused
// with a clear error naming where (never what) when it is not a public
// keyring: a keybox, a secret key, nothing, garbage. Each refusal is the
// deployment's problem (failure.Precondition), not a chart's.
func TestProvenanceKeyring(t *testing.T) {
	t.Parallel()
	k := verifytest.NewPGPKey(t, "Acme Charts", "charts@acme.example")
	archive := []byte("the archive's bytes")
	prov := k.SignProv(t, provChartYAML, "db-1.2.0.tgz", archive)
	var binary bytes.Buffer
	if err := k.Entity.Serialize(&binary); err != nil {
		t.Fatal(err)
	}
	armored := provLoad(t, verifytest.Keyring(t, k))
	fromBinary := provLoad(t, binary.String())
	for _, v := range []*verify.Verifier{armored, fromBinary} {
		if _, err := v.VerifyProvenance(prov, "db-1.2.0.tgz", "sha256:"+verifytest.Digest(archive)); err != nil {
			t.Errorf("a binary or armored keyring: %v", err)
		}
	}
	// The same keys in another form or place accept nothing more: no
	// chart is verified again for it.
	if armored.Digest() != fromBinary.Digest() {
		t.Errorf("the same key armored and binary digest apart: %s, %s", armored.Digest(), fromBinary.Digest())
	}

	var secret bytes.Buffer
	if err := k.Entity.SerializePrivate(&secret, &packet.Config{}); err != nil {
		t.Fatal(err)
	}
	keybox := append([]byte{0, 0, 0, 32, 1, 1, 0, 0}, []byte("KBXf\x00\x00\x00\x00")...)
	dir := t.TempDir()
	for name, c := range map[string]struct {
		body string
		says string
	}{
		"keybox":         {string(keybox), "a GnuPG keybox (pubring.kbx), not a keyring"},
		"secret":         {secret.String(), "is a secret key"},
		"empty":          {"", "no OpenPGP public key found"},
		"garbage":        {"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nnot base64\n-----END PGP PUBLIC KEY BLOCK-----\n", "a public key block that does not parse"},
		"binary garbage": {"\x99\x00garbage", "no OpenPGP public key found"},
		"signature": {"-----BEGIN PGP SIGNATURE-----\n\n" + strings.SplitN(string(prov), "-----BEGIN PGP SIGNATURE-----\n", 2)[1],
			`an armored block of type "PGP SIGNATURE"`},
	} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := verify.Load(verify.Policy{Provenance: &verify.Provenance{KeyringFile: f}})
		if err == nil || failure.KindOf(err) != failure.Precondition || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "verify.provenance (file "+f+")") {
			t.Errorf("%s: %v (kind %v), want a precondition naming the file and saying %q", name, err, failure.KindOf(err), c.says)
		}
	}
}

// A keyring's keys are in the policy's digest (what each chart's
// Upstream names): a key added or removed, or a subkey revoked,
// verifies every chart again.
func TestProvenanceDigestFollowsTheKeys(t *testing.T) {
	t.Parallel()
	a, b := verifytest.NewPGPKey(t, "A", "a@acme.example"), verifytest.NewPGPKey(t, "B", "b@acme.example")
	one, two := provLoad(t, verifytest.Keyring(t, a)), provLoad(t, verifytest.Keyring(t, a, b))
	if one.Digest() == two.Digest() {
		t.Error("a key added leaves the policy digest as it was")
	}
	if reordered := provLoad(t, verifytest.Keyring(t, b, a)); reordered.Digest() != two.Digest() {
		t.Error("the keyring's order changes the policy digest")
	}
	// The same key with its signing subkey revoked.
	revoked := *a.Entity
	revoked.Subkeys = append([]openpgp.Subkey(nil), a.Entity.Subkeys...)
	if len(revoked.Subkeys) == 0 {
		t.Fatal("the test key has no subkey")
	}
	if err := revoked.RevokeSubkey(&revoked.Subkeys[0], packet.KeyCompromised, "leaked", nil); err != nil {
		t.Fatal(err)
	}
	if rv := provLoad(t, verifytest.Keyring(t, &verifytest.PGPKey{Entity: &revoked})); rv.Digest() == one.Digest() {
		t.Error("a subkey revoked leaves the policy digest as it was")
	}
}
