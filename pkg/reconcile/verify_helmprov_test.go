package reconcile_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/feed"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// A chart repository's chart whose new version's provenance is refused
// is that chart's error, exactly as an OCI manifest's refused signature:
// the spec keeps its last verified version, is not marked, the catalog
// does not move and the status says why in one line; its .prov published
// later, the version is adopted with who signed it, which the change feed
// carries. A .prov that cannot be fetched (a 503) fails the run: nothing
// is marked or changed. The invariant checker runs at the end (env).
func TestVerifyHelmProvenanceKeepsTheVerifiedVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	repo := helmtest.NewRepo(t)
	owner := verifytest.NewPGPKey(t, "Acme Charts", "charts@acme.example")
	policy := verifytest.ProvenancePolicy(t, owner)
	first := repo.AddSigned(t, helmChart("alpha", "1.0.0"), owner.SignProv)
	repo.AddSigned(t, helmChart("beta", "1.0.0"), owner.SignProv)
	reg := reconcile.Registry{Name: "charts", Source: repo.Source(t, registry.HelmConfig{Verify: policy}), Policy: defaultPolicy}
	if run := e.run(reg); run.Result != api.ResultSucceeded || run.Counts.Created != 2 {
		t.Fatalf("first run: %s %+v %s", run.Result, run.Counts, run.Error)
	}
	provenance := func(entry string) (key, identity, digest string) {
		t.Helper()
		rec := e.specs("charts")[entry]
		s, err := rec.Spec()
		if err != nil || s.Provenance == nil {
			t.Fatalf("%s: stored spec without provenance: %v", entry, err)
		}
		return s.Provenance.Key, s.Provenance.Identity, s.Provenance.Digest
	}
	if key, id, d := provenance("alpha"); key != owner.Fingerprint() || id != owner.UserID() || d != "sha256:"+first.Digest {
		t.Errorf("stored provenance %s %q %s, want %s %q sha256:%s", key, id, d, owner.Fingerprint(), owner.UserID(), first.Digest)
	}
	cs, err := e.store.ChangesAfter(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var fed map[string]any
	for _, c := range cs {
		if svc := feed.FromChange(c).Service; c.Name == "alpha" && svc != nil {
			fed, _ = svc.Metadata["provenance"].(map[string]any)
		}
	}
	if fed["key"] != owner.Fingerprint() || fed["digest"] != "sha256:"+first.Digest {
		t.Errorf("the change feed's alpha says provenance %v, want key %s", fed, owner.Fingerprint())
	}

	// alpha 1.1.0 published without its .prov.
	kept, rev := e.specs("charts")["alpha"], e.revision()
	unsigned := repo.Add(t, helmChart("alpha", "1.1.0"))
	run := e.run(reg)
	if run.Result != api.ResultSucceeded || run.Counts.Updated != 0 || run.Counts.Marked != 0 {
		t.Fatalf("unsigned 1.1.0: %s %+v %s", run.Result, run.Counts, run.Error)
	}
	if rec := e.specs("charts")["alpha"]; rec.Digest != kept.Digest || rec.State != api.SpecActive || !strings.Contains(rec.EntryError, "unsigned") {
		t.Errorf("alpha moved to %s (%s), entry error %q: want 1.0.0 kept, active, saying why", rec.Digest, rec.State, rec.EntryError)
	}
	if len(run.Errors) != 1 || run.Errors[0].Entry != "alpha" || strings.Contains(run.Errors[0].Message, "\n") ||
		!strings.Contains(run.Errors[0].Message, "chart alpha version 1.1.0: unsigned: no signature of sha256:"+unsigned.Digest) {
		t.Errorf("the run's errors %+v, want one line saying alpha 1.1.0 is unsigned", run.Errors)
	}
	if st := e.status("charts"); len(st.LastRun.Errors) != 1 || st.LastRun.Errors[0].Message != run.Errors[0].Message {
		t.Errorf("the status's last run errors %+v, want the run's", st.LastRun.Errors)
	}
	if got := e.revision(); got != rev {
		t.Errorf("the catalog moved from revision %d to %d", rev, got)
	}

	// Its .prov published after the archive: the next run adopts it.
	signed := repo.AddSigned(t, helmChart("alpha", "1.1.0"), owner.SignProv)
	if run := e.run(reg); run.Result != api.ResultSucceeded || run.Counts.Updated != 1 {
		t.Fatalf("after signing: %s %+v %s", run.Result, run.Counts, run.Error)
	}
	if _, _, d := provenance("alpha"); d != "sha256:"+signed.Digest || storedVersion(t, e.specs("charts")["alpha"]) != "1.1.0" {
		t.Errorf("adopted provenance digest %s, want sha256:%s at 1.1.0", d, signed.Digest)
	}

	// A .prov lookup that fails: the run fails, nothing changes.
	repo.AddSigned(t, helmChart("beta", "1.1.0"), owner.SignProv)
	repo.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, ".prov") {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	before := e.specs("charts")
	run, err = e.runner.Reconcile(context.Background(), reg)
	e.commit()
	repo.SetFault(nil)
	if err != nil || run.Result.OK() || !strings.Contains(run.Error, "beta-1.1.0.tgz.prov") {
		t.Fatalf("a run whose .prov lookup fails: %s %+v %q %v", run.Result, run.Counts, run.Error, err)
	}
	for n, rec := range e.specs("charts") {
		if rec.Digest != before[n].Digest || rec.State != before[n].State || rec.EntryError != before[n].EntryError {
			t.Errorf("%s changed in a failed run", n)
		}
	}
}
