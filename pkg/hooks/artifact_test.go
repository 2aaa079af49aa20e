package hooks_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/hooks"
	"github.com/specsync/specsync/pkg/queue"
)

// An Artifact Registry notification runs every registry it concerns, even
// when one of the runs fails; a failed run is returned (Pub/Sub
// redelivers the notification), and a notification that is not one
// Artifact Registry sends, or that no registry selects, is acknowledged
// without a run.
func TestArtifactRunsEveryRegistryItConcerns(t *testing.T) {
	cfg, err := config.Parse([]byte(`registries:
  - name: services
    type: oci
    oci: {host: europe-docker.pkg.dev, prefix: proj/services, tag: stable}
  - name: whole-project
    type: oci
    oci: {host: europe-docker.pkg.dev, prefix: proj}
`), "test", ".")
	if err != nil {
		t.Fatal(err)
	}
	regs := hooks.FromConfig(cfg)
	ctx := context.Background()
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	busy := failure.New(failure.Precondition, "lease held")
	var ran []string
	run := func(_ context.Context, m queue.Message) error {
		ran = append(ran, m.Registry)
		if !m.EventAt.Equal(at) {
			t.Errorf("message %+v: EventAt is not the publish time", m)
		}
		if m.Registry == "services" {
			return busy
		}
		return nil
	}
	const (
		tag    = "europe-docker.pkg.dev/proj/services/redis"
		digest = "@sha256:6ec128e26cd5f1ba3b1c3b2d3c7c3c2e0f1d2c3b4a5968778695a4b3c2d1e0f9"
	)
	ev := queue.ArtifactEvent{Action: "DELETE", Digest: tag + digest} // both registries select it
	if err := hooks.Artifact(ctx, nil, ev, nil, regs, at, run); !errors.Is(err, busy) {
		t.Errorf("a failed run: %v, want it returned", err)
	}
	if want := []string{"services", "whole-project"}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v", ran, want)
	}
	ran = nil
	for name, c := range map[string]struct {
		ev  queue.ArtifactEvent
		err error
	}{
		"undecodable":    {queue.ArtifactEvent{Action: "UPDATE", Tag: tag + ":stable"}, errors.New("artifact registry event: bad action")},
		"not selected":   {queue.ArtifactEvent{Action: "INSERT", Tag: "europe-docker.pkg.dev/other/x:stable"}, nil},
		"by digest only": {queue.ArtifactEvent{Action: "INSERT", Digest: tag + digest}, nil},
	} {
		if err := hooks.Artifact(ctx, nil, c.ev, c.err, regs, at, run); err != nil {
			t.Errorf("%s: %v, want it acknowledged", name, err)
		}
	}
	if len(ran) != 0 {
		t.Errorf("ran %v for notifications nothing selects", ran)
	}
}
