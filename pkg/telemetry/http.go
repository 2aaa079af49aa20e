package telemetry

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/specsync/specsync/pkg/logging"
)

const tracerName = "github.com/specsync/specsync/pkg/telemetry"

// Handler serves h inside a server span, a child of the trace the
// request's traceparent (or Google's X-Cloud-Trace-Context) names, and
// flushes the span before the invocation returns. The span is named
// after the route that served the request (its ServeMux pattern), never
// after the path, which holds ids. Whether it is kept is the service's
// call (NewSampler), never the header's sampled flag: always, when it
// says so for a request, keeps its trace whatever the sampling ratio (a
// bootstrap the admin asked for), and it must not say so for a request
// anyone can send.
//
// With tracing off the span is a no-op that carries the request's trace
// context, so the request's log lines still name its trace.
func Handler(function string, h http.Handler, always func(*http.Request) bool) http.Handler {
	return handler(otel.Tracer(tracerName), function, h, always)
}

func handler(tracer trace.Tracer, function string, h http.Handler, always func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := FromRequest(r.Context(), r.Header)
		attrs := []attribute.KeyValue{
			attribute.String("faas.name", function),
			attribute.String("http.request.method", r.Method),
		}
		if always != nil && always(r) {
			attrs = append(attrs, AlwaysSample.Bool(true))
		}
		ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		if !span.IsRecording() {
			h.ServeHTTP(w, r.WithContext(ctx))
			span.End()
			return
		}
		r = r.WithContext(ctx)
		sw := &logging.StatusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if r.Pattern != "" {
			// "GET /v2/catalog" whether the pattern names the method or not.
			route := r.Pattern
			if i := strings.IndexByte(route, ' '); i >= 0 {
				route = strings.TrimSpace(route[i+1:])
			}
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
		status := sw.Status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		span.End()
		Flush(ctx)
	})
}

// FromRequest returns ctx carrying the trace a request's headers name:
// W3C traceparent, else Google's front end's X-Cloud-Trace-Context
// ("TRACE/SPAN;o=1", the span id in decimal).
func FromRequest(ctx context.Context, h http.Header) context.Context {
	if h.Get("traceparent") != "" {
		if c := propagator.Extract(ctx, propagation.HeaderCarrier(h)); trace.SpanContextFromContext(c).IsValid() {
			return c
		}
	}
	if sc, ok := cloudTraceContext(h.Get("X-Cloud-Trace-Context")); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

func cloudTraceContext(v string) (trace.SpanContext, bool) {
	if v == "" {
		return trace.SpanContext{}, false
	}
	ids, opts, _ := strings.Cut(v, ";")
	tid, sid, _ := strings.Cut(ids, "/")
	var c trace.SpanContextConfig
	b, err := hex.DecodeString(tid)
	if err != nil || len(b) != len(c.TraceID) {
		return trace.SpanContext{}, false
	}
	copy(c.TraceID[:], b)
	n, err := strconv.ParseUint(sid, 10, 64)
	if err != nil {
		return trace.SpanContext{}, false
	}
	binary.BigEndian.PutUint64(c.SpanID[:], n)
	if opts == "o=1" {
		c.TraceFlags = trace.FlagsSampled
	}
	c.Remote = true
	sc := trace.NewSpanContext(c)
	return sc, sc.IsValid()
}
