package verify_test

import (
	"context"
	"testing"

	"github.com/specsync/specsync/pkg/verify"
)

// BenchmarkVerify is one manifest's verification, lookups included, by
// where its signature is: requests/op is what a moved digest costs
// upstream (the registry's ping included), the time is sigstore-go's
// checks and the in-process registry's answers.
func BenchmarkVerify(b *testing.B) {
	vs := newVirtualSigstore(b)
	for _, c := range []struct {
		name      string
		referrers bool
		legacy    bool
		keyless   bool
	}{
		{"key/referrers-api", true, false, false},
		{"key/referrers-tag-schema", false, false, false},
		{"key/sig-tag", false, true, false},
		{"keyless/referrers-api", true, false, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			t := b
			reg := newRegistry(t, c.referrers)
			repo := reg.repo(t, "svc")
			d := pushImage(t, repo, "v1")
			var p verify.Policy
			switch {
			case c.keyless:
				pushBundle(t, repo, d, vs.bundle(t, identity, issuer, d))
				p = keylessPolicy(vs)
			default:
				s := newSigner(t)
				if c.legacy {
					pushLegacy(t, repo, d, simpleSigning(repo, d), s.legacy(t, simpleSigning(repo, d)))
				} else {
					pushBundle(t, repo, d, s.bundle(t, d))
				}
				p = keyPolicy(t, s.pem)
			}
			v, err := verify.Load(p)
			if err != nil {
				b.Fatal(err)
			}
			reg.reset()
			b.ResetTimer()
			for b.Loop() {
				if _, err := v.Verify(context.Background(), repo, d, fast); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(len(reg.log()))/float64(b.N), "requests/op")
		})
	}
}
