package osb_test

import (
	"html"
	"regexp"
	"testing"

	"github.com/specsync/specsync/pkg/spec"
)

// The status page's catalog says, per service, whether the version
// served is verified and by whom (with its digest), or unverified.
func TestStatusPageShowsVerifiedPerService(t *testing.T) {
	e := newEnv(t, 0)
	signed := offerSpec(t, testReg, "signed", "", 1)
	signed.Spec.Provenance = &spec.Provenance{Digest: "sha256:abc", Identity: "https://ci.example/release", Issuer: "https://issuer.example"}
	signed.Digest = spec.Digest(signed.Spec)
	keyed := offerSpec(t, testReg, "keyed", "", 1)
	keyed.Spec.Provenance = &spec.Provenance{Digest: "sha256:def", Key: "sha256:fingerprint"}
	keyed.Digest = spec.Digest(keyed.Spec)
	plain := offerSpec(t, testReg, "plain", "", 1)
	e.upsert(signed)
	e.upsert(keyed)
	e.upsert(plain)
	e.commit()
	page := html.UnescapeString(e.statusPage())
	row := func(id string) string {
		t.Helper()
		m := regexp.MustCompile(`(?s)<tr id="service-` + regexp.QuoteMeta(id) + `".*?</tr>`).FindString(page)
		if m == "" {
			t.Fatalf("no catalog row of %s:\n%s", id, page)
		}
		return m
	}
	for _, c := range []struct {
		id, want string
	}{
		{signed.Spec.ID, `verified: signed by <code>https://ci.example/release (issuer https://issuer.example)</code>, <span class="mono">sha256:abc</span>`},
		{keyed.Spec.ID, `verified: signed by <code>key sha256:fingerprint</code>, <span class="mono">sha256:def</span>`},
		{plain.Spec.ID, `<span class="muted unverified">unverified</span>`},
	} {
		if r := row(c.id); !regexp.MustCompile(regexp.QuoteMeta(c.want)).MatchString(r) {
			t.Errorf("service %s: row %s\ndoes not say %s", c.id, r, c.want)
		}
	}
}
