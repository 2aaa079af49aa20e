package registry_test

// The verify cases of the conformance suite: every source whose entries
// are OCI manifests (an upstream that is a signedUpstream) runs them, so
// a new such source keeps the verify block's promises by adding its
// driver (and signedUpstream's two methods); the others skip, saying
// why.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/emulator/googletest"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/verify"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// signedUpstream is an upstream whose entries are OCI manifests, which
// the suite signs.
type signedUpstream interface {
	faulty
	// manifest is the repository and digest of entry's offered manifest,
	// and the options to write beside it (the push credentials).
	manifest(t *testing.T, entry string) (name.Repository, v1.Hash, []remote.Option)
	// verifiedSource is a source of the upstream with a verify block.
	verifiedSource(t *testing.T, c suiteConfig, p *verify.Policy) registry.Source
}

const (
	suiteIdentity = "https://github.com/acme/specs/.github/workflows/release.yml@refs/heads/main"
	suiteIssuer   = "https://token.actions.githubusercontent.com"
)

func TestConformanceVerify(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			u, ok := d.new(t).(signedUpstream)
			if !ok && d.name == "helm-repository" {
				t.Skip("its charts are archives, verified by their Helm provenance files, not cosign signatures: helm_prov_test.go has those cases")
			}
			if !ok {
				t.Skip("its entries are not OCI manifests: the verify block is refused at load for it")
			}
			runVerifyConformance(t, d, u)
		})
	}
}

func runVerifyConformance(t *testing.T, d driver, u signedUpstream) {
	quick := suiteConfig{pageSize: 100, timeout: 20 * time.Second}
	owner, stranger := verifytest.NewKey(t), verifytest.NewKey(t)
	sigstore := verifytest.NewSigstore(t)
	sign := map[string]func(repo name.Repository, h v1.Hash, opts []remote.Option){
		"key":         func(r name.Repository, h v1.Hash, o []remote.Option) { owner.Sign(t, r, h, o...) },
		"key-sig-tag": func(r name.Repository, h v1.Hash, o []remote.Option) { owner.SignTag(t, r, h, o...) },
		"keyless": func(r name.Repository, h v1.Hash, o []remote.Option) {
			sigstore.Sign(t, r, h, suiteIdentity, suiteIssuer, o...)
		},
		"unsigned":  func(name.Repository, v1.Hash, []remote.Option) {},
		"wrong-key": func(r name.Repository, h v1.Hash, o []remote.Option) { stranger.Sign(t, r, h, o...) },
		"wrong-identity": func(r name.Repository, h v1.Hash, o []remote.Option) {
			sigstore.Sign(t, r, h, "mallory@example.com", suiteIssuer, o...)
		},
		"wrong-issuer": func(r name.Repository, h v1.Hash, o []remote.Option) {
			sigstore.Sign(t, r, h, suiteIdentity, "https://evil.example", o...)
		},
		"tampered":     func(r name.Repository, h v1.Hash, o []remote.Option) { owner.SignTampered(t, r, h, o...) },
		"other-digest": nil, // below: signed as the "key" entry's digest
	}
	digests := map[string]v1.Hash{}
	for e := range sign {
		u.put(t, e, specYAML(e))
	}
	for e, f := range sign {
		repo, h, opts := u.manifest(t, e)
		digests[e] = h
		if f != nil {
			f(repo, h, opts)
		}
	}
	repo, h, opts := u.manifest(t, "other-digest")
	owner.SignAs(t, repo, h, digests["key"], opts...)

	policy := verifytest.Policy(t, owner)
	policy.Keyless = sigstore.Policy(suiteIdentity, suiteIssuer).Keyless
	src := u.verifiedSource(t, quick, policy)
	l := fetch(t, src)
	got := byName(l)
	t.Run("signed entries are offered with who signed them", func(t *testing.T) {
		for e, want := range map[string]string{"key": owner.Fingerprint(t), "key-sig-tag": owner.Fingerprint(t), "keyless": suiteIdentity} {
			en := got[e]
			if en.Err != nil || en.Spec == nil || en.Spec.Provenance == nil {
				t.Errorf("%s: not offered: %v", e, en.Err)
				continue
			}
			p := en.Spec.Provenance
			if (p.Key != want && p.Identity != want) || p.Digest != digests[e].String() {
				t.Errorf("%s: provenance %+v, want signer %s and digest %s", e, p, want, digests[e])
			}
			if e == "keyless" && p.Issuer != suiteIssuer {
				t.Errorf("keyless: issuer %q, want %q", p.Issuer, suiteIssuer)
			}
		}
	})
	t.Run("every other entry is that entry's error, saying why", func(t *testing.T) {
		for e, why := range map[string]string{
			"unsigned":       "unsigned",
			"wrong-key":      "signature refused",
			"wrong-identity": "mallory@example.com",
			"wrong-issuer":   "https://evil.example",
			"tampered":       "signature refused",
			"other-digest":   "signs another manifest",
		} {
			en, ok := got[e]
			if !ok {
				t.Errorf("%s: absent from the listing: it would be marked", e)
				continue
			}
			if en.Spec != nil || verify.Rejected(en.Err) == nil || !strings.Contains(en.Err.Error(), why) {
				t.Errorf("%s: spec %v, error %v; want the entry's rejection saying %q", e, en.Spec != nil, en.Err, why)
			}
		}
	})
	t.Run("an unchanged listing keeps its digest", func(t *testing.T) {
		if again := fetch(t, src); again.Digest != l.Digest {
			t.Errorf("digest moved on an unchanged upstream: %s then %s", l.Digest, again.Digest)
		}
	})
	t.Run("a signature lookup 5xx fails the fetch", func(t *testing.T) {
		u.setFault(func(w http.ResponseWriter, r *http.Request) bool {
			if isSignatureLookup(r.Method, r.URL.RequestURI()) {
				http.Error(w, "injected", http.StatusInternalServerError)
				return true
			}
			return false
		})
		defer u.setFault(nil)
		// A new instance: nothing verified before.
		err := fetchFails(t, u.verifiedSource(t, quick, policy))
		if !failure.Is(err, failure.Unavailable) || verify.Rejected(err) != nil {
			t.Errorf("%s: %v, want failure.Unavailable", d.name, err)
		}
	})
	_ = context.Background
}

// manifestAt is the repository and digest a tag names.
func manifestAt(t *testing.T, ref string, opts ...remote.Option) (name.Repository, v1.Hash) {
	t.Helper()
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(tag, opts...)
	if err != nil {
		t.Fatalf("HEAD %s: %v", ref, err)
	}
	return tag.Context(), desc.Digest
}

func (u *ociUpstream) manifest(t *testing.T, entry string) (name.Repository, v1.Hash, []remote.Option) {
	r, h := manifestAt(t, u.host+"/"+entry+":latest", u.push...)
	return r, h, u.push
}

func (u *ociUpstream) verifiedSource(t *testing.T, c suiteConfig, p *verify.Policy) registry.Source {
	return u.oci(t, registry.OCIConfig{PageSize: c.pageSize, Timeout: c.timeout, Verify: p})
}

func (r *dockerHubRig) manifest(t *testing.T, entry string) (name.Repository, v1.Hash, []remote.Option) {
	repo, h := manifestAt(t, r.push.host+"/"+suiteNamespace+"/"+entry+":latest", r.push.push...)
	return repo, h, r.push.push
}

func (r *dockerHubRig) verifiedSource(t *testing.T, c suiteConfig, p *verify.Policy) registry.Source {
	return r.newSource(t, registry.DockerHubConfig{Namespace: suiteNamespace, PageSize: c.pageSize, Timeout: c.timeout, Verify: p})
}

func (r *ghcrRig) manifest(t *testing.T, entry string) (name.Repository, v1.Hash, []remote.Option) {
	repo, h := manifestAt(t, r.push.host+"/"+strings.ToLower(suiteNamespace)+"/"+entry+":latest", r.push.push...)
	return repo, h, r.push.push
}

func (r *ghcrRig) verifiedSource(t *testing.T, c suiteConfig, p *verify.Policy) registry.Source {
	return r.newSource(t, registry.GHCRConfig{Owner: suiteNamespace, OwnerType: "org", PageSize: c.pageSize, Timeout: c.timeout, Verify: p})
}

func (u helmOCIUpstream) manifest(t *testing.T, entry string) (name.Repository, v1.Hash, []remote.Option) {
	r, h := manifestAt(t, u.Host+"/"+entry+":1.0.0")
	return r, h, nil
}

func (u helmOCIUpstream) verifiedSource(t *testing.T, c suiteConfig, p *verify.Policy) registry.Source {
	t.Helper()
	src, err := registry.NewHelm(registry.HelmConfig{Host: u.Host, Insecure: true, PageSize: 1000, Timeout: c.timeout, Verify: p})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func (u *arUpstream) manifest(t *testing.T, entry string) (name.Repository, v1.Hash, []remote.Option) {
	r, h := manifestAt(t, u.push.host+"/"+arPrefix+"/"+entry+":latest")
	return r, h, nil
}

func (u *arUpstream) verifiedSource(t *testing.T, c suiteConfig, p *verify.Policy) registry.Source {
	t.Helper()
	src, err := registry.NewOCI(registry.OCIConfig{Host: "europe-docker.pkg.dev", Prefix: arPrefix,
		Transport: googletest.Transport(u.reg.Server), Timeout: c.timeout, Verify: p})
	if err != nil {
		t.Fatal(err)
	}
	return registry.FastRetry(src)
}

func (r *quayRig) manifest(t *testing.T, entry string) (name.Repository, v1.Hash, []remote.Option) {
	// Signatures are pushed through the storage door, as the images are;
	// the source reads them through Quay's token service.
	repo, h := manifestAt(t, r.push.host+"/"+suiteNamespace+"/"+entry+":latest")
	return repo, h, nil
}

func (r *quayRig) verifiedSource(t *testing.T, c suiteConfig, p *verify.Policy) registry.Source {
	r.quay.SetPageSize(c.pageSize)
	return r.newSource(t, registry.QuayConfig{Namespace: suiteNamespace, Timeout: c.timeout, Verify: p})
}
