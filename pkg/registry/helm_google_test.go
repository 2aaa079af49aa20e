package registry_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/emulator/googletest"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
)

// Helm's OCI form lists charts in Artifact Registry as the oci source
// lists images there: under its prefix by walking tags/list children,
// every page of each, never by the region's catalog, and reading nothing
// outside the prefix.
func TestHelmOnArtifactRegistryListsItsPrefixByChildren(t *testing.T) {
	registry.SetGoogleListPageSize(t, 2)
	reg := googletest.NewRegistry(t, nil)
	for _, repo := range []string{"project/charts/postgresql", "project/charts/mariadb", "project/charts/team/redis", "project/charts/team/kafka", "project/charts/team/queue",
		"project/charts-old/mysql", "project/other/mongo"} {
		helmtest.PushChart(t, reg.PushHost, repo, chart(repo[strings.LastIndex(repo, "/")+1:], "1.0.0"))
	}
	src, err := registry.NewHelm(registry.HelmConfig{Host: "europe-docker.pkg.dev", Prefix: "project/charts",
		Transport: googletest.Transport(reg.Server), Backoff: remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 2}})
	if err != nil {
		t.Fatal(err)
	}
	l := fetch(t, src)
	if got := strings.Join(names(l), ","); got != "mariadb,postgresql,team/kafka,team/queue,team/redis" {
		t.Fatalf("entries %s, want postgresql,team/kafka,team/redis", got)
	}
	for _, e := range l.Entries {
		if e.Err != nil || e.Spec == nil {
			t.Errorf("chart %s: %v", e.Name, e.Err)
		}
	}
	paged := false
	for _, r := range reg.Requests() {
		if strings.HasPrefix(r.URI, "/v2/_catalog") {
			t.Errorf("the catalog was asked: %s", r.URI)
		}
		if strings.Contains(r.URI, "/tags/list?") && strings.Contains(r.URI, "last=") {
			paged = true
		}
		if strings.HasPrefix(r.URI, "/v2/project/other/") || strings.HasPrefix(r.URI, "/v2/project/charts-old/") {
			t.Errorf("a repository outside the prefix was read: %s", r.URI)
		}
	}
	if !paged {
		t.Error("no tags/list page after the first was asked for: pagination is not exercised")
	}
}
