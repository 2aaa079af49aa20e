package registry_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
)

// helmRig is one form of the helm source for the hints test: how to
// publish a chart, a new instance's source, and what its requests cost.
type helmRig struct {
	push   func(t *testing.T, c helmtest.Chart)
	source func(t *testing.T) registry.Source
	// reads counts the requests that read a chart's content (manifest and
	// blob GETs; archive GETs), lookups those that only name its digest
	// (manifest HEADs; none for an index, which names them all).
	reads, lookups func() int
	reset          func()
	requests       func() []string
}

func helmRigs() map[string]func(t *testing.T) helmRig {
	get := func(match func(string, string) bool) func(string, string) bool {
		return func(m, p string) bool { return m == http.MethodGet && match(m, p) }
	}
	return map[string]func(t *testing.T) helmRig{
		"oci": func(t *testing.T) helmRig {
			reg := helmtest.NewRegistry(t)
			return helmRig{
				push:   func(t *testing.T, c helmtest.Chart) { reg.Push(t, "charts/"+c.Name, c) },
				source: func(t *testing.T) registry.Source { return reg.Source(t, registry.HelmConfig{Prefix: "charts"}) },
				reads: func() int {
					return reg.Count(get(helmtest.IsManifest)) + reg.Count(get(helmtest.IsBlob))
				},
				lookups: func() int {
					return reg.Count(func(m, p string) bool { return m == http.MethodHead && helmtest.IsManifest(m, p) })
				},
				reset: reg.Reset, requests: reg.Requests,
			}
		},
		"repository": func(t *testing.T) helmRig {
			repo := helmtest.NewRepo(t)
			return helmRig{
				push:    func(t *testing.T, c helmtest.Chart) { repo.Add(t, c) },
				source:  func(t *testing.T) registry.Source { return repo.Source(t, registry.HelmConfig{}) },
				reads:   func() int { return repo.Count(helmtest.IsArchive) },
				lookups: func() int { return 0 },
				reset:   repo.Reset, requests: repo.Requests,
			}
		},
	}
}

// A new instance of the helm source costs what an image's does: charts
// at the versions and digests of the previous listing are NotModified
// without a chart read (OCI: one HEAD a chart, no GET of a manifest or a
// blob; a chart repository whose index changed but not what it offers:
// the index alone); a listing that moved reads only the charts whose
// digest moved, the others given back from the run's hints (asked once),
// and its digest is the one a full read gives. A library chart is a hint
// of nothing; a hint at another upstream is not taken.
func TestHelmTakesHints(t *testing.T) {
	t.Parallel()
	for form, newRig := range helmRigs() {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newRig(t)
			const n = 5
			for i := range n {
				r.push(t, chart(fmt.Sprintf("c%d", i), "1.0.0"))
			}
			lib := chart("lib", "1.0.0")
			lib.Type = "library"
			r.push(t, lib)
			first := fetch(t, r.source(t))
			if len(first.Entries) != n || len(first.Quiet) != 1 {
				t.Fatalf("first read: %d entries, %d quiet (%v)", len(first.Entries), len(first.Quiet), names(first))
			}
			for _, e := range append(first.Entries, first.Quiet...) {
				if !strings.HasPrefix(e.Upstream, "helm") {
					t.Fatalf("%s has no chart Upstream: %q", e.Name, e.Upstream)
				}
			}
			hints := hintsOf(first)

			// The index changes without changing what it offers: a
			// prerelease the source passes over.
			r.push(t, chart("c0", "2.0.0-rc.1"))
			r.reset()
			var asked atomic.Int32
			l, err := r.source(t).Fetch(ctx, registry.FetchOptions{PreviousDigest: first.Digest, Hints: answering(hints, &asked)})
			if err != nil {
				t.Fatal(err)
			}
			if !l.NotModified || l.Digest != first.Digest || r.reads() != 0 || asked.Load() != 0 {
				t.Fatalf("unchanged, cold: not modified %v, %d chart reads, hints asked %d: %v", l.NotModified, r.reads(), asked.Load(), r.requests())
			}
			if form == "oci" && r.lookups() != n+1 {
				t.Errorf("unchanged, cold: %d manifest HEADs, want one a chart (%d)", r.lookups(), n+1)
			}

			// One chart moves: it alone is read.
			r.push(t, chart("c3", "1.1.0"))
			r.reset()
			asked.Store(0)
			l, err = r.source(t).Fetch(ctx, registry.FetchOptions{PreviousDigest: first.Digest, Hints: answering(hints, &asked)})
			if err != nil {
				t.Fatal(err)
			}
			wantReads := 1 // the archive
			if form == "oci" {
				wantReads = 3 // manifest, config, archive
			}
			if l.NotModified || r.reads() != wantReads || asked.Load() != 1 {
				t.Fatalf("one moved, cold: not modified %v, %d chart reads (want %d), hints asked %d: %v", l.NotModified, r.reads(), wantReads, asked.Load(), r.requests())
			}
			got := byName(l)
			if s := got["c3"].Spec; s == nil || s.MaintenanceVersion != "1.1.0" || got["c3"].Hint != nil {
				t.Errorf("the moved chart: %+v", got["c3"])
			}
			for i := range n {
				if e := fmt.Sprintf("c%d", i); e != "c3" && (got[e].Hint == nil || got[e].Spec != nil) {
					t.Errorf("%s was not given back from its hint: %+v", e, got[e])
				}
			}
			if len(l.Quiet) != 1 || l.Quiet[0].Name != "lib" {
				t.Errorf("the library chart is not quiet from its hint: %+v", l.Quiet)
			}
			if full := fetch(t, r.source(t)); full.Digest != l.Digest {
				t.Errorf("a hinted listing's digest %s is not a full read's %s", l.Digest, full.Digest)
			}
		})
	}
}
