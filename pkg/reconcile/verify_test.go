package reconcile_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/feed"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/verify"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// verifiedSource is a new OCI source of the registry (a new instance)
// with a verify block.
func (u *upstream) verifiedSource(tb testing.TB, name string, p *verify.Policy) reconcile.Registry {
	tb.Helper()
	src, err := registry.NewOCI(registry.OCIConfig{Host: u.host, Insecure: true, PageSize: 100, Verify: p})
	if err != nil {
		tb.Fatal(err)
	}
	return reconcile.Registry{Name: name, Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}}
}

// digest is the manifest repo:latest names.
func (u *upstream) digest(tb testing.TB, repo string) (name.Repository, v1.Hash) {
	tb.Helper()
	tag, err := name.NewTag(u.host+"/"+repo+":latest", name.Insecure)
	if err != nil {
		tb.Fatal(err)
	}
	desc, err := remote.Head(tag)
	if err != nil {
		tb.Fatal(err)
	}
	u.counts()
	return tag.Context(), desc.Digest
}

// sign signs repo:latest's manifest with k; the signing's requests are
// not counted.
func (u *upstream) sign(tb testing.TB, k *verifytest.Key, repo string) v1.Hash {
	tb.Helper()
	r, d := u.digest(tb, repo)
	k.Sign(tb, r, d)
	u.counts()
	return d
}

// An entry whose signature is refused is that entry's error, exactly as
// a bad label: through a full run and a targeted one (a webhook's push),
// the spec keeps its last verified version, is not marked, and the status
// says why in one line; signed, the new version is adopted with who
// signed it. A signature lookup that fails fails the run: nothing is
// marked or changed. The invariant checker runs at the end (env).
func TestVerifyRefusedEntryKeepsItsVerifiedVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	up := newUpstream(t)
	owner := verifytest.NewKey(t)
	policy := verifytest.Policy(t, owner)
	for _, n := range []string{"svc-a", "svc-b"} {
		up.push(t, n, specYAML(n))
		up.sign(t, owner, n)
	}
	_, first := up.digest(t, "svc-a")
	src := up.verifiedSource(t, "team", policy)
	if run := e.run(src); run.Result != api.ResultSucceeded || run.Counts.Created != 2 {
		t.Fatalf("first run: %s %+v %s", run.Result, run.Counts, run.Error)
	}
	provenance := func(entry string) (string, string) {
		t.Helper()
		rec := e.specs("team")[entry]
		s, err := rec.Spec()
		if err != nil || s.Provenance == nil {
			t.Fatalf("%s: stored spec without provenance: %v", entry, err)
		}
		return s.Provenance.Key, s.Provenance.Digest
	}
	if key, d := provenance("svc-a"); key != owner.Fingerprint(t) || d != first.String() {
		t.Errorf("stored provenance key %s digest %s, want %s %s", key, d, owner.Fingerprint(t), first)
	}
	// The change feed's entry carries it, as the catalog serves it.
	cs, err := e.store.ChangesAfter(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var fed map[string]any
	for _, c := range cs {
		if c.Name == "svc-a" {
			if svc := feed.FromChange(c).Service; svc != nil {
				fed, _ = svc.Metadata["provenance"].(map[string]any)
			}
		}
	}
	if fed["key"] != owner.Fingerprint(t) || fed["digest"] != first.String() {
		t.Errorf("the change feed's svc-a says provenance %v, want key %s and digest %s", fed, owner.Fingerprint(t), first)
	}
	kept := e.specs("team")["svc-a"]
	rev := e.revision()

	check := func(how string, run store.Run, err error) {
		t.Helper()
		if err != nil || run.Result != api.ResultSucceeded || run.Counts.Updated != 0 || run.Counts.Marked != 0 {
			t.Fatalf("%s: %s %+v %s %v", how, run.Result, run.Counts, run.Error, err)
		}
		rec := e.specs("team")["svc-a"]
		if rec.Digest != kept.Digest || rec.State != api.SpecActive {
			t.Errorf("%s: the spec moved to %s (%s): an unsigned version was adopted or the spec marked", how, rec.Digest, rec.State)
		}
		if !strings.Contains(rec.EntryError, "unsigned") {
			t.Errorf("%s: the spec's entry error is %q, want why", how, rec.EntryError)
		}
		if len(run.Errors) != 1 || run.Errors[0].Entry != "svc-a" || !strings.Contains(run.Errors[0].Message, "unsigned: no signature of sha256:") || strings.Contains(run.Errors[0].Message, "\n") {
			t.Errorf("%s: the run's errors %+v, want one line saying svc-a is unsigned", how, run.Errors)
		}
		if got := e.revision(); got != rev {
			t.Errorf("%s: the catalog moved from revision %d to %d", how, rev, got)
		}
	}
	up.push(t, "svc-a", changedSpec("svc-a"))
	run, err := e.runner.Reconcile(context.Background(), src)
	e.commit()
	check("a full run", run, err)
	if st := e.status("team"); len(st.LastRun.Errors) != 1 || st.LastRun.Errors[0].Message != run.Errors[0].Message {
		t.Errorf("the status's last run errors %+v, want the run's", st.LastRun.Errors)
	}

	up.push(t, "svc-a", specYAML("svc-a")+"tags: [pushed]\n")
	run, err = e.runner.ReconcileEntries(context.Background(), up.verifiedSource(t, "team", policy), []string{"svc-a"})
	e.commit()
	check("a targeted run (a webhook's push)", run, err)

	// Its signature pushed after the image: the next run adopts it.
	signed := up.sign(t, owner, "svc-a")
	if run := e.run(src); run.Result != api.ResultSucceeded || run.Counts.Updated != 1 {
		t.Fatalf("after signing: %s %+v %s", run.Result, run.Counts, run.Error)
	}
	if _, d := provenance("svc-a"); d != signed.String() {
		t.Errorf("adopted provenance digest %s, want %s", d, signed)
	}
	if st := e.status("team"); len(st.LastRun.Errors) != 0 {
		t.Errorf("status errors after signing: %+v", st.LastRun.Errors)
	}

	// A lookup that fails: the run fails, nothing is marked or changed.
	up.push(t, "svc-b", changedSpec("svc-b"))
	up.setFail(func(r *http.Request) bool { return requestKind(r) == reqSignature })
	before := e.specs("team")
	run, err = e.runner.Reconcile(context.Background(), up.verifiedSource(t, "team", policy))
	e.commit()
	up.setFail(nil)
	if err != nil || run.Result.OK() {
		t.Fatalf("a run whose signature lookups fail: %s %+v %v", run.Result, run.Counts, err)
	}
	if !strings.Contains(run.Error, "looking up signatures") {
		t.Errorf("the run's error %q does not say the lookup failed", run.Error)
	}
	for n, rec := range e.specs("team") {
		if rec.Digest != before[n].Digest || rec.State != before[n].State || rec.EntryError != before[n].EntryError {
			t.Errorf("%s changed in a failed run", n)
		}
	}
}

// What verification costs stays with the change, counted at the
// registry and in Firestore, with and without the verify block in the
// same test: on a new instance, an unchanged registry of 1,000 signed
// repositories costs its catalog pages and a HEAD a repository, no
// signature lookup, and one Firestore read, verify on or off; one moved
// repository adds its manifest, config and its own digest's signature
// lookups, nothing of the others.
//
// Not parallel: 1,000 repositories, as TestColdRunCostsOneHeadARepository.
func TestVerifyCostStaysWithTheChange(t *testing.T) {
	const n, pages = 1000, 11
	e := newEnv(t)
	e.end.Shallow = true
	up := newUpstream(t)
	names := svcNames(n)
	up.pushAll(t, names)
	owner := verifytest.NewKey(t)
	var wg sync.WaitGroup
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for r := range work {
				up.sign(t, owner, r)
			}
		})
	}
	for _, r := range names {
		work <- r
	}
	close(work)
	wg.Wait()
	policy := verifytest.Policy(t, owner)
	for _, verifyOn := range []bool{true, false} {
		mode := map[bool]string{true: "verify on", false: "verify off"}[verifyOn]
		src := func() reconcile.Registry {
			if verifyOn {
				return up.verifiedSource(t, "team", policy)
			}
			return up.source(t, "team")
		}
		// A first run with the mode: turning verify on or off changes
		// every Upstream, so every entry is read (and verified) once.
		if run := e.run(src()); !run.Result.OK() {
			t.Fatalf("%s: first run: %s %s", mode, run.Result, run.Error)
		}
		up.counts()
		run, err := e.runner.Reconcile(context.Background(), src())
		e.commit()
		got := up.counts()
		if err != nil || run.Result != api.ResultUnchanged {
			t.Fatalf("%s: unchanged run: %s %v %s", mode, run.Result, err, run.Error)
		}
		if got[reqCatalog] != pages || got[reqHead] != n || got[reqGetManifest] != 0 || got[reqGetBlob] != 0 || got[reqSignature] != 0 {
			t.Errorf("%s: a cold unchanged run cost %s, want %d catalog pages and %d HEADs only", mode, formatCounts(got), pages, n)
		}
		if run.Ops != (store.Counts{Reads: 1}) {
			t.Errorf("%s: a cold unchanged run cost %+v in Firestore, want 1 read", mode, run.Ops)
		}
		t.Logf("%s, cold, unchanged, %d repositories: %s; Firestore %+v", mode, n, formatCounts(got), run.Ops)

		moved := names[n/3]
		up.push(t, moved, changedSpec(moved)+map[bool]string{true: "tags: [verify-on]\n", false: "tags: [verify-off]\n"}[verifyOn])
		var d v1.Hash
		if verifyOn {
			d = up.sign(t, owner, moved)
		}
		// Beyond the catalog, the HEADs and the pings, every request is of
		// the moved repository, and every signature lookup of its digest.
		var mu sync.Mutex
		var others []string
		up.setFail(func(r *http.Request) bool {
			k := requestKind(r)
			elsewhere := k != reqCatalog && k != reqHead && k != reqPing && !strings.HasPrefix(r.URL.Path, "/v2/"+moved+"/")
			if elsewhere || (k == reqSignature && !strings.Contains(r.URL.Path, d.Hex)) {
				mu.Lock()
				others = append(others, r.Method+" "+r.URL.Path)
				mu.Unlock()
			}
			return false
		})
		run, err = e.runner.Reconcile(context.Background(), src())
		e.commit()
		up.setFail(nil)
		got = up.counts()
		if err != nil || run.Result != api.ResultSucceeded || run.Counts.Updated != 1 {
			t.Fatalf("%s: one moved: %s %+v %v %s", mode, run.Result, run.Counts, err, run.Error)
		}
		// Its manifest and config; with verify, its digest's referrers
		// (a 404 here: distribution lacks the API) and referrers tag
		// (sha256-<hex>), and the one signature's manifest and bundle.
		want := map[string]int{reqHead: n, reqGetManifest: 1, reqGetBlob: 1}
		if verifyOn {
			want = map[string]int{reqHead: n, reqGetManifest: 2, reqGetBlob: 2, reqSignature: 2}
		}
		if got[reqHead] != want[reqHead] || got[reqGetManifest] != want[reqGetManifest] || got[reqGetBlob] != want[reqGetBlob] || got[reqSignature] != want[reqSignature] || len(others) != 0 {
			t.Errorf("%s: one moved cost %s (requests not of the moved digest: %v), want %s", mode, formatCounts(got), others, formatCounts(want))
		}
		t.Logf("%s, cold, one moved: %s; Firestore %+v", mode, formatCounts(got), run.Ops)
	}
}

// A key is rotated as docs/operations.md says with no run refusing a
// good spec: the new key added beside the old, every entry is verified
// again and still offered; signed again and the old key removed, each
// names the new key; one not signed again is an entry error whose last
// verified version stays served.
func TestVerifyKeyRotationHasNoWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	up := newUpstream(t)
	old, next := verifytest.NewKey(t), verifytest.NewKey(t)
	names := []string{"svc-a", "svc-b", "svc-c"}
	for _, n := range names {
		up.push(t, n, specYAML(n))
		up.sign(t, old, n)
	}
	step := func(what string, p *verify.Policy, errors int) {
		t.Helper()
		run := e.run(up.verifiedSource(t, "team", p))
		if !run.Result.OK() || run.Counts.EntryErrors != errors || run.Counts.Marked != 0 {
			t.Fatalf("%s: %s %+v %s %v", what, run.Result, run.Counts, run.Error, run.Errors)
		}
		for _, n := range names {
			if rec := e.specs("team")[n]; rec.State != api.SpecActive {
				t.Errorf("%s: %s is %s", what, n, rec.State)
			}
		}
	}
	step("old key", verifytest.Policy(t, old), 0)
	step("old and new keys", verifytest.Policy(t, old, next), 0)
	for _, n := range names[:2] {
		up.sign(t, next, n)
	}
	step("signed again with the new key, old and new listed", verifytest.Policy(t, old, next), 0)
	step("the old key removed", verifytest.Policy(t, next), 1)
	for _, n := range names {
		rec := e.specs("team")[n]
		s, err := rec.Spec()
		if err != nil || s.Provenance == nil {
			t.Fatalf("%s: %v", n, err)
		}
		want := next.Fingerprint(t)
		if n == "svc-c" {
			want = old.Fingerprint(t) // its last verified version, still served
		}
		if s.Provenance.Key != want {
			t.Errorf("%s: signed by %s, want %s", n, s.Provenance.Key, want)
		}
	}
	if rec := e.specs("team")["svc-c"]; !strings.Contains(rec.EntryError, "not by whom verify accepts") {
		t.Errorf("svc-c, signed only with the removed key: entry error %q", rec.EntryError)
	}
}
