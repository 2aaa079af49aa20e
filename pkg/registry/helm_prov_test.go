package registry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
	"github.com/specsync/specsync/pkg/verify"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// provRig is a chart repository whose charts an owner signs.
type provRig struct {
	repo            *helmtest.Repo
	owner, stranger *verifytest.PGPKey
	policy          *verify.Policy
}

func newProvRig(t *testing.T) *provRig {
	owner := verifytest.NewPGPKey(t, "Acme Charts", "charts@acme.example")
	return &provRig{repo: helmtest.NewRepo(t), owner: owner,
		stranger: verifytest.NewPGPKey(t, "Mallory", "m@evil.example"), policy: verifytest.ProvenancePolicy(t, owner)}
}

// publish adds c signed by key (nil: no .prov).
func (r *provRig) publish(t *testing.T, c helmtest.Chart, key *verifytest.PGPKey) *helmtest.Version {
	t.Helper()
	if key == nil {
		return r.repo.Add(t, c)
	}
	return r.repo.AddSigned(t, c, key.SignProv)
}

func (r *provRig) source(t *testing.T) registry.Source {
	return r.repo.Source(t, registry.HelmConfig{Verify: r.policy})
}

func (r *provRig) provs() int { return r.repo.Count(helmtest.IsProvenance) }

// With verify.provenance, a chart repository offers a chart only when
// its .prov is signed by a key of the keyring and names the archive's
// bytes; it then carries who signed it (the key's fingerprint and user
// id) and the archive's digest. Every other chart is its own error,
// saying why in one line (the rejection as an OCI manifest's: missing,
// invalid, other digest, untrusted), with no Upstream, so a .prov
// published later is found. Without verify the same charts are all
// offered, with no provenance and no .prov request.
func TestHelmProvenanceOffersOnlySigned(t *testing.T) {
	t.Parallel()
	r := newProvRig(t)
	signed := r.publish(t, chart("signed", "1.0.0"), r.owner)
	r.publish(t, chart("unsigned", "1.0.0"), nil)
	r.publish(t, chart("stranger", "1.0.0"), r.stranger)
	// A .prov of other bytes (the chart rebuilt after signing).
	mismatch := chart("mismatch", "1.0.0")
	r.repo.AddVersion(t, helmtest.Version{Chart: mismatch, Prov: r.owner.SignProv(t, mismatch.ChartYAMLText(t), mismatch.ArchiveName(), []byte("the archive as signed"))})
	// A signed .prov whose Chart.yaml part was edited afterwards.
	tampered := chart("tampered", "1.0.0")
	tv := helmtest.Version{Chart: tampered, Archive: tampered.Archive(t)}
	tv.Prov = bytes.Replace(r.owner.SignProv(t, tampered.ChartYAMLText(t), tampered.ArchiveName(), tv.Archive),
		[]byte("the tampered chart"), []byte("the trusted chart"), 1)
	if bytes.Equal(tv.Prov, r.owner.SignProv(t, tampered.ChartYAMLText(t), tampered.ArchiveName(), tv.Archive)) {
		t.Fatal("the tampered .prov is not altered")
	}
	r.repo.AddVersion(t, tv)

	got := byName(fetch(t, r.source(t)))
	e := got["signed"]
	if e.Err != nil || e.Spec == nil {
		t.Fatalf("the signed chart is not offered: %v", e.Err)
	}
	want := "sha256:" + signed.Digest
	if p := e.Spec.Provenance; p == nil || p.Key != r.owner.Fingerprint() || p.Identity != r.owner.UserID() || p.Digest != want {
		t.Errorf("provenance %+v, want key %s, user id %q, digest %s", e.Spec.Provenance, r.owner.Fingerprint(), r.owner.UserID(), want)
	}
	if !strings.HasSuffix(e.Upstream, " verify "+load(t, r.policy).Digest()) {
		t.Errorf("the signed chart's Upstream %q does not name the policy", e.Upstream)
	}
	for name, says := range map[string]string{
		"unsigned": "unsigned: no signature of sha256:" + helmtest.Digest(r.archive(t, "unsigned")) + " found (" + r.repo.URL + "/unsigned-1.0.0.tgz.prov: 404 Not Found)",
		"stranger": "is signed, but not by whom verify accepts (signed by key " + strings.TrimPrefix(r.stranger.Fingerprint(), "openpgp:"),
		"mismatch": "signs another archive (it signs mismatch-1.0.0.tgz as sha256:" + verifytest.Digest([]byte("the archive as signed")),
		"tampered": "has no signature that verifies",
	} {
		e := got[name]
		if e.Err == nil || e.Spec != nil || e.Upstream != "" {
			t.Errorf("%s: offered (err %v, upstream %q), want refused with no Upstream", name, e.Err, e.Upstream)
			continue
		}
		if msg := e.Err.Error(); !strings.HasPrefix(msg, "chart "+name+" version 1.0.0: ") || !strings.Contains(msg, says) || strings.Contains(msg, "\n") || verify.Rejected(e.Err) == nil {
			t.Errorf("%s: error %q, want a one-line rejection saying %q", name, msg, says)
		}
	}

	r.repo.Reset()
	plain := byName(fetch(t, r.repo.Source(t, registry.HelmConfig{})))
	for _, name := range []string{"signed", "unsigned", "stranger", "mismatch", "tampered"} {
		if e := plain[name]; e.Err != nil || e.Spec == nil || e.Spec.Provenance != nil {
			t.Errorf("without verify, %s: err %v, provenance %+v", name, e.Err, e.Spec)
		}
	}
	if n := r.provs(); n != 0 {
		t.Errorf("without verify, %d .prov requests", n)
	}
}

// archive is the archive the repository serves for chart name 1.0.0.
func (r *provRig) archive(t *testing.T, name string) []byte {
	t.Helper()
	resp, err := http.Get(r.repo.URL + "/" + name + "-1.0.0.tgz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func load(t *testing.T, p *verify.Policy) *verify.Verifier {
	t.Helper()
	v, err := verify.Load(*p)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A .prov that cannot be fetched is not a chart's problem: a 5xx (its
// status and Retry-After kept, as registry.Status reads them) or a
// timeout fails the fetch whole, so nothing is marked.
func TestHelmProvenanceLookupFailureFailsTheFetch(t *testing.T) {
	t.Parallel()
	r := newProvRig(t)
	r.publish(t, chart("a", "1.0.0"), r.owner)
	r.publish(t, chart("b", "1.0.0"), r.owner)
	r.repo.SetFault(func(w http.ResponseWriter, req *http.Request) bool {
		if strings.HasSuffix(req.URL.Path, "/b-1.0.0.tgz.prov") {
			w.Header().Set("Retry-After", "30")
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	err := fetchFails(t, r.source(t), "chart b version 1.0.0: provenance "+r.repo.URL+"/b-1.0.0.tgz.prov", "503")
	if code, ra := registry.Status(err); code != http.StatusServiceUnavailable || ra != "30" {
		t.Errorf("registry.Status %d %q, want 503 and its Retry-After", code, ra)
	}

	// A .prov that never answers: the fetch's timeout ends it, whole.
	r.repo.SetFault(func(w http.ResponseWriter, req *http.Request) bool {
		if strings.HasSuffix(req.URL.Path, ".prov") {
			<-req.Context().Done()
			return true
		}
		return false
	})
	src := r.repo.Source(t, registry.HelmConfig{Verify: r.policy, Timeout: 2 * time.Second})
	_, err = src.Fetch(context.Background(), registry.FetchOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a .prov that never answers: %v, want the fetch to fail on its deadline", err)
	}
}

// What verify costs stays with what moved. Unchanged, a chart costs no
// .prov request: not on the same instance (it remembers the digests it
// verified), not on a new one when the index answers 304 to its
// validator, nor when given the run's hints (the policy is in the
// Upstream a hint names). A chart that moved is verified again, alone. A
// policy that accepts something else (a key added) sends no validator
// and takes no hint of the old one: every chart is verified again.
func TestHelmProvenanceCostsOnlyWhatMoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newProvRig(t)
	var sent atomic.Value // the index request's If-None-Match
	r.repo.SetFault(func(w http.ResponseWriter, req *http.Request) bool {
		if strings.HasSuffix(req.URL.Path, "/index.yaml") {
			sent.Store(req.Header.Get("If-None-Match"))
		}
		return false
	})
	for i := range 3 {
		r.publish(t, chart(fmt.Sprintf("c%d", i), "1.0.0"), r.owner)
	}
	src := r.source(t)
	first := fetch(t, src)
	if len(first.Entries) != 3 || r.provs() != 3 {
		t.Fatalf("first fetch: %d entries, %d .prov requests, want 3 and 3", len(first.Entries), r.provs())
	}

	// The same instance, the index changed (a prerelease passed over):
	// no .prov, no archive.
	r.publish(t, chart("c0", "2.0.0-rc.1"), r.owner)
	r.repo.Reset()
	warm := fetch(t, src)
	if len(warm.Entries) != 3 || r.provs() != 0 || r.repo.Count(helmtest.IsArchive) != 0 || warm.ETag == "" {
		t.Errorf("warm, unchanged: %d entries, %d .prov and %d archive requests, validator %q: %v",
			len(warm.Entries), r.provs(), r.repo.Count(helmtest.IsArchive), warm.ETag, r.repo.Requests())
	}
	// A new instance, with the index's validator: a 304.
	r.repo.Reset()
	l, err := r.source(t).Fetch(ctx, registry.FetchOptions{ETag: warm.ETag, PreviousDigest: warm.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if !l.NotModified || r.provs() != 0 || sent.Load() == "" {
		t.Errorf("cold, validator %q: not modified %v, %d .prov requests, If-None-Match %q", warm.ETag, l.NotModified, r.provs(), sent.Load())
	}

	// A key added to the keyring: no validator sent, no hint taken,
	// every chart verified again.
	rotated := verifytest.ProvenancePolicy(t, r.owner, verifytest.NewPGPKey(t, "Acme Charts 2027", "charts@acme.example"))
	r.repo.Reset()
	var asked atomic.Int32
	l, err = r.repo.Source(t, registry.HelmConfig{Verify: rotated}).Fetch(ctx,
		registry.FetchOptions{ETag: warm.ETag, PreviousDigest: warm.Digest, Hints: answering(hintsOf(warm), &asked)})
	if err != nil {
		t.Fatal(err)
	}
	if l.NotModified || r.provs() != 3 || len(l.Entries) != 3 || sent.Load() != "" {
		t.Errorf("another policy: not modified %v, %d .prov requests (want 3), %d entries, If-None-Match %q: %v",
			l.NotModified, r.provs(), len(l.Entries), sent.Load(), r.repo.Requests())
	}
	for _, e := range l.Entries {
		if e.Hint != nil || e.Spec == nil || e.Spec.Provenance == nil {
			t.Errorf("another policy, %s: hint %v, spec %+v", e.Name, e.Hint, e.Spec)
		}
	}

	// One chart moves; a new instance with the hints reads and verifies
	// it alone.
	r.publish(t, chart("c1", "1.1.0"), r.owner)
	r.repo.Reset()
	asked.Store(0)
	l, err = r.source(t).Fetch(ctx, registry.FetchOptions{PreviousDigest: first.Digest, Hints: answering(hintsOf(first), &asked)})
	if err != nil {
		t.Fatal(err)
	}
	got := byName(l)
	moved := r.repo.Count(func(_, p string) bool { return strings.HasSuffix(p, "/c1-1.1.0.tgz.prov") })
	if r.provs() != 1 || moved != 1 || asked.Load() != 1 {
		t.Errorf("one moved, cold: %d .prov requests, want the moved chart's alone; hints asked %d: %v", r.provs(), asked.Load(), r.repo.Requests())
	}
	if s := got["c1"].Spec; s == nil || s.MaintenanceVersion != "1.1.0" || s.Provenance == nil || s.Provenance.Key != r.owner.Fingerprint() {
		t.Errorf("the moved chart is not verified: %+v", got["c1"])
	}
	for _, e := range []string{"c0", "c2"} {
		if got[e].Hint == nil {
			t.Errorf("%s was not given back from its hint: %+v", e, got[e])
		}
	}
}

// A refused chart has no Upstream and is remembered as refused nowhere:
// the next fetch asks for its .prov again (even on the instance that
// cached its archive), and a .prov published since makes it offered.
func TestHelmProvenancePublishedLaterIsFound(t *testing.T) {
	t.Parallel()
	r := newProvRig(t)
	c := chart("late", "1.0.0")
	v := r.publish(t, c, nil)
	src := r.source(t)
	if e := byName(fetch(t, src))["late"]; e.Err == nil {
		t.Fatalf("an unsigned chart is offered: %+v", e)
	}
	v.Prov = r.owner.SignProv(t, c.ChartYAMLText(t), c.ArchiveName(), v.Archive)
	r.repo.AddVersion(t, *v)
	r.repo.Reset()
	e := byName(fetch(t, src))["late"]
	if e.Err != nil || e.Spec == nil || e.Spec.Provenance == nil || r.provs() != 1 {
		t.Errorf("signed later: err %v, %d .prov requests", e.Err, r.provs())
	}
}

// A chart repository's verify block checks provenance only: one built
// with keys (pkg/config refuses it at load) fails the fetch rather than
// publish unverified, and so does a keyring that cannot be read.
func TestHelmProvenanceRefusesWhatItCannotHonour(t *testing.T) {
	t.Parallel()
	r := newProvRig(t)
	r.publish(t, chart("a", "1.0.0"), r.owner)
	fetchFails(t, r.repo.Source(t, registry.HelmConfig{Verify: verifytest.Policy(t, verifytest.NewKey(t))}), "verified by their Helm provenance (verify.provenance)")
	missing := &verify.Policy{Provenance: &verify.Provenance{KeyringFile: "/nonexistent/keyring.asc"}}
	fetchFails(t, r.repo.Source(t, registry.HelmConfig{Verify: missing}), "verify.provenance", "/nonexistent/keyring.asc")
}

// A .prov goes with the credentials its archive would: the repository's
// on its own host, none elsewhere. Not parallel: it sets the
// environment.
func TestHelmProvenanceCredentialsStayHome(t *testing.T) {
	const password = "pw-helm-prov-canary-0123"
	t.Setenv("SPECSYNC_HELM_PROV_PW", password)
	auth := registry.Auth{Type: "basic", Username: "bob", PasswordEnv: "SPECSYNC_HELM_PROV_PW"}
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth("bob", password)
	want := req.Header.Get("Authorization")

	r := newProvRig(t)
	far := chart("far", "1.0.0")
	farArchive := far.Archive(t)
	farProv := r.owner.SignProv(t, far.ChartYAMLText(t), far.ArchiveName(), farArchive)
	var mu sync.Mutex
	elsewhere := map[string]string{}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		elsewhere[req.URL.Path] = req.Header.Get("Authorization")
		mu.Unlock()
		if strings.HasSuffix(req.URL.Path, ".prov") {
			w.Write(farProv)
			return
		}
		w.Write(farArchive)
	}))
	t.Cleanup(other.Close)

	r.publish(t, chart("near", "1.0.0"), r.owner)
	r.repo.AddVersion(t, helmtest.Version{Chart: far, Archive: farArchive, URL: other.URL + "/far-1.0.0.tgz"})
	r.repo.SetFault(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Header.Get("Authorization") != want {
			http.Error(w, "refused", http.StatusUnauthorized)
			return true
		}
		return false
	})
	got := byName(fetch(t, r.repo.Source(t, registry.HelmConfig{Auth: auth, Verify: r.policy})))
	for _, e := range []string{"near", "far"} {
		if got[e].Err != nil || got[e].Spec == nil || got[e].Spec.Provenance == nil {
			t.Errorf("%s: %v", e, got[e].Err)
		}
	}
	if r.provs() != 1 {
		t.Errorf("%d .prov requests at the repository, want near's: %v", r.provs(), r.repo.Requests())
	}
	mu.Lock()
	defer mu.Unlock()
	if v, ok := elsewhere["/far-1.0.0.tgz.prov"]; !ok || v != "" {
		t.Errorf("the .prov on another host: asked %v, credentials %q", ok, v)
	}
}
