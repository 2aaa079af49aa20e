package functions

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/telemetry"
)

// A bootstrap's message continues the trace its traceparent attribute
// names; a registry event's message (a webhook's) starts a trace of its
// own, linked to the one that published it.
func TestMessageSpanContinuesOrLinks(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(telemetry.NewSampler(1)))
	tr := tp.Tracer("t")
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	push := func(body string) []byte {
		return fmt.Appendf(nil, `{"message":{"data":%q,"messageId":"m1","attributes":{"traceparent":"00-%s-%s-01"}},"subscription":"s"}`,
			base64.StdEncoding.EncodeToString([]byte(body)), tid, sid)
	}
	for _, c := range []struct {
		name, body string
		continues  bool
		span       string
	}{
		{"bootstrap", `{"operation":"op-1","registry":"team-a"}`, true, "receive reconcile"},
		{"commit", `{"commit":{"registry":"team-a","run":"r1"}}`, true, "receive commit request"},
		{"event", fmt.Sprintf(`{"registry":"team-a","entries":["x"],"event_at":%q}`, time.Now().UTC().Format(time.RFC3339Nano)), false, "receive event"},
	} {
		exp.Reset()
		ev, id, err := queue.FromEvent(push(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, span := startMessageSpan(context.Background(), tr, ev, id)
		span.End()
		got := exp.GetSpans()[0]
		if got.Name != c.span || got.SpanKind != trace.SpanKindConsumer {
			t.Errorf("%s: span %q kind %v, want %q", c.name, got.Name, got.SpanKind, c.span)
		}
		inTrace := got.SpanContext.TraceID().String() == tid && got.Parent.SpanID().String() == sid
		if inTrace != c.continues {
			t.Errorf("%s: in the publisher's trace: %v, want %v", c.name, inTrace, c.continues)
		}
		linked := len(got.Links) == 1 && got.Links[0].SpanContext.TraceID().String() == tid && got.Links[0].SpanContext.SpanID().String() == sid
		if linked == c.continues {
			t.Errorf("%s: linked to the publisher's span: %v (links %v)", c.name, linked, got.Links)
		}
	}
}
