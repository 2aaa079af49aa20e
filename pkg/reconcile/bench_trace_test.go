package reconcile

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/specsync/specsync/pkg/store"
)

// BenchmarkTracingStep compares a reconcile step run bare with the same
// step inside its span (traced): tracing off (nothing installed, the
// global no-op), the no-op provider, and the SDK for a trace not kept.
// "off" must cost nothing measurable next to "bare"; the step's own work
// (Firestore calls) is milliseconds, this is the span's cost alone.
func BenchmarkTracingStep(b *testing.B) {
	r := &run{Runner: &Runner{}, reg: Registry{Name: "r"}, ops: &store.Ops{}}
	work := func(context.Context) (bool, error) { r.ops.Reads.Add(1); return false, nil }
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))))
	defer func() { _ = sdk.Shutdown(context.Background()) }()
	was := tracer
	defer func() { tracer = was }()
	for _, c := range []struct {
		name  string
		setup func() step
	}{
		{"bare", func() step { return work }},
		{"off", func() step { tracer = otel.Tracer("b"); return r.traced(stepUpsert, work) }},
		{"noop-provider", func() step { tracer = noop.NewTracerProvider().Tracer("b"); return r.traced(stepUpsert, work) }},
		{"sdk-unsampled", func() step { tracer = sdk.Tracer("b"); return r.traced(stepUpsert, work) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := c.setup()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, _ = s(ctx)
			}
		})
	}
}
