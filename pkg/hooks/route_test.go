package hooks_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/hooks"
	"github.com/specsync/specsync/pkg/queue"
)

// An Artifact Registry notification names a project's repository; it
// concerns every configured registry whose Selector takes it (host,
// prefix, repository list, allow and deny, tag), and no other: not
// another repository, not a push by digest alone, not a source without a
// Selector.
func TestRouteArtifactRegistryEvents(t *testing.T) {
	cfg, err := config.Parse([]byte(`registries:
  - name: services
    type: oci
    deny: ["internal/.*"]
    oci: {host: europe-docker.pkg.dev, prefix: proj/services, tag: stable}
  - name: whole-project
    type: oci
    oci: {host: europe-docker.pkg.dev, prefix: proj}
  - name: listed
    type: oci
    oci: {host: europe-docker.pkg.dev, prefix: proj/services, repositories: [redis], tag: stable}
  - name: index
    type: http
    http: {url: "https://europe-docker.pkg.dev/proj/services/index.yaml"}
  - name: bundled
    type: dir
    dir: {embedded: true}
`), "test", ".")
	if err != nil {
		t.Fatal(err)
	}
	regs := hooks.FromConfig(cfg)
	const (
		host   = "europe-docker.pkg.dev/proj/services/"
		digest = "@sha256:6ec128e26cd5f1ba3b1c3b2d3c7c3c2e0f1d2c3b4a5968778695a4b3c2d1e0f9"
	)
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		ev   queue.ArtifactEvent
		want []string // registry:entry
	}{
		{"a push of the stable tag", queue.ArtifactEvent{Action: "INSERT", Digest: host + "redis" + digest, Tag: host + "redis:stable"},
			[]string{"services:redis", "listed:redis"}},
		{"a push of latest", queue.ArtifactEvent{Action: "INSERT", Digest: host + "redis" + digest, Tag: host + "redis:latest"},
			[]string{"whole-project:services/redis"}},
		{"a push by digest alone", queue.ArtifactEvent{Action: "INSERT", Digest: host + "redis" + digest}, nil},
		{"the stable tag deleted", queue.ArtifactEvent{Action: "DELETE", Tag: host + "db/pg:stable"}, []string{"services:db/pg"}},
		{"a digest deleted", queue.ArtifactEvent{Action: "DELETE", Digest: host + "redis" + digest},
			[]string{"services:redis", "whole-project:services/redis", "listed:redis"}},
		{"a denied repository", queue.ArtifactEvent{Action: "INSERT", Tag: host + "internal/x:stable"}, nil},
		{"another project", queue.ArtifactEvent{Action: "INSERT", Tag: "europe-docker.pkg.dev/other/services/redis:stable"}, nil},
		{"another region", queue.ArtifactEvent{Action: "INSERT", Tag: "us-docker.pkg.dev/proj/services/redis:stable"}, nil},
		{"a sibling sharing the prefix's letters", queue.ArtifactEvent{Action: "INSERT", Tag: "europe-docker.pkg.dev/proj/servicesx/redis:latest"},
			[]string{"whole-project:servicesx/redis"}},
	} {
		change, err := c.ev.Change()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, m := range hooks.Route(change, regs, at) {
			if len(m.Entries) != 1 || !m.EventAt.Equal(at) || !m.Event() || m.Validate() != nil {
				t.Errorf("%s: message %+v", c.name, m)
			}
			got = append(got, m.Registry+":"+strings.Join(m.Entries, ","))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: routed to %v, want %v", c.name, got, c.want)
		}
	}
}
