// Package telemetry sets up tracing once per instance (the entry points
// call Setup at cold start) and carries a trace across the hops specsync
// makes: HTTP requests (Handler) and Pub/Sub messages (Inject, Extract).
// The domain packages only start spans with the OpenTelemetry API
// (otel.Tracer) and add attributes; none of them imports an exporter.
//
// Off (the default), nothing is installed: the API's spans are no-ops
// that only carry the caller's trace context, so logs still join the
// request's trace, and tracing costs nothing measurable
// (BenchmarkTracingOff*).
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/detectors/gcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Exporters Setup knows (SPECSYNC_TRACE).
const (
	ExportOff = "off"
	// ExportOTLP is OTLP to Config.Endpoint, or, with none, to Google's
	// Telemetry API (telemetry.googleapis.com) with Application Default
	// Credentials: what terraform sets.
	ExportOTLP = "otlp"
	// ExportCloudTrace is Google's Cloud Trace exporter until its
	// archive date (CloudTraceArchived), the Telemetry API after it.
	ExportCloudTrace = "cloudtrace"
	ExportStdout     = "stdout"
)

// Config is how an instance traces (settings.Tracing, which checks the
// exporter's name and the OTLP protocol).
type Config struct {
	Exporter string
	// SampleRatio is the share of traces kept that start here: a
	// request's or a registry event's. What keeps the rest is NewSampler's.
	SampleRatio float64
	Project     string // the Google Cloud project the spans belong to (gcp.project_id)
	// Endpoint is the OTLP endpoint the OTEL_EXPORTER_OTLP_*ENDPOINT
	// variables name (the exporter reads them itself); empty, otlp goes
	// to Google's Telemetry API. Protocol is "grpc" or "http/protobuf"
	// (the default).
	Endpoint, Protocol string
	// Logger gets the line saying which exporter was chosen when that
	// needs an operator's attention (cloudtrace).
	Logger *slog.Logger

	// google is where the Telemetry API is (tests: an in-process
	// receiver); now is the clock that dates cloudtrace.
	google googleTarget
	now    func() time.Time
}

var (
	setupOnce sync.Once
	setupErr  error
)

// Setup installs the tracer provider Config asks for as the process's
// global one, once per process: every function of an instance (the local
// stack runs all three in one process) shares it, and the first call's
// Config wins. Off installs nothing, so a provider a test installed stays.
func Setup(ctx context.Context, c Config) error {
	setupOnce.Do(func() { setupErr = setup(ctx, c) })
	return setupErr
}

func setup(ctx context.Context, c Config) error {
	tp, err := newProvider(ctx, c)
	if err != nil || tp == nil {
		return err
	}
	otel.SetTracerProvider(tp)
	return nil
}

// newProvider is the provider Config asks for; nil when tracing is off.
func newProvider(ctx context.Context, c Config) (*sdktrace.TracerProvider, error) {
	exp, err := newExporter(ctx, c)
	if err != nil || exp == nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{serviceName}
	if c.Project != "" {
		// What the Telemetry API files the spans under (it refuses spans
		// without it); a collector's Google exporter reads it too.
		attrs = append(attrs, attribute.String("gcp.project_id", c.Project))
	}
	opts := []resource.Option{resource.WithAttributes(attrs...)}
	if os.Getenv("K_SERVICE") != "" {
		// Which function, revision and region: asked of the metadata
		// server, which only Cloud Run (it sets K_SERVICE) is sure to
		// have; elsewhere the detector would wait on it at every cold
		// start.
		opts = append(opts, resource.WithDetectors(gcp.NewDetector()))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil && res == nil {
		// A partial resource (a detector failed) is kept; with none,
		// the spans still name the service and the project.
		res = resource.NewSchemaless(attrs...)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(NewSampler(c.SampleRatio)),
		sdktrace.WithResource(res),
	), nil
}

var serviceName = attribute.String("service.name", "specsync")

// AlwaysSample, set to true among a span's start attributes, keeps the
// span (and so its trace: children follow a sampled parent) whatever the
// ratio: a bootstrap the admin asked for is rare and is what an operator
// looks for.
const AlwaysSample = attribute.Key("specsync.sample.always")

// NewSampler is the service's sampling: a span whose start attributes
// set AlwaysSample is kept; a request's server span is kept at ratio, by
// a draw of this instance's own; any other span follows its parent (a
// message's parent is the span that published it, ours), and a trace
// that starts here is kept at ratio.
//
// A request's traceparent is joined (its trace id and parent span), never
// obeyed: its sampled flag is anyone's to set, and so is its trace id,
// which is why the draw for a request is not the trace id's ratio
// (sdktrace.TraceIDRatioBased keeps every id below a threshold, and a
// caller picks the id).
func NewSampler(ratio float64) sdktrace.Sampler {
	return newSampler(ratio, rand.Float64)
}

func newSampler(ratio float64, draw func() float64) sdktrace.Sampler {
	return sampler{ratio: ratio, draw: draw, next: sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))}
}

type sampler struct {
	ratio float64
	draw  func() float64 // in [0, 1)
	next  sdktrace.Sampler
}

func (s sampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	ts := trace.SpanContextFromContext(p.ParentContext).TraceState()
	for _, a := range p.Attributes {
		if a.Key == AlwaysSample && a.Value.AsBool() {
			return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: ts}
		}
	}
	if p.Kind == trace.SpanKindServer {
		d := sdktrace.Drop
		if s.draw() < s.ratio {
			d = sdktrace.RecordAndSample
		}
		return sdktrace.SamplingResult{Decision: d, Tracestate: ts}
	}
	return s.next.ShouldSample(p)
}

func (s sampler) Description() string {
	return fmt.Sprintf("specsync{requests:%g,%s}", s.ratio, s.next.Description())
}

// flushTimeout bounds a flush: a slow trace backend costs an invocation
// at most this much, and its spans are lost rather than the answer held.
// A var: tests of a backend that never answers shorten it.
var flushTimeout = 5 * time.Second

// Flush exports what the instance's spans hold before the invocation
// returns: Cloud Functions throttle the CPU once the response is sent,
// so a batch left for later may never leave. It flushes the provider of
// ctx's span (the global one when that is not an SDK's), outlives ctx's
// cancellation (the request may be done) but not flushTimeout. Without
// an SDK provider it does nothing.
func Flush(ctx context.Context) {
	type flusher interface{ ForceFlush(context.Context) error }
	f, ok := trace.SpanFromContext(ctx).TracerProvider().(flusher)
	if !ok {
		f, ok = otel.GetTracerProvider().(flusher)
	}
	if ok {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		_ = f.ForceFlush(ctx)
	}
}

// propagator is W3C trace context: what pkg/queue writes into every
// message's attributes and Extract and Handler read, whatever global propagator is (or is not) installed.
var propagator = propagation.TraceContext{}

// Extract returns ctx carrying the remote trace context a message's
// attributes hold, if they hold one.
func Extract(ctx context.Context, attrs map[string]string) context.Context {
	return propagator.Extract(ctx, propagation.MapCarrier(attrs))
}
