package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/specsync/specsync/pkg/web"
)

// batching is a provider whose spans leave only when flushed: a batch
// that waits an hour and holds any number of spans. What reaches exp by
// the time a handler returns is what the handler flushed.
func batching(t *testing.T, s sdktrace.Sampler) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(s), sdktrace.WithBatcher(exp,
		sdktrace.WithBatchTimeout(time.Hour), sdktrace.WithMaxExportBatchSize(1<<16), sdktrace.WithMaxQueueSize(1<<16)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// A request's traceparent is joined, never obeyed. Whatever its sampled
// flag (or X-Cloud-Trace-Context's o=1), the ratio decides with a draw of
// the instance's own: a request refused for its credential, or one
// whose trace id was picked to fall under any ratio, is exported only
// if the draw says so. A kept request continues the caller's trace; a
// request the service marks as always kept is kept at a ratio of 0.
func TestRequestTraceIsJoinedNotObeyed(t *testing.T) {
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	// The lowest trace id: sdktrace.TraceIDRatioBased keeps it at any
	// ratio above 0.
	const lowTrace = "00000000000000000000000000000001"
	mux := http.NewServeMux()
	mux.Handle("GET /v2/catalog", web.AdminAuth(web.StaticToken("the-broker-credential"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	for _, c := range []struct {
		name       string
		ratio      float64
		draw       float64
		header     [2]string
		credential string
		always     bool
		status     int
		kept       bool
	}{
		{"refused, sampled traceparent, ratio 0", 0, 0.5, [2]string{"traceparent", "00-" + callerTrace + "-" + callerSpan + "-01"}, "wrong", false, 401, false},
		{"refused, X-Cloud-Trace-Context o=1, ratio 0", 0, 0.5, [2]string{"X-Cloud-Trace-Context", callerTrace + "/67667974448284343;o=1"}, "wrong", false, 401, false},
		{"refused, a trace id under any ratio, the draw over it", 0.5, 0.99, [2]string{"traceparent", "00-" + lowTrace + "-" + callerSpan + "-01"}, "wrong", false, 401, false},
		{"answered, sampled traceparent, ratio 0", 0, 0.5, [2]string{"traceparent", "00-" + callerTrace + "-" + callerSpan + "-01"}, "the-broker-credential", false, 200, false},
		{"answered, unsampled traceparent, the draw under the ratio", 0.5, 0.1, [2]string{"traceparent", "00-" + callerTrace + "-" + callerSpan + "-00"}, "the-broker-credential", false, 200, true},
		{"always kept, ratio 0", 0, 0.99, [2]string{"traceparent", "00-" + callerTrace + "-" + callerSpan + "-00"}, "the-broker-credential", true, 200, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp, exp := batching(t, newSampler(c.ratio, func() float64 { return c.draw }))
			h := handler(tp.Tracer("t"), "catalog", mux, func(*http.Request) bool { return c.always })
			req := httptest.NewRequest(http.MethodGet, "/v2/catalog", nil)
			req.Header.Set(c.header[0], c.header[1])
			req.Header.Set("Authorization", "Bearer "+c.credential)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != c.status {
				t.Fatalf("answered %d, want %d", w.Code, c.status)
			}
			_ = tp.ForceFlush(context.Background())
			spans := exp.GetSpans()
			if !c.kept {
				if len(spans) != 0 {
					t.Errorf("exported %d spans (trace %s): the caller forced the trace", len(spans), spans[0].SpanContext.TraceID())
				}
				return
			}
			if len(spans) != 1 {
				t.Fatalf("exported %d spans, want the request's", len(spans))
			}
			if s := spans[0]; s.SpanContext.TraceID().String() != callerTrace || s.Parent.SpanID().String() != callerSpan {
				t.Errorf("the kept span is in trace %s under %s, not the caller's", s.SpanContext.TraceID(), s.Parent.SpanID())
			}
		})
	}
}

// A kept request's spans, its own and its children's, are in the
// exporter when the handler returns (Cloud Run throttles the CPU once
// the answer is sent, so a batch left for later may never leave), with a
// batching exporter that would otherwise hold them for an hour.
func TestHandlerFlushesBeforeItReturns(t *testing.T) {
	tp, exp := batching(t, NewSampler(1))
	tr := tp.Tracer("t")
	h := handler(tr, "catalog", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, child := tr.Start(r.Context(), "firestore read")
		child.End()
	}), nil)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v2/catalog", nil))
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	if len(names) != 2 {
		t.Fatalf("when the handler returned the exporter had %v, want the child and the request's span", names)
	}
}
