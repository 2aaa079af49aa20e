package registry_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

// hintsOf are the hints a run would record of a listing: each entry's
// upstream digest and a spec of its own (the run's ids are not the
// source's business), and the quiet ones as hints of nothing.
func hintsOf(l *registry.Listing) map[string]registry.Hint {
	out := map[string]registry.Hint{}
	for _, e := range l.Entries {
		if e.Spec != nil {
			out[e.Name] = registry.Hint{Upstream: e.Upstream, SpecID: "id-" + e.Name, SpecName: e.Spec.Name, SpecDigest: "digest-" + e.Name}
		}
	}
	for _, e := range l.Quiet {
		out[e.Name] = registry.Hint{Upstream: e.Upstream}
	}
	return out
}

// answering counts how often the source asks for hints.
func answering(hints map[string]registry.Hint, asked *atomic.Int32) func(context.Context) (map[string]registry.Hint, error) {
	return func(context.Context) (map[string]registry.Hint, error) {
		asked.Add(1)
		return hints, nil
	}
}

func isGetManifest(method, uri string) bool {
	return method == http.MethodGet && isManifest(method, uri)
}

// Every source that reads images through the OCI path (oci, dockerhub,
// ghcr, quay) takes the run's hints: a new instance gives back, unread, each
// entry found at the upstream digest a hint names (no manifest, no config
// GET, a HEAD each), asks for the hints once, and not at all when the tag
// lookups alone show the listing is the previous one (NotModified); its
// listing's digest is the one a read gives.
func TestOCIPathSourcesTakeHints(t *testing.T) {
	t.Parallel()
	type rig struct {
		put      func(t *testing.T, entry string)
		source   func(t *testing.T) registry.Source
		registry *server
	}
	rigs := map[string]func(t *testing.T) rig{
		"oci": func(t *testing.T) rig {
			u := newOCIUpstream(t).(*ociUpstream)
			return rig{func(t *testing.T, e string) { u.put(t, e, specYAML(e)) },
				func(t *testing.T) registry.Source { return u.source(t, suiteConfig{pageSize: 100}) }, u.server}
		},
		"dockerhub": func(t *testing.T) rig {
			r := newDockerHubRig(t)
			return rig{func(t *testing.T, e string) { r.put(t, e, specYAML(e)) },
				func(t *testing.T) registry.Source { return r.source(t, suiteConfig{pageSize: 100}) }, r.registry}
		},
		"ghcr": func(t *testing.T) rig {
			r := newGHCRRig(t)
			return rig{func(t *testing.T, e string) { r.put(t, e, specYAML(e)) },
				func(t *testing.T) registry.Source { return r.source(t, suiteConfig{pageSize: 100}) }, r.registry}
		},
		"quay": func(t *testing.T) rig {
			r := newQuayRig(t)
			return rig{func(t *testing.T, e string) { r.put(t, e, specYAML(e)) },
				func(t *testing.T) registry.Source { return r.source(t, suiteConfig{pageSize: 100}) }, r.host}
		},
	}
	for name, newRig := range rigs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newRig(t)
			r.put(t, "a")
			r.put(t, "b")
			first := fetch(t, r.source(t))
			hints := hintsOf(first)
			if len(hints) != 2 || !strings.HasPrefix(hints["a"].Upstream, "oci1@sha256:") {
				t.Fatalf("hints %+v", hints)
			}

			var asked atomic.Int32
			r.registry.reset()
			l, err := r.source(t).Fetch(ctx, registry.FetchOptions{Hints: answering(hints, &asked)})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range l.Entries {
				if h := hints[e.Name]; e.Spec != nil || e.Hint == nil || *e.Hint != h || e.Upstream != h.Upstream {
					t.Errorf("entry %s: spec %v, hint %+v; want the hint given back, unread", e.Name, e.Spec, e.Hint)
				}
			}
			if len(l.Entries) != 2 || asked.Load() != 1 || l.Digest != first.Digest {
				t.Errorf("%d entries, hints asked %d times, digest %s (read: %s)", len(l.Entries), asked.Load(), l.Digest, first.Digest)
			}
			if n := r.registry.count(isGetManifest) + r.registry.count(isBlob); n != 0 {
				t.Errorf("a new instance with hints made %d manifest GETs and blob requests:\n%s", n, r.registry.log())
			}

			asked.Store(0)
			r.registry.reset()
			l, err = r.source(t).Fetch(ctx, registry.FetchOptions{PreviousDigest: first.Digest, Hints: answering(hints, &asked)})
			if err != nil || !l.NotModified || l.Digest != first.Digest || asked.Load() != 0 {
				t.Errorf("an unchanged listing: %+v, hints asked %d times, %v", l, asked.Load(), err)
			}
			if n := r.registry.count(isGetManifest) + r.registry.count(isBlob); n != 0 {
				t.Errorf("an unchanged listing made %d manifest GETs and blob requests", n)
			}

			r.registry.reset()
			named, err := r.source(t).(registry.EntryFetcher).FetchEntries(ctx, []string{"a"}, registry.FetchOptions{Hints: answering(hints, &asked)})
			if err != nil || len(named.Entries) != 1 || named.Entries[0].Hint == nil {
				t.Fatalf("named entry: %+v %v", named, err)
			}
			if n := r.registry.count(isManifest); n != 1 || r.registry.count(isBlob) != 0 {
				t.Errorf("a named entry with its hint: %d manifest requests (want its HEAD):\n%s", n, r.registry.log())
			}
		})
	}
}

// What the OCI source does with hints, one case an entry: a hint of
// another upstream digest (the tag moved, or back) is not taken; a hint
// of nothing keeps an image without a spec label unread; an entry without
// a hint (a broken label: a run never hints one) is read; the cache comes
// first, so a warm source asks for no hints; a manifest that could not be
// read has no upstream digest, so the next fetch reads it again even
// though its tag did not move; and a failure to answer fails the fetch.
func TestOCIHints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newGGCR(t)
	s.pushSpec(t, "a", specYAML("a"))
	s.pushSpec(t, "moved", specYAML("moved"))
	s.pushImage(t, "quiet", "latest", image(t, map[string]string{"org.example.other": "x"}, nil))
	s.pushImage(t, "broken", "latest", image(t, map[string]string{spec.LabelKey: "%%% not a spec"}, nil))
	warm := s.oci(t, registry.OCIConfig{})
	first := fetch(t, warm)
	if len(first.Quiet) != 1 || first.Quiet[0].Name != "quiet" || first.Quiet[0].Upstream == "" || byName(first)["broken"].Upstream == "" {
		t.Fatalf("first fetch: entries %v, quiet %+v", names(first), first.Quiet)
	}
	hints := hintsOf(first)
	moved := hints["moved"]
	moved.Upstream = "oci1@sha256:" + strings.Repeat("0", 64)
	hints["moved"] = moved

	var asked atomic.Int32
	s.reset()
	l, err := s.oci(t, registry.OCIConfig{}).Fetch(ctx, registry.FetchOptions{Hints: answering(hints, &asked)})
	if err != nil {
		t.Fatal(err)
	}
	got := byName(l)
	if got["a"].Hint == nil || got["moved"].Hint != nil || got["moved"].Spec == nil || got["broken"].Err == nil || len(l.Quiet) != 1 {
		t.Errorf("entries %+v, quiet %+v", got, l.Quiet)
	}
	read := func(repo string) int {
		return s.count(func(method, uri string) bool {
			return isGetManifest(method, uri) && strings.HasPrefix(uri, "/v2/"+repo+"/")
		})
	}
	if read("a") != 0 || read("quiet") != 0 || read("moved") != 1 || read("broken") != 1 {
		t.Errorf("manifests read: a %d, quiet %d, moved %d, broken %d; want 0, 0, 1, 1:\n%s", read("a"), read("quiet"), read("moved"), read("broken"), s.log())
	}
	if l.Digest != first.Digest || asked.Load() != 1 {
		t.Errorf("digest %s, want %s; hints asked %d times", l.Digest, first.Digest, asked.Load())
	}

	// Warm: the cache knows every manifest, so no hints are asked for.
	asked.Store(0)
	if _, err := warm.Fetch(ctx, registry.FetchOptions{Hints: answering(hints, &asked)}); err != nil || asked.Load() != 0 {
		t.Errorf("a warm fetch asked for hints %d times: %v", asked.Load(), err)
	}

	// The store fails answering: the fetch fails, with its error.
	storeDown := errors.New("the store is down")
	_, err = s.oci(t, registry.OCIConfig{}).Fetch(ctx, registry.FetchOptions{Hints: func(context.Context) (map[string]registry.Hint, error) { return nil, storeDown }})
	if !errors.Is(err, storeDown) {
		t.Errorf("a failure to answer for hints: %v", err)
	}

	// A manifest that cannot be read is read again, though its tag did
	// not move: the upstream digest alone does not say what it gives.
	s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v2/a/manifests/sha256:") {
			http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
			return true
		}
		return false
	})
	failed := fetch(t, s.oci(t, registry.OCIConfig{}))
	if a := byName(failed)["a"]; a.Err == nil || a.Upstream != "" {
		t.Fatalf("an unreadable manifest: %+v", a)
	}
	s.reset()
	// (A run hints the entries of the failed fetch but a: it is broken.)
	again, err := s.oci(t, registry.OCIConfig{}).Fetch(ctx, registry.FetchOptions{PreviousDigest: failed.Digest, Hints: answering(hintsOf(failed), &asked)})
	if err != nil || again.NotModified || read("a") == 0 || again.Digest != failed.Digest {
		t.Errorf("the fetch after an unreadable manifest: not modified %v, a read %d times, digest %s (%s): %v", again.NotModified, read("a"), again.Digest, failed.Digest, err)
	}
	s.setFault(nil)
	healed, err := s.oci(t, registry.OCIConfig{}).Fetch(ctx, registry.FetchOptions{PreviousDigest: failed.Digest})
	if err != nil || healed.NotModified || healed.Digest != first.Digest {
		t.Errorf("healed: %+v %v", healed, err)
	}
	if slices.ContainsFunc(healed.Entries, func(e registry.Entry) bool { return e.Name == "a" && e.Err != nil }) {
		t.Error("a is still broken")
	}
}
