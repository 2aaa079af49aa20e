package verify_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	v1bundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	"github.com/sirupsen/logrus"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/verify"
)

const (
	identity = "https://github.com/acme/specs/.github/workflows/release.yml@refs/heads/main"
	issuer   = "https://token.actions.githubusercontent.com"
)

// fast keeps go-containerregistry's retries of a 5xx short: a lookup
// that fails still fails, without the default second-long backoff.
var fast = remote.WithRetryBackoff(remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 2})

func TestMain(m *testing.M) {
	// The reference registry logs every request through logrus.
	logrus.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// A key in an environment variable (the *_env form) verifies as one in
// a file does. Not parallel: it sets the process's environment.
func TestKeyFromEnvironment(t *testing.T) {
	reg := newRegistry(t, true)
	repo := reg.repo(t, "svc")
	d := pushImage(t, repo, "v1")
	s := newSigner(t)
	pushBundle(t, repo, d, s.bundle(t, d))
	t.Setenv("SPECSYNC_TEST_VERIFY_KEY", s.pem)
	res := verified(t, load(t, verify.Policy{Keys: []verify.Key{{PEMEnv: "SPECSYNC_TEST_VERIFY_KEY"}}}), repo, d)
	if res.Signer.Key != fingerprint(t, s.pem) {
		t.Errorf("signer %+v, want the key's fingerprint", res.Signer)
	}
}

func keyPolicy(t testing.TB, pems ...string) verify.Policy {
	t.Helper()
	var p verify.Policy
	dir := t.TempDir()
	for i, pem := range pems {
		file := filepath.Join(dir, fmt.Sprintf("cosign-%d.pub", i))
		if err := os.WriteFile(file, []byte(pem), 0o600); err != nil {
			t.Fatal(err)
		}
		p.Keys = append(p.Keys, verify.Key{PEMFile: file})
	}
	return p
}

func keylessPolicy(vs virtualSigstore) verify.Policy {
	return verify.Policy{Keyless: &verify.Keyless{TrustedRootFile: vs.rootFile, Identity: identity, Issuer: issuer}}
}

func load(t *testing.T, p verify.Policy) *verify.Verifier {
	t.Helper()
	v, err := verify.Load(p)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return v
}

func verified(t *testing.T, v *verify.Verifier, repo name.Repository, d v1.Hash) verify.Result {
	t.Helper()
	res, err := v.Verify(context.Background(), repo, d, fast)
	if err != nil {
		t.Fatalf("Verify %s: %v", d, err)
	}
	if res.Digest != d.String() {
		t.Errorf("result digest %s, want %s", res.Digest, d)
	}
	return res
}

func fingerprint(t *testing.T, pem string) string {
	t.Helper()
	fp, err := verify.Fingerprint([]byte(pem))
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// Key signatures as cosign v3 stores them (a bundle referring to the
// image), on a registry with the referrers API and on one without it
// (the referrers tag schema), and as cosign v2 did (the .sig tag).
func TestKeySignatures(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		referrers bool
		legacy    bool
		wantVia   string
		wantPaths []string // the lookups made, in order
	}{
		{"bundle, referrers API", true, false, verify.ViaReferrers, []string{"GET /v2/team/svc/referrers/", "GET /v2/team/svc/manifests/sha256:", "GET /v2/team/svc/blobs/sha256:"}},
		{"bundle, referrers tag schema", false, false, verify.ViaReferrers, []string{"GET /v2/team/svc/referrers/", "GET /v2/team/svc/manifests/sha256-", "GET /v2/team/svc/manifests/sha256:", "GET /v2/team/svc/blobs/sha256:"}},
		{"legacy .sig tag", false, true, verify.ViaTag, []string{"GET /v2/team/svc/referrers/", "GET /v2/team/svc/manifests/sha256-", "GET /v2/team/svc/manifests/sha256-", "GET /v2/team/svc/blobs/sha256:"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := newRegistry(t, c.referrers)
			repo := reg.repo(t, "team/svc")
			d := pushImage(t, repo, "v1")
			s := newSigner(t)
			if c.legacy {
				pushLegacy(t, repo, d, simpleSigning(repo, d), s.legacy(t, simpleSigning(repo, d)))
			} else {
				pushBundle(t, repo, d, s.bundle(t, d))
			}
			v := load(t, keyPolicy(t, s.pem))
			reg.reset()
			res := verified(t, v, repo, d)
			if res.Via != c.wantVia {
				t.Errorf("via %q, want %q", res.Via, c.wantVia)
			}
			if want := fingerprint(t, s.pem); res.Signer != (verify.Signer{Key: want}) {
				t.Errorf("signer %+v, want key %s", res.Signer, want)
			}
			var got []string
			pings := 0
			for _, r := range reg.log() {
				if r == "GET /v2/" {
					pings++
				} else {
					got = append(got, r)
				}
			}
			if pings != 1 {
				t.Errorf("%d pings of /v2/, want one a lookup", pings)
			}
			if len(got) != len(c.wantPaths) {
				t.Fatalf("lookups:\n%s\nwant %d like %v", strings.Join(got, "\n"), len(c.wantPaths), c.wantPaths)
			}
			for i, p := range c.wantPaths {
				if !strings.HasPrefix(got[i], p) {
					t.Errorf("lookup %d is %s, want %s...", i, got[i], p)
				}
			}
		})
	}
}

// A rotation: the policy lists the old and the new key; an image
// signed with either verifies, and the result names the key that
// signed it.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, true)
	repo := reg.repo(t, "svc")
	oldKey, newKey := newSigner(t), newSigner(t)
	d1 := pushImage(t, repo, "v1")
	pushBundle(t, repo, d1, oldKey.bundle(t, d1))
	d2 := pushImage(t, repo, "v2")
	pushBundle(t, repo, d2, newKey.bundle(t, d2))
	v := load(t, keyPolicy(t, oldKey.pem, newKey.pem))
	if got, want := verified(t, v, repo, d1).Signer.Key, fingerprint(t, oldKey.pem); got != want {
		t.Errorf("v1 signer %s, want the old key %s", got, want)
	}
	if got, want := verified(t, v, repo, d2).Signer.Key, fingerprint(t, newKey.pem); got != want {
		t.Errorf("v2 signer %s, want the new key %s", got, want)
	}
}

// Keyless signatures from sigstore-go's virtual Fulcio and Rekor, with
// the trusted root read from a file: as a bundle referrer and as
// cosign's legacy .sig layer (certificate and log promise annotations).
func TestKeylessSignatures(t *testing.T) {
	t.Parallel()
	vs := newVirtualSigstore(t)
	for _, legacy := range []bool{false, true} {
		reg := newRegistry(t, false)
		repo := reg.repo(t, "svc")
		d := pushImage(t, repo, "v1")
		want := verify.ViaReferrers
		if legacy {
			pushLegacy(t, repo, d, simpleSigning(repo, d), vs.legacy(t, identity, issuer, simpleSigning(repo, d)))
			want = verify.ViaTag
		} else {
			pushBundle(t, repo, d, vs.bundle(t, identity, issuer, d))
		}
		for _, p := range []verify.Policy{
			keylessPolicy(vs),
			{Keyless: &verify.Keyless{TrustedRootFile: vs.rootFile, IdentityRegexp: `https://github\.com/acme/.*`, IssuerRegexp: `https://token\.actions\.githubusercontent\.com`}},
		} {
			res := verified(t, load(t, p), repo, d)
			if res.Signer != (verify.Signer{Identity: identity, Issuer: issuer}) || res.Via != want {
				t.Errorf("legacy %v, policy %s: got %+v, want %s from %s via %s", legacy, p, res, identity, issuer, want)
			}
		}
	}
}

// Every way an entry's signature can be wanting is that entry's error
// (failure.Invalid, a Rejection with its reason), never a success and
// never a fetch failure.
func TestRejections(t *testing.T) {
	t.Parallel()
	vs := newVirtualSigstore(t)
	good := newSigner(t)
	for _, c := range []struct {
		name   string
		policy func(t *testing.T) verify.Policy
		sign   func(t *testing.T, repo name.Repository, d, other v1.Hash)
		want   verify.Reason
	}{
		{"unsigned", keyPolicyOf(good), func(*testing.T, name.Repository, v1.Hash, v1.Hash) {}, verify.Missing},
		{"wrong key (bundle)", keyPolicyOf(good), func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			pushBundle(t, repo, d, newSigner(t).bundle(t, d))
		}, verify.Untrusted},
		{"wrong key (.sig tag)", keyPolicyOf(good), func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			pushLegacy(t, repo, d, simpleSigning(repo, d), newSigner(t).legacy(t, simpleSigning(repo, d)))
		}, verify.Untrusted},
		{"keyless where keys are wanted", keyPolicyOf(good), func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			pushBundle(t, repo, d, vs.bundle(t, identity, issuer, d))
		}, verify.Untrusted},
		{"wrong identity", keylessOf(vs), func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			pushBundle(t, repo, d, vs.bundle(t, "https://github.com/mallory/specs/.github/workflows/release.yml@refs/heads/main", issuer, d))
		}, verify.Untrusted},
		{"wrong issuer", keylessOf(vs), func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			pushBundle(t, repo, d, vs.bundle(t, identity, "https://accounts.example.com", d))
		}, verify.Untrusted},
		{"wrong identity (.sig tag)", keylessOf(vs), func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			pushLegacy(t, repo, d, simpleSigning(repo, d), vs.legacy(t, "mallory@example.com", issuer, simpleSigning(repo, d)))
		}, verify.Untrusted},
		{"identity regexp matches only part", func(t *testing.T) verify.Policy {
			return verify.Policy{Keyless: &verify.Keyless{TrustedRootFile: vs.rootFile, IdentityRegexp: `https://github\.com/acme/`, Issuer: issuer}}
		}, func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			pushBundle(t, repo, d, vs.bundle(t, "https://evil.example/?https://github.com/acme/x", issuer, d))
		}, verify.Untrusted},
		{"signature of another digest (bundle)", keyPolicyOf(good), func(t *testing.T, repo name.Repository, d, other v1.Hash) {
			pushBundle(t, repo, d, good.bundle(t, other))
		}, verify.OtherDigest},
		{"signature of another digest (.sig tag)", keylessOf(vs), func(t *testing.T, repo name.Repository, d, other v1.Hash) {
			pushLegacy(t, repo, d, simpleSigning(repo, other), vs.legacy(t, identity, issuer, simpleSigning(repo, other)))
		}, verify.OtherDigest},
		{"tampered payload (keyless bundle)", keylessOf(vs), func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			pb := vs.bundle(t, identity, issuer, d)
			tamper(pb)
			pushBundle(t, repo, d, pb)
		}, verify.Invalid},
		{"tampered payload (key bundle)", keyPolicyOf(good), func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			pb := good.bundle(t, d)
			tamper(pb)
			pushBundle(t, repo, d, pb)
		}, verify.Untrusted},
		{"tampered payload (.sig tag)", keyPolicyOf(good), func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			ann := good.legacy(t, simpleSigning(repo, d))
			tampered := strings.Replace(string(simpleSigning(repo, d)), `"optional":null`, `"optional":{"by":"mallory"}`, 1)
			pushLegacy(t, repo, d, []byte(tampered), ann)
		}, verify.Untrusted},
		{"a blob that is no bundle", keyPolicyOf(good), func(t *testing.T, repo name.Repository, d, _ v1.Hash) {
			pushBundleJSON(t, repo, d, []byte(`{"mediaType": "garbage"}`))
		}, verify.Invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := newRegistry(t, false)
			repo := reg.repo(t, "svc")
			d := pushImage(t, repo, "v1")
			other := pushImage(t, repo, "v0")
			c.sign(t, repo, d, other)
			_, err := load(t, c.policy(t)).Verify(context.Background(), repo, d, fast)
			if err == nil {
				t.Fatal("verified; want a rejection")
			}
			if k := failure.KindOf(err); k != failure.Invalid {
				t.Errorf("kind %v (%v), want invalid: the entry's own error", k, err)
			}
			rej := verify.Rejected(err)
			if rej == nil {
				t.Fatalf("no Rejection in %v", err)
			}
			if rej.Reason != c.want {
				t.Errorf("reason %v, want %v: %v", rej.Reason, c.want, err)
			}
			if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), d.String()) {
				t.Errorf("error %q: want one line naming %s", err, d)
			}
		})
	}
}

func keyPolicyOf(s signer) func(t *testing.T) verify.Policy {
	return func(t *testing.T) verify.Policy { return keyPolicy(t, s.pem) }
}

func keylessOf(vs virtualSigstore) func(t *testing.T) verify.Policy {
	return func(*testing.T) verify.Policy { return keylessPolicy(vs) }
}

// tamper changes the signed statement after signing, keeping the
// subject: only the signature can tell.
func tamper(pb *v1bundle.Bundle) {
	env := pb.GetDsseEnvelope()
	env.Payload = []byte(strings.Replace(string(env.Payload), `"predicate":{}`, `"predicate":{"by":"mallory"}`, 1))
}

// A signature lookup the registry fails (a 5xx on the referrers or the
// .sig tag, a timeout, a refused connection) fails the fetch: not the
// entry's error, and never a success.
func TestLookupFailuresFailTheFetch(t *testing.T) {
	t.Parallel()
	s := newSigner(t)
	fail := func(match string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if strings.Contains(r.URL.Path, match) {
				http.Error(w, "upstream down", http.StatusServiceUnavailable)
				return true
			}
			return false
		}
	}
	for _, c := range []struct {
		name  string
		fault func(w http.ResponseWriter, r *http.Request) bool
		ctx   func() (context.Context, context.CancelFunc)
		close bool
	}{
		{name: "referrers 503", fault: fail("/referrers/")},
		{name: "referrers tag schema 503", fault: func(w http.ResponseWriter, r *http.Request) bool {
			if strings.Contains(r.URL.Path, "/manifests/sha256-") && !strings.HasSuffix(r.URL.Path, ".sig") {
				http.Error(w, "upstream down", http.StatusInternalServerError)
				return true
			}
			return false
		}},
		{name: ".sig tag 503", fault: fail(".sig")},
		{name: "bundle blob 502", fault: func(w http.ResponseWriter, r *http.Request) bool {
			if strings.Contains(r.URL.Path, "/blobs/") {
				http.Error(w, "bad gateway", http.StatusBadGateway)
				return true
			}
			return false
		}},
		{name: "timeout", fault: func(w http.ResponseWriter, r *http.Request) bool {
			<-r.Context().Done() // never answers: the caller's deadline ends it
			return true
		}, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}},
		{name: "connection refused", close: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := newRegistry(t, false)
			repo := reg.repo(t, "svc")
			d := pushImage(t, repo, "v1")
			// Signed by a key the policy does not hold: only a lookup
			// that fails keeps it from being an entry's rejection.
			pushBundle(t, repo, d, newSigner(t).bundle(t, d))
			v := load(t, keyPolicy(t, s.pem))
			reg.setFault(c.fault)
			if c.close {
				repo = closedRepo(t)
			}
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if c.ctx != nil {
				ctx, cancel = c.ctx()
			}
			defer cancel()
			_, err := v.Verify(ctx, repo, d, fast)
			if err == nil {
				t.Fatal("verified; want the lookup's failure")
			}
			if verify.Rejected(err) != nil || failure.KindOf(err) != failure.Unavailable {
				t.Errorf("kind %v, rejection %v: want unavailable, a fetch failure: %v", failure.KindOf(err), verify.Rejected(err), err)
			}
		})
	}
}

// closedRepo is a repository on an address that refuses connections.
func closedRepo(t *testing.T) name.Repository {
	t.Helper()
	r, err := name.NewRepository(emulatortest.RefusingAddr(t)+"/svc", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The policy's own checks: every problem at once, each naming its field.
func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    verify.Policy
		want []string
	}{
		{verify.Policy{}, []string{"verify: set keys, keyless or both"}},
		{verify.Policy{Keys: []verify.Key{{}, {PEMEnv: "A", PEMFile: "/b"}, {PEMEnv: "not a name"}}}, []string{
			"verify.keys[0]: set pem_env or pem_file", "verify.keys[1]: pem_env and pem_file are both set", `verify.keys[2].pem_env "not a name"`}},
		{verify.Policy{Keyless: &verify.Keyless{Identity: "a", IdentityRegexp: "b", IssuerRegexp: "("}}, []string{
			"verify.keyless: trusted_root_file is required", "verify.keyless.identity_regexp: identity is set too", `verify.keyless.issuer_regexp "(" is not a regular expression`}},
		{verify.Policy{Keyless: &verify.Keyless{TrustedRootFile: "/r"}}, []string{
			"verify.keyless: identity or identity_regexp is required", "verify.keyless: issuer or issuer_regexp is required"}},
	} {
		err := c.p.Validate()
		if err == nil {
			t.Errorf("%+v: valid, want %v", c.p, c.want)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(c.want) {
			t.Errorf("%+v: %d problems %q, want %d", c.p, len(lines), lines, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("problem %d: %q, want %q...", i, lines[i], w)
			}
		}
	}
	ok := verify.Policy{Keys: []verify.Key{{PEMFile: "/k.pub"}}, Keyless: &verify.Keyless{TrustedRootFile: "/r.json", Identity: "a", IssuerRegexp: "https://.*"}}
	if err := ok.Validate(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
	envs, files := ok.SecretRefs()
	if len(envs) != 0 || strings.Join(files, ",") != "/k.pub,/r.json" {
		t.Errorf("SecretRefs: %v %v, want the key file and the trusted root", envs, files)
	}
}

// Key material that cannot be read is the deployment's problem: a
// fetch failure (failure.Precondition) naming where, never an entry's.
func TestLoadFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "key.pub")
	if err := os.WriteFile(notPEM, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    verify.Policy
		want string
	}{
		{verify.Policy{Keys: []verify.Key{{PEMEnv: "SPECSYNC_TEST_VERIFY_UNSET"}}}, "verify.keys[0]: environment variable SPECSYNC_TEST_VERIFY_UNSET is not set"},
		{verify.Policy{Keys: []verify.Key{{PEMFile: notPEM}}}, "no PEM PUBLIC KEY block found"},
		{verify.Policy{Keyless: &verify.Keyless{TrustedRootFile: filepath.Join(dir, "missing.json"), Identity: "a", Issuer: "b"}}, "verify.keyless.trusted_root_file"},
	} {
		_, err := verify.Load(c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.p, err, c.want)
		}
		if failure.KindOf(err) != failure.Precondition || verify.Rejected(err) != nil {
			t.Errorf("%s: kind %v, want precondition", c.p, failure.KindOf(err))
		}
	}
}
