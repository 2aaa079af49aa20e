package functions

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/telemetry"
)

var tracer = otel.Tracer("github.com/specsync/specsync/functions")

// messageSpan starts the consumer span of a message the reconcile
// function received. A bootstrap's reconcile message, a commit request
// and a report continue the trace their traceparent attribute names, so
// a bootstrap is one trace from its request to the change publish. A
// registry event's message (a webhook's, an Artifact Registry
// notification's) starts a trace of its own, linked to the one that
// published it: events coalesce, and one run may answer many.
func messageSpan(ctx context.Context, ev queue.Event, id string) (context.Context, trace.Span) {
	return startMessageSpan(ctx, tracer, ev, id)
}

func startMessageSpan(ctx context.Context, tracer trace.Tracer, ev queue.Event, id string) (context.Context, trace.Span) {
	remote := telemetry.Extract(ctx, ev.Attributes)
	name := "receive message"
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "gcp_pubsub"),
		attribute.String("messaging.message.id", id),
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	newRoot := false
	switch {
	case ev.Reconcile != nil && ev.Reconcile.Event():
		name, newRoot = "receive event", true
		attrs = append(attrs, attribute.String("specsync.registry", ev.Reconcile.Registry), attribute.Int("specsync.entries", len(ev.Reconcile.Entries)))
	case ev.Reconcile != nil:
		name = "receive reconcile"
		attrs = append(attrs, attribute.String("specsync.registry", ev.Reconcile.Registry), attribute.String("specsync.operation", ev.Reconcile.Operation))
	case ev.Commit != nil && ev.Commit.Report != nil:
		name = "receive report"
		attrs = append(attrs, attribute.String("specsync.registry", ev.Commit.Registry), attribute.String("specsync.operation", ev.Commit.Operation))
	case ev.Commit != nil:
		name = "receive commit request"
		attrs = append(attrs, attribute.String("specsync.operation", ev.Commit.Operation))
	case ev.Artifact != nil:
		name, newRoot = "receive artifact event", true
	}
	if newRoot {
		opts = append(opts, trace.WithNewRoot())
		if sc := trace.SpanContextFromContext(remote); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	} else {
		ctx = remote
	}
	return tracer.Start(ctx, name, append(opts, trace.WithAttributes(attrs...))...)
}

// endMessageSpan ends it with the handling's outcome: an error is a
// redelivery, marked by its class, never its text.
func endMessageSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "redelivered")
		span.SetAttributes(attribute.String("error.type", failure.KindOf(err).String()))
	}
	span.End()
}
