package verify_test

import (
	"crypto"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// BenchmarkVerifyProvenance is one chart's provenance check, the .prov
// in hand: the clearsigned message's signature (by key type: gpg's
// default RSA and Ed25519) and the files map, against a keyring of two
// keys (a rotation).
func BenchmarkVerifyProvenance(b *testing.B) {
	archive := make([]byte, 64<<10)
	sum := "sha256:" + verifytest.Digest(archive)
	for _, c := range []struct {
		name string
		cfg  *packet.Config
	}{
		{"ed25519", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}},
		{"rsa-3072", &packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 3072, DefaultHash: crypto.SHA512}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e, err := openpgp.NewEntity("Acme Charts", "", "charts@acme.example", c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			k, other := &verifytest.PGPKey{Entity: e}, verifytest.NewPGPKey(b, "Other", "o@acme.example")
			prov := k.SignProv(b, provChartYAML, "db-1.2.0.tgz", archive)
			v := provLoad(b, verifytest.Keyring(b, other, k))
			b.ResetTimer()
			for b.Loop() {
				if _, err := v.VerifyProvenance(prov, "db-1.2.0.tgz", sum); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
