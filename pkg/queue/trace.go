package queue

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/specsync/specsync/pkg/failure"
)

var tracer = otel.Tracer("github.com/specsync/specsync/pkg/queue")

// publishSpan starts a producer span around a publish; end ends it with
// the publish's error class (never its text).
func publishSpan(ctx context.Context, name string, n int) (context.Context, func(error)) {
	ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("messaging.system", "gcp_pubsub"), attribute.Int("messaging.batch.message_count", n)))
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, "failed")
			span.SetAttributes(attribute.String("error.type", failure.KindOf(err).String()))
		}
		span.End()
	}
}

// carry writes ctx's trace context into a message's attributes as W3C
// traceparent (and tracestate): the function that receives the message
// continues the trace (telemetry.Extract). It is identity, like the
// rest of a message's attributes: ids, never content.
func carry(ctx context.Context, attrs map[string]string) {
	propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(attrs))
}
