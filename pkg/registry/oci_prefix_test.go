package registry_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
)

// A prefix scopes the source to one path of the host, as an Artifact
// Registry repository (PROJECT/REPOSITORY) is: only what lies under it is
// listed, and entry names, repositories, allow and deny are relative to
// it, while refs name the full path.
func TestOCIPrefixScopesTheListing(t *testing.T) {
	s := newGGCR(t)
	for _, repo := range []string{"proj/team/redis", "proj/team/db/postgres", "proj/other/mysql", "proj/teamx/kafka", "top"} {
		s.pushSpec(t, repo, specYAML(strings.ReplaceAll(repo, "/", "-")))
	}

	l := fetch(t, s.oci(t, registry.OCIConfig{Prefix: "proj/team", PageSize: 1000}))
	if got, want := names(l), []string{"db/postgres", "redis"}; !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v (only what lies under proj/team/, relative to it)", got, want)
	}
	if ref := byName(l)["redis"].Ref; !strings.HasPrefix(ref, s.host+"/proj/team/redis@sha256:") {
		t.Errorf("ref %q does not name the full repository path", ref)
	}

	// allow, deny and repositories are relative to the prefix too.
	l = fetch(t, s.oci(t, registry.OCIConfig{Prefix: "proj/team/", PageSize: 1000, Filter: mustFilter(t, []string{"db/.*"}, nil)}))
	if got := names(l); !slices.Equal(got, []string{"db/postgres"}) {
		t.Errorf("allow db/.*: entries %v", got)
	}
	l = fetch(t, s.oci(t, registry.OCIConfig{Prefix: "proj/team", Repositories: []string{"redis"}}))
	if got := names(l); !slices.Equal(got, []string{"redis"}) {
		t.Errorf("repositories [redis] under proj/team: entries %v", got)
	}
	if e := byName(l)["redis"]; e.Err != nil || e.Spec == nil || e.Spec.Name != "proj-team-redis" {
		t.Errorf("redis entry: %+v", e)
	}
}

func TestNewOCIValidatesThePrefix(t *testing.T) {
	for _, bad := range []string{"Proj/Repo", "a//b", "a b"} {
		if _, err := registry.NewOCI(registry.OCIConfig{Host: "example.com", Prefix: bad}); err == nil || !strings.Contains(err.Error(), "prefix") {
			t.Errorf("prefix %q: err %v, want one naming the prefix", bad, err)
		}
	}
	_, err := registry.NewOCI(registry.OCIConfig{Host: "us-docker.pkg.dev/proj/repo"})
	if err == nil || !strings.Contains(err.Error(), "prefix") {
		t.Errorf("a host with a path: err %v, want one that points at prefix", err)
	}
}

// Select maps an event to the entry it concerns, or to none: the host,
// the prefix, the repository list, allow and deny, and the tag decide.
func TestOCISelect(t *testing.T) {
	src, err := registry.NewOCI(registry.OCIConfig{
		Host: "europe-docker.pkg.dev", Prefix: "proj/services", Tag: "stable",
		Filter: mustFilter(t, nil, []string{"internal/.*"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change registry.Change
		entry  string
	}{
		{"push of the tag", registry.Change{Host: "europe-docker.pkg.dev", Repository: "proj/services/redis", Tag: "stable"}, "redis"},
		{"host in another case", registry.Change{Host: "EUROPE-docker.pkg.dev", Repository: "proj/services/db/pg", Tag: "stable"}, "db/pg"},
		{"no host (a webhook of this registry)", registry.Change{Repository: "proj/services/redis", Tag: "stable"}, "redis"},
		{"delete of the tag", registry.Change{Repository: "proj/services/redis", Tag: "stable", Deleted: true}, "redis"},
		{"delete of a digest", registry.Change{Repository: "proj/services/redis", Digest: "sha256:ab", Deleted: true}, "redis"},
		{"delete of the repository", registry.Change{Repository: "proj/services/redis", Deleted: true}, "redis"},
		{"push of another tag", registry.Change{Repository: "proj/services/redis", Tag: "latest"}, ""},
		{"push by digest only", registry.Change{Repository: "proj/services/redis", Digest: "sha256:ab"}, ""},
		{"another host", registry.Change{Host: "us-docker.pkg.dev", Repository: "proj/services/redis", Tag: "stable"}, ""},
		{"outside the prefix", registry.Change{Repository: "proj/other/redis", Tag: "stable"}, ""},
		{"a sibling sharing the prefix's letters", registry.Change{Repository: "proj/servicesx/redis", Tag: "stable"}, ""},
		{"the prefix itself", registry.Change{Repository: "proj/services", Tag: "stable"}, ""},
		{"denied", registry.Change{Repository: "proj/services/internal/x", Tag: "stable"}, ""},
	} {
		entry, ok := src.Select(c.change)
		if ok != (c.entry != "") || entry != c.entry {
			t.Errorf("%s: Select(%+v) = %q, %v; want %q", c.name, c.change, entry, ok, c.entry)
		}
	}

	hub, err := registry.NewOCI(registry.OCIConfig{Host: "index.docker.io", Prefix: "bitnami", Repositories: []string{"redis"}})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := hub.Select(registry.Change{Host: "docker.io", Repository: "bitnami/redis", Tag: "latest"}); !ok || e != "redis" {
		t.Errorf("docker.io is index.docker.io: got %q, %v", e, ok)
	}
	if _, ok := hub.Select(registry.Change{Host: "docker.io", Repository: "bitnami/mysql", Tag: "latest"}); ok {
		t.Error("a repository outside the configured list was selected")
	}
}
