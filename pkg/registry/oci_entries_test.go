package registry_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
)

func fetchEntries(t *testing.T, src *registry.OCI, names ...string) *registry.Listing {
	t.Helper()
	l, err := src.FetchEntries(context.Background(), names, registry.FetchOptions{})
	if err != nil {
		t.Fatalf("fetch entries %v: %v", names, err)
	}
	return l
}

// FetchEntries reads only the repositories it is named: no catalog
// request, nothing of the others; what they offer is what a full fetch
// says of them, entry for entry.
func TestOCIFetchEntriesReadsOnlyTheNamed(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	for _, r := range []string{"a", "b", "c", "team/d"} {
		s.pushSpec(t, r, specYAML(strings.ReplaceAll(r, "/", "-")))
	}
	src := s.oci(t, registry.OCIConfig{})
	full := byName(fetch(t, src))

	s.reset()
	l := fetchEntries(t, s.oci(t, registry.OCIConfig{}), "team/d", "a")
	if got := names(l); !slices.Equal(got, []string{"a", "team/d"}) {
		t.Fatalf("entries %v, want a and team/d", got)
	}
	for _, e := range l.Entries {
		if e.Err != nil || e.Spec == nil || e.Ref != full[e.Name].Ref || e.Spec.Name != full[e.Name].Spec.Name {
			t.Errorf("entry %s: %+v, want what the full fetch says: %+v", e.Name, e, full[e.Name])
		}
	}
	if n := s.count(isCatalog); n != 0 {
		t.Errorf("%d catalog requests, want none:\n%s", n, s.log())
	}
	for _, other := range []string{"/v2/b/", "/v2/c/"} {
		if n := s.count(func(_, uri string) bool { return strings.HasPrefix(uri, other) }); n != 0 {
			t.Errorf("%d requests under %s, which was not named:\n%s", n, other, s.log())
		}
	}
	if len(l.Refused) != 0 {
		t.Errorf("refused %v, want none", l.Refused)
	}
}

// A named entry whose repository is gone, whose tag is gone, or whose
// image offers no spec is absent from the listing: gone upstream. A
// broken label is that entry's error, as in a full fetch.
func TestOCIFetchEntriesGoneUpstream(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	s.pushSpec(t, "live", specYAML("live"))
	s.pushImage(t, "other-tag", "v1", specImage(t, specYAML("other-tag"), nil))
	s.pushImage(t, "no-spec", "latest", image(t, nil, nil))
	s.pushImage(t, "broken", "latest", image(t, map[string]string{"com.redhat.apb.spec": "not base64!"}, nil))

	l := fetchEntries(t, s.oci(t, registry.OCIConfig{}), "live", "never-pushed", "other-tag", "no-spec", "broken")
	if got := names(l); !slices.Equal(got, []string{"broken", "live"}) {
		t.Fatalf("entries %v, want broken and live only (the rest are gone)", got)
	}
	if e := byName(l)["broken"]; e.Err == nil || e.Spec != nil {
		t.Errorf("broken: %+v, want its own error", e)
	}
	if len(l.Refused) != 0 {
		t.Errorf("refused %v: a name that is gone is not refused", l.Refused)
	}
}

// A name the source does not select (its repository list, allow, deny,
// or no repository name at all) is neither fetched nor gone: it is
// listed as refused, and nothing is asked about it upstream.
func TestOCIFetchEntriesRefusesWhatItDoesNotSelect(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	for _, r := range []string{"kept", "internal/x", "unlisted"} {
		s.pushSpec(t, r, specYAML(strings.ReplaceAll(r, "/", "-")))
	}
	src := s.oci(t, registry.OCIConfig{Repositories: []string{"kept", "internal/x"}, Filter: mustFilter(t, nil, []string{"internal/.*"})})
	s.reset()
	l := fetchEntries(t, src, "kept", "internal/x", "unlisted", "Not A Repository", "kept")
	if got := names(l); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("entries %v, want kept", got)
	}
	if want := []string{"internal/x", "unlisted", "Not A Repository"}; !slices.Equal(l.Refused, want) {
		t.Errorf("refused %v, want %v", l.Refused, want)
	}
	if n := s.count(func(_, uri string) bool { return !strings.HasPrefix(uri, "/v2/kept/") && uri != "/v2/" }); n != 0 {
		t.Errorf("%d requests for what the source does not select:\n%s", n, s.log())
	}
	for _, name := range []string{"internal/x", "unlisted", "Not A Repository", "", "/kept", "kept/"} {
		if src.SelectsEntry(name) {
			t.Errorf("SelectsEntry(%q) = true", name)
		}
	}
	if !src.SelectsEntry("kept") {
		t.Error("SelectsEntry(kept) = false")
	}

	// Nothing selected: no request at all.
	s.reset()
	if l := fetchEntries(t, src, "unlisted"); len(l.Entries) != 0 || !slices.Equal(l.Refused, []string{"unlisted"}) {
		t.Errorf("only a refused name: %+v", l)
	}
	if log := s.log(); log != "" {
		t.Errorf("requests for nothing selected:\n%s", log)
	}
}

// Every named repository failing is the fetch's failure (the registry is
// down or refuses us): nothing may be concluded of any name. One of
// several failing is that entry's error.
func TestOCIFetchEntriesFailures(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	s.pushSpec(t, "a", specYAML("a"))
	s.pushSpec(t, "b", specYAML("b"))
	s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/v2/b/") {
			http.Error(w, "injected", http.StatusInternalServerError)
			return true
		}
		return false
	})
	l := fetchEntries(t, s.oci(t, registry.OCIConfig{}), "a", "b")
	if e := byName(l); len(l.Entries) != 2 || e["a"].Err != nil || e["b"].Err == nil || !strings.Contains(e["b"].Err.Error(), "repository b") {
		t.Fatalf("one of two failing: %+v", l.Entries)
	}
	if _, err := s.oci(t, registry.OCIConfig{}).FetchEntries(context.Background(), []string{"b"}, registry.FetchOptions{}); err == nil || !strings.Contains(err.Error(), "all 1 repositories failed") {
		t.Errorf("the only named repository failing: err %v, want the fetch's failure", err)
	}
	s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	if _, err := s.oci(t, registry.OCIConfig{}).FetchEntries(context.Background(), []string{"a", "b", "gone"}, registry.FetchOptions{}); err == nil {
		t.Error("a registry that is down: no error")
	}
}

// A fetch of named entries leaves the cache of the others alone: the
// next full fetch of an unchanged registry is still one HEAD a
// repository.
func TestOCIFetchEntriesKeepsTheCache(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	for _, r := range []string{"a", "b", "c"} {
		s.pushSpec(t, r, specYAML(r))
	}
	src := s.oci(t, registry.OCIConfig{})
	fetch(t, src)
	fetchEntries(t, src, "a")
	if n := registry.CacheSize(src); n != 3 {
		t.Fatalf("after fetching one entry the cache holds %d manifests, want 3", n)
	}
	s.reset()
	fetch(t, src)
	if n := s.count(isBlob); n != 0 {
		t.Errorf("the full fetch after a fetch of one entry read %d blobs, want 0:\n%s", n, s.log())
	}
}

// With a prefix, names are relative to it, as the full listing's are.
func TestOCIFetchEntriesUnderAPrefix(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	s.pushSpec(t, "proj/team/redis", specYAML("redis"))
	s.pushSpec(t, "redis", specYAML("top-redis"))
	l := fetchEntries(t, s.oci(t, registry.OCIConfig{Prefix: "proj/team"}), "redis")
	if e := byName(l)["redis"]; len(l.Entries) != 1 || e.Spec == nil || e.Spec.Name != "redis" || !strings.HasPrefix(e.Ref, s.host+"/proj/team/redis@") {
		t.Fatalf("entries %+v, want proj/team/redis as redis", l.Entries)
	}
}
