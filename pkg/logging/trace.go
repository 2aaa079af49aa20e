package logging

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The fields Cloud Logging reads a line's trace from
// (https://cloud.google.com/logging/docs/structured-logging).
const (
	TraceKey        = "logging.googleapis.com/trace"
	SpanIDKey       = "logging.googleapis.com/spanId"
	TraceSampledKey = "logging.googleapis.com/trace_sampled"
)

// traceHandler adds the trace fields to every line logged with a context
// that holds a span context: a span of ours, or the remote one a
// request's or a message's trace header named. It reads only the
// context, so it works whether tracing exports anything or not.
type traceHandler struct {
	slog.Handler
	project string
}

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(
			slog.String(TraceKey, h.trace(sc.TraceID())),
			slog.String(SpanIDKey, sc.SpanID().String()),
			slog.Bool(TraceSampledKey, sc.IsSampled()),
		)
	}
	return h.Handler.Handle(ctx, r)
}

// trace is the trace field's value: projects/P/traces/ID, or the bare id
// when the project is unknown (a local tool).
func (h traceHandler) trace(id trace.TraceID) string {
	if h.project == "" {
		return id.String()
	}
	return "projects/" + h.project + "/traces/" + id.String()
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{Handler: h.Handler.WithAttrs(as), project: h.project}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{Handler: h.Handler.WithGroup(name), project: h.project}
}

// WithContext returns l logging every line as if with ctx when the call
// gave none with a span: a run binds its span once, and the lines it
// logs without a context (Info rather than InfoContext) still name the
// run's trace. A line logged with a context that holds a span keeps
// that span.
func WithContext(l *slog.Logger, ctx context.Context) *slog.Logger {
	return slog.New(boundHandler{Handler: l.Handler(), ctx: ctx})
}

type boundHandler struct {
	slog.Handler
	ctx context.Context
}

func (h boundHandler) Handle(ctx context.Context, r slog.Record) error {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = h.ctx
	}
	return h.Handler.Handle(ctx, r)
}

func (h boundHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return boundHandler{Handler: h.Handler.WithAttrs(as), ctx: h.ctx}
}

func (h boundHandler) WithGroup(name string) slog.Handler {
	return boundHandler{Handler: h.Handler.WithGroup(name), ctx: h.ctx}
}
