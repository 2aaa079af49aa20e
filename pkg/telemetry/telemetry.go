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
	"os"
	"sync"
	"time"

	texporter "github.com/GoogleCloudPlatform/opentelemetry-operations-go/exporter/trace"
	"go.opentelemetry.io/contrib/detectors/gcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Exporters Setup knows (SPECSYNC_TRACE).
const (
	ExportOff        = "off"
	ExportCloudTrace = "cloudtrace"
	ExportStdout     = "stdout"
	ExportOTLP       = "otlp" // to OTEL_EXPORTER_OTLP_ENDPOINT, over HTTP
)

// Config is how an instance traces (settings.Tracing, which checks the
// exporter's name).
type Config struct {
	Exporter string
	// SampleRatio is the share of traces kept that no sampled parent
	// asks for; a span started with AlwaysSample is kept whatever it is.
	SampleRatio float64
	Project     string // the Cloud Trace project
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
	var exp sdktrace.SpanExporter
	var err error
	switch c.Exporter {
	case "", ExportOff:
		return nil, nil
	case ExportCloudTrace:
		exp, err = texporter.New(texporter.WithProjectID(c.Project), texporter.WithContext(context.WithoutCancel(ctx)))
	case ExportStdout:
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	case ExportOTLP:
		// The endpoint, headers and timeout come from the standard
		// OTEL_EXPORTER_OTLP_* variables.
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: unknown exporter %q", c.Exporter)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: start the %s exporter: %w", c.Exporter, err)
	}
	opts := []resource.Option{resource.WithAttributes(serviceName)}
	if c.Exporter == ExportCloudTrace {
		// Which function, revision and region: asked of the metadata
		// server, which a laptop exporting to stdout or OTLP lacks (the
		// detector would wait on it at every cold start).
		opts = append(opts, resource.WithDetectors(gcp.NewDetector()))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil && res == nil {
		// A partial resource (a detector failed) is kept; with none,
		// the spans still name the service.
		res = resource.NewSchemaless(serviceName)
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
// ratio: a bootstrap is rare and is what an operator looks for.
const AlwaysSample = attribute.Key("specsync.sample.always")

// NewSampler keeps a span whose start attributes set AlwaysSample, a
// span whose parent was sampled, and ratio of the traces that start
// here.
func NewSampler(ratio float64) sdktrace.Sampler {
	return sampler{next: sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))}
}

type sampler struct{ next sdktrace.Sampler }

func (s sampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, a := range p.Attributes {
		if a.Key == AlwaysSample && a.Value.AsBool() {
			return sdktrace.SamplingResult{
				Decision:   sdktrace.RecordAndSample,
				Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState(),
			}
		}
	}
	return s.next.ShouldSample(p)
}

func (s sampler) Description() string { return "specsync(" + s.next.Description() + ")" }

// flushTimeout bounds a flush: a slow trace backend costs an invocation
// at most this much, and its spans are lost rather than the answer held.
const flushTimeout = 5 * time.Second

// Flush exports what the instance's spans hold before the invocation
// returns: Cloud Functions throttle the CPU once the response is sent,
// so a batch left for later may never leave. It outlives ctx's
// cancellation (the request may be done) but not flushTimeout. Without
// an SDK provider it does nothing.
func Flush(ctx context.Context) {
	if f, ok := otel.GetTracerProvider().(interface{ ForceFlush(context.Context) error }); ok {
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
