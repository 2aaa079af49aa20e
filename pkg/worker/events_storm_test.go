//go:build reliability

package worker_test

import (
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/loadstat"
	"github.com/specsync/specsync/pkg/worker"
)

// The event storm of the reliability rows: 1,000 events for one registry
// in 10 s (five entries pushed again and again, one of them deleted near
// the end), delivered concurrently like a push subscription, every
// retryable answer delivered again with backoff, with the default
// cooldown and clock skew. It converges to upstream's final state, leaves
// no lease behind, and makes a few runs, never one per event: at most one
// a cooldown during the storm and one an entry after it, with room.
// Run by `make reliability`.
func TestWorkerEventStormThousand(t *testing.T) {
	const events, span = 1000, 10 * time.Second
	r := eventStorm(t, events, span, worker.DefaultEventCooldown, worker.DefaultEventClockSkew)
	t.Log(loadstat.Figure("event_storm.runs", float64(r.fetches), "runs"))
	t.Log(loadstat.Figure("event_storm.deliveries", float64(r.deliveries), "deliveries"))
	t.Logf("%d events, %d deliveries, %d runs (fetches upstream)", r.events, r.deliveries, r.fetches)
	if limit := int64(span/worker.DefaultEventCooldown) + 5 + 10; r.fetches > limit {
		t.Fatalf("%d runs for %d events, more than %d", r.fetches, r.events, limit)
	}
}
