package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/specsync/specsync/pkg/logging"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"

// With a ratio of nothing, a span started with AlwaysSample is kept even
// under an unsampled parent, its children follow it, and anything else
// is dropped.
func TestSamplerKeepsWhatMustBeKept(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(NewSampler(0)))
	tr := tp.Tracer("t")
	ctx := Extract(context.Background(), map[string]string{"traceparent": parent})

	ctx1, boot := tr.Start(ctx, "bootstrap", trace.WithAttributes(AlwaysSample.Bool(true)))
	_, child := tr.Start(ctx1, "run")
	child.End()
	boot.End()
	_, other := tr.Start(ctx, "catalog")
	other.End()
	_, root := tr.Start(context.Background(), "root")
	root.End()

	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
		if s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%s: trace %s, not the parent's", s.Name, s.SpanContext.TraceID())
		}
	}
	if strings.Join(names, ",") != "run,bootstrap" {
		t.Errorf("kept %v, want run and bootstrap only", names)
	}
}

// The handler's span continues the request's trace (traceparent or
// X-Cloud-Trace-Context), is named after the route, never the path, and
// the lines logged inside it name it.
func TestHandlerSpanAndLogs(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	var logs bytes.Buffer
	log := logging.New(&logs, "info", logging.Project("p"))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/service_instances/{id}", func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "served")
		w.WriteHeader(http.StatusTeapot)
	})
	h := handler(tp.Tracer("t"), "catalog", mux, nil)
	for _, hdr := range []map[string]string{
		{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		// 0x00f067aa0ba902b7 in decimal
		{"X-Cloud-Trace-Context": "4bf92f3577b34da6a3ce929d0e0e4736/67667974448284343;o=1"},
	} {
		exp.Reset()
		logs.Reset()
		req := httptest.NewRequest(http.MethodGet, "/v2/service_instances/inst-42", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("%v: %d spans", hdr, len(spans))
		}
		s := spans[0]
		if s.Name != "GET /v2/service_instances/{id}" || s.SpanKind != trace.SpanKindServer {
			t.Errorf("%v: span %q kind %v", hdr, s.Name, s.SpanKind)
		}
		if s.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("%v: parent %v, not the header's", hdr, s.Parent)
		}
		if !hasAttr(s.Attributes, attribute.Int("http.response.status_code", http.StatusTeapot)) {
			t.Errorf("%v: attributes %v lack the status", hdr, s.Attributes)
		}
		var line map[string]any
		if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line[logging.TraceKey] != "projects/p/traces/4bf92f3577b34da6a3ce929d0e0e4736" || line[logging.SpanIDKey] != s.SpanContext.SpanID().String() {
			t.Errorf("%v: the line %v does not name the span", hdr, line)
		}
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.Emit(), "inst-42") {
				t.Errorf("the path's id is in an attribute: %v", a)
			}
		}
	}
}

// Tracing off, a request's lines still name the trace its header named,
// so they join the request log of Google's front end.
func TestHandlerOffKeepsTheRequestsTrace(t *testing.T) {
	var logs bytes.Buffer
	log := logging.New(&logs, "info", logging.Project("p"))
	h := Handler("catalog", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "served")
	}), nil)
	req := httptest.NewRequest(http.MethodGet, "/v2/catalog", nil)
	req.Header.Set("X-Cloud-Trace-Context", "4bf92f3577b34da6a3ce929d0e0e4736/1;o=0")
	h.ServeHTTP(httptest.NewRecorder(), req)
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line[logging.TraceKey] != "projects/p/traces/4bf92f3577b34da6a3ce929d0e0e4736" || line[logging.SpanIDKey] != "0000000000000001" || line[logging.TraceSampledKey] != false {
		t.Errorf("the line does not name the request's trace: %v", line)
	}
}

func TestCloudTraceContextParse(t *testing.T) {
	for _, bad := range []string{"", "xyz/1;o=1", "4bf92f3577b34da6a3ce929d0e0e4736/x", "00000000000000000000000000000000/1", "4bf92f3577b34da6a3ce929d0e0e4736/0"} {
		if _, ok := cloudTraceContext(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	sc, ok := cloudTraceContext("4bf92f3577b34da6a3ce929d0e0e4736/255")
	if !ok || sc.SpanID().String() != "00000000000000ff" || sc.IsSampled() {
		t.Errorf("parsed %v %v", sc, ok)
	}
}

func hasAttr(as []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range as {
		if a == want {
			return true
		}
	}
	return false
}
