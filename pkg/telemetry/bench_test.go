package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkTracingCatalogRequest compares a catalog-sized answer served
// bare, behind Handler with tracing off (the no-op provider: what
// SPECSYNC_TRACE=off leaves installed) and behind Handler with the SDK at
// the default ratio for a request whose trace is not kept. "off" must
// cost nothing measurable next to "bare" (docs/BENCHMARKS.md).
func BenchmarkTracingCatalogRequest(b *testing.B) {
	body := []byte(`{"services":[` + strings.Repeat(`{"id":"x","name":"svc","description":"a service","bindable":true,"plans":[{"id":"p","name":"small","description":"small"}]},`, 200) + `{}]}`)
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	mux := http.NewServeMux()
	mux.Handle("GET /v2/catalog", serve)
	// The default ratio with a draw that never keeps: the cost of a
	// request whose trace is not kept, the draw included.
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(newSampler(0.01, func() float64 { return 1 })))
	defer func() { _ = sdk.Shutdown(context.Background()) }()
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", mux},
		{"off", Handler("catalog", mux, nil)}, // nothing installed: the global API's no-op
		{"noop-provider", handler(noop.NewTracerProvider().Tracer("b"), "catalog", mux, nil)},
		{"sdk-unsampled", handler(sdk.Tracer("b"), "catalog", mux, nil)},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/v2/catalog", nil)
			req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				c.h.ServeHTTP(w, req)
			}
		})
	}
}
