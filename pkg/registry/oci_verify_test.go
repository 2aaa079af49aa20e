package registry_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/verify"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// isSignatureLookup is a request for a manifest's signatures: the
// referrers API, the referrers tag schema (sha256-<hex>) or cosign's
// .sig tag.
func isSignatureLookup(_, uri string) bool {
	return strings.Contains(uri, "/referrers/") || strings.Contains(uri, "/manifests/sha256-")
}

func (s *server) repoOf(t *testing.T, repo string) name.Repository {
	t.Helper()
	r, err := name.NewRepository(s.host+"/"+repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func hashOf(t *testing.T, d string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(d)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// With a verify block, an entry is offered only when a signature of its
// manifest digest verifies with a key of the policy, and then carries
// who signed it and the digest; any other entry is that entry's error,
// saying why, with no Upstream (so that a signature pushed later is
// found). Without a verify block the same registry offers every entry,
// with no provenance.
func TestVerifyOffersOnlySigned(t *testing.T) {
	t.Parallel()
	reg := newDistribution(t, nil)
	owner, stranger := verifytest.NewKey(t), verifytest.NewKey(t)
	digests := map[string]string{}
	for _, e := range []string{"signed", "signed-tag", "unsigned", "stranger", "other-digest", "tampered"} {
		digests[e] = reg.pushSpec(t, e, specYAML(e))
	}
	at := func(e string) (name.Repository, v1.Hash) { return reg.repoOf(t, e), hashOf(t, digests[e]) }
	repo, d := at("signed")
	owner.Sign(t, repo, d)
	repo, d = at("signed-tag")
	owner.SignTag(t, repo, d)
	repo, d = at("stranger")
	stranger.Sign(t, repo, d)
	repo, d = at("other-digest")
	owner.SignAs(t, repo, d, hashOf(t, digests["signed"]))
	repo, d = at("tampered")
	owner.SignTampered(t, repo, d)

	l := fetch(t, reg.oci(t, registry.OCIConfig{Verify: verifytest.Policy(t, owner)}))
	got := byName(l)
	for _, e := range []string{"signed", "signed-tag"} {
		en := got[e]
		if en.Err != nil || en.Spec == nil {
			t.Fatalf("%s: a signed entry is not offered: %v", e, en.Err)
		}
		p := en.Spec.Provenance
		if p == nil || p.Key != owner.Fingerprint(t) || p.Digest != digests[e] {
			t.Errorf("%s: provenance %+v, want key %s and digest %s", e, p, owner.Fingerprint(t), digests[e])
		}
		if !strings.Contains(en.Upstream, digests[e]) || !strings.Contains(en.Upstream, "verify ") {
			t.Errorf("%s: Upstream %q does not name the digest and the policy", e, en.Upstream)
		}
	}
	for e, why := range map[string]string{
		"unsigned":     "unsigned: no signature of " + digests["unsigned"],
		"stranger":     "not by whom verify accepts",
		"other-digest": "signs another manifest",
		"tampered":     "signature refused",
	} {
		en := got[e]
		if en.Spec != nil || en.Err == nil {
			t.Errorf("%s: offered (%v), want refused", e, en.Spec != nil)
			continue
		}
		if verify.Rejected(en.Err) == nil || !strings.Contains(en.Err.Error(), why) || !strings.Contains(en.Err.Error(), "repository "+e) {
			t.Errorf("%s: error %q, want a rejection of repository %s saying %q", e, en.Err, e, why)
		}
		if strings.Contains(en.Err.Error(), "\n") {
			t.Errorf("%s: error %q is more than one line", e, en.Err)
		}
		if en.Upstream != "" {
			t.Errorf("%s: a refused entry has Upstream %q: a signature pushed later would not be looked up", e, en.Upstream)
		}
	}

	plain := byName(fetch(t, reg.oci(t, registry.OCIConfig{})))
	for e := range digests {
		if plain[e].Spec == nil || plain[e].Spec.Provenance != nil {
			t.Errorf("without verify, %s: spec %v", e, plain[e].Spec)
		}
	}
}

// A signature pushed after the image (cosign signs by digest, after the
// push) is found by the next fetch, whose listing then differs.
func TestVerifySignedAfterPush(t *testing.T) {
	t.Parallel()
	reg := newDistribution(t, nil)
	owner := verifytest.NewKey(t)
	d := reg.pushSpec(t, "svc", specYAML("svc"))
	src := reg.oci(t, registry.OCIConfig{Verify: verifytest.Policy(t, owner)})
	first := fetch(t, src)
	if byName(first)["svc"].Spec != nil {
		t.Fatal("an unsigned entry was offered")
	}
	owner.Sign(t, reg.repoOf(t, "svc"), hashOf(t, d))
	l, err := src.Fetch(context.Background(), registry.FetchOptions{PreviousDigest: first.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if l.NotModified || byName(l)["svc"].Spec == nil {
		t.Errorf("after signing: not modified %v, entry %+v", l.NotModified, byName(l)["svc"])
	}
}

// A signature lookup that fails (a 5xx after the retries) fails the
// fetch whole, as a failed listing does, so nothing is marked; a key
// that cannot be read fails it too (the deployment's fault, not the
// entries').
func TestVerifyFailuresFailTheFetch(t *testing.T) {
	t.Parallel()
	reg := newDistribution(t, nil)
	owner := verifytest.NewKey(t)
	d := reg.pushSpec(t, "svc", specYAML("svc"))
	owner.Sign(t, reg.repoOf(t, "svc"), hashOf(t, d))
	reg.pushSpec(t, "other", specYAML("other"))

	reg.setFault(func(w http.ResponseWriter, r *http.Request) bool {
		if isSignatureLookup(r.Method, r.URL.RequestURI()) {
			http.Error(w, "injected", http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	err := fetchFails(t, reg.oci(t, registry.OCIConfig{Verify: verifytest.Policy(t, owner)}), "looking up signatures")
	if !failure.Is(err, failure.Unavailable) || verify.Rejected(err) != nil {
		t.Errorf("a failed lookup: %v, want failure.Unavailable, not a rejection", err)
	}
	reg.setFault(nil)

	missing := &verify.Policy{Keys: []verify.Key{{PEMFile: filepath.Join(t.TempDir(), "absent.pub")}}}
	err = fetchFails(t, reg.oci(t, registry.OCIConfig{Verify: missing}), "verify.keys[0]")
	if !failure.Is(err, failure.Precondition) {
		t.Errorf("an unreadable key: %v, want failure.Precondition", err)
	}
}

// What verification costs stays with what moved: a warm source looks no
// signature up for a digest it verified, a listing unchanged since the
// previous digest is NotModified from tag lookups alone, and a run's
// hint at the same Upstream gives the entry back without a lookup; a
// moved digest is looked up alone. A policy that accepts something else
// changes the Upstream, so hints and the previous digest no longer hold.
func TestVerifyCostStaysWithTheChange(t *testing.T) {
	t.Parallel()
	reg := newDistribution(t, nil)
	owner, next := verifytest.NewKey(t), verifytest.NewKey(t)
	for _, e := range []string{"a", "b", "c"} {
		d := reg.pushSpec(t, e, specYAML(e))
		owner.Sign(t, reg.repoOf(t, e), hashOf(t, d))
	}
	policy := verifytest.Policy(t, owner)
	src := reg.oci(t, registry.OCIConfig{Verify: policy})
	first := fetch(t, src)
	if n := reg.count(isSignatureLookup); n == 0 {
		t.Fatal("the first fetch looked no signature up")
	}
	reg.reset()

	if l := fetch(t, src); byName(l)["a"].Spec == nil || byName(l)["a"].Spec.Provenance == nil {
		t.Fatalf("a warm fetch lost the provenance: %+v", byName(l)["a"])
	}
	if n := reg.count(isSignatureLookup); n != 0 {
		t.Errorf("a warm fetch of unchanged digests looked signatures up %d times:\n%s", n, reg.log())
	}
	reg.reset()

	cold := reg.oci(t, registry.OCIConfig{Verify: policy})
	l, err := cold.Fetch(context.Background(), registry.FetchOptions{PreviousDigest: first.Digest})
	if err != nil || !l.NotModified {
		t.Fatalf("a cold fetch of an unchanged registry: %v, not modified %v", err, l != nil && l.NotModified)
	}
	if n := reg.count(func(m, u string) bool { return isSignatureLookup(m, u) || (m == http.MethodGet && isManifest(m, u)) }); n != 0 {
		t.Errorf("an unchanged cold fetch made %d GETs or lookups:\n%s", n, reg.log())
	}

	hints := map[string]registry.Hint{}
	for _, e := range first.Entries {
		hints[e.Name] = registry.Hint{Upstream: e.Upstream, SpecID: "id-" + e.Name, SpecName: e.Spec.Name, SpecDigest: "sha256:x"}
	}
	d := reg.pushSpec(t, "b", specYAML("b", "moved"))
	owner.Sign(t, reg.repoOf(t, "b"), hashOf(t, d))
	reg.reset()
	cold = reg.oci(t, registry.OCIConfig{Verify: policy})
	l, err = cold.Fetch(context.Background(), registry.FetchOptions{PreviousDigest: first.Digest, Hints: func(context.Context) (map[string]registry.Hint, error) { return hints, nil }})
	if err != nil {
		t.Fatal(err)
	}
	got := byName(l)
	if got["a"].Hint == nil || got["c"].Hint == nil || got["b"].Spec == nil || got["b"].Spec.Provenance == nil || got["b"].Spec.Provenance.Digest != d {
		t.Errorf("one moved: a %+v, b %+v", got["a"], got["b"])
	}
	if n := reg.count(func(_, u string) bool {
		return isSignatureLookup("", u) && !strings.Contains(u, strings.TrimPrefix(d, "sha256:"))
	}); n != 0 {
		t.Errorf("one digest moved, and %d lookups were of others:\n%s", n, reg.log())
	}

	// Another key: every Upstream differs, so nothing hinted holds.
	rotated := reg.oci(t, registry.OCIConfig{Verify: verifytest.Policy(t, owner, next)})
	l, err = rotated.Fetch(context.Background(), registry.FetchOptions{Hints: func(context.Context) (map[string]registry.Hint, error) { return hints, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.Hint != nil || e.Upstream == hints[e.Name].Upstream {
			t.Errorf("%s: under another policy the entry was given back from a hint (Upstream %q)", e.Name, e.Upstream)
		}
	}
}
