package verify_test

import (
	"testing"

	"github.com/specsync/specsync/pkg/verify"
)

// A verifier's Digest changes exactly when what it accepts does: another
// key, a key taken out, another identity or trusted root; not the order
// of the keys nor the file they are read from. A source records it with
// each verification, so a stale digest would keep offering what a
// rotated-out key signed.
func TestDigestNamesWhatIsAccepted(t *testing.T) {
	t.Parallel()
	a, b := newSigner(t), newSigner(t)
	vs := newVirtualSigstore(t)
	digest := func(p verify.Policy) string { return load(t, p).Digest() }
	ab := digest(keyPolicy(t, a.pem, b.pem))
	if ab == "" {
		t.Fatal("no digest")
	}
	if got := digest(keyPolicy(t, b.pem, a.pem)); got != ab {
		t.Errorf("the same keys in another order and files: digest %s, want %s", got, ab)
	}
	if got := digest(keyPolicy(t, a.pem)); got == ab {
		t.Error("a key taken out left the digest as it was")
	}
	kl := keylessPolicy(vs)
	base := digest(kl)
	other := kl
	c := *kl.Keyless
	c.Identity = "someone-else@example.com"
	other.Keyless = &c
	if digest(other) == base {
		t.Error("another keyless identity left the digest as it was")
	}
	if digest(keylessPolicy(newVirtualSigstore(t))) == base {
		t.Error("another trusted root left the digest as it was")
	}
}
