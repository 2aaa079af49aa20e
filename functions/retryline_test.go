package functions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/specsync/specsync/pkg/logging"
)

// A message handed back to Pub/Sub logs the contract line the message
// retries metric reads (logging.EventMessageRetry, docs/operations.md),
// with every field of its contract; here for a reconcile instance whose
// cold start failed, which retries every message until it is fixed.
func TestRedeliveryLogsTheContractLine(t *testing.T) {
	var out bytes.Buffer
	saved := slog.Default()
	slog.SetDefault(logging.New(&out, "info"))
	defer slog.SetDefault(saved)
	reconcileDeps = once[*reconcileApp]{}
	defer func() { reconcileDeps = once[*reconcileApp]{} }()
	_, _ = reconcileDeps.get(func() (*reconcileApp, error) { return nil, errors.New("SPECSYNC_REGISTRIES is required") })

	e := event.New()
	e.SetID("event-1")
	e.SetType("google.cloud.pubsub.topic.v1.messagePublished")
	e.SetSource("//pubsub.googleapis.com/projects/p/topics/specsync-reconcile")
	if err := Reconcile(context.Background(), e); !errors.Is(err, errRedeliver) {
		t.Fatalf("Reconcile: %v, want the redelivery error", err)
	}
	var retries []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if m[logging.FieldEvent] == logging.EventMessageRetry {
			retries = append(retries, m)
		}
	}
	if len(retries) != 1 {
		t.Fatalf("%d message_retry lines, want 1: %s", len(retries), out.String())
	}
	l := retries[0]
	for f, kind := range logging.Events[logging.EventMessageRetry] {
		if _, isString := l[f].(string); kind != logging.String || !isString {
			t.Errorf("field %s: %v, the contract says %s", f, l[f], kind)
		}
	}
	if l[logging.FieldTopic] != "specsync-reconcile" || l["event_id"] != "event-1" || l["severity"] != "WARNING" ||
		!strings.Contains(l["error"].(string), "SPECSYNC_REGISTRIES") {
		t.Errorf("the line: %v", l)
	}
}
