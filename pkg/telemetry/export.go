package telemetry

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"time"

	texporter "github.com/GoogleCloudPlatform/opentelemetry-operations-go/exporter/trace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/oauth"
)

// TelemetryAPI is Google's OTLP endpoint (gRPC): where otlp sends spans
// when no endpoint is set.
const TelemetryAPI = "telemetry.googleapis.com:443"

// CloudTraceArchived is when Google archives the Cloud Trace exporter
// (opentelemetry-operations-go, MIGRATION.md). From then on cloudtrace
// means the Telemetry API, so removing the exporter's code later
// changes nothing a deployment sees.
var CloudTraceArchived = time.Date(2027, time.January, 1, 0, 0, 0, 0, time.UTC)

// The OTLP protocols an endpoint may speak (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// googleScope is the scope the Application Default Credentials' tokens
// ask for; the role (roles/telemetry.tracesWriter) is what limits them.
const googleScope = "https://www.googleapis.com/auth/cloud-platform"

// googleTarget is where the Telemetry API is: TelemetryAPI with the
// system's roots, unless a test points it at its own receiver.
type googleTarget struct {
	addr string
	tls  *tls.Config
}

// newExporter is the exporter Config asks for; nil when tracing is off.
func newExporter(ctx context.Context, c Config) (sdktrace.SpanExporter, error) {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	var exp sdktrace.SpanExporter
	var err error
	switch c.Exporter {
	case "", ExportOff:
		return nil, nil
	case ExportCloudTrace:
		if !now().Before(CloudTraceArchived) {
			log.WarnContext(ctx, "SPECSYNC_TRACE=cloudtrace: Google archived the Cloud Trace exporter on "+CloudTraceArchived.Format(time.DateOnly)+"; spans go by OTLP to the Telemetry API instead (set SPECSYNC_TRACE=otlp)",
				"endpoint", c.google.address(), "needs", "roles/telemetry.tracesWriter and telemetry.googleapis.com enabled")
			exp, err = googleExporter(ctx, c.google)
			break
		}
		log.WarnContext(ctx, "SPECSYNC_TRACE=cloudtrace uses the Cloud Trace exporter, which Google deprecated and archives on "+CloudTraceArchived.Format(time.DateOnly)+"; from that date cloudtrace sends OTLP to the Telemetry API: set SPECSYNC_TRACE=otlp now",
			"needs", "roles/telemetry.tracesWriter and telemetry.googleapis.com enabled")
		exp, err = texporter.New(texporter.WithProjectID(c.Project), texporter.WithContext(context.WithoutCancel(ctx)))
	case ExportStdout:
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	case ExportOTLP:
		switch {
		case c.Endpoint == "":
			exp, err = googleExporter(ctx, c.google)
		case c.Protocol == ProtocolGRPC:
			// The endpoint, headers, TLS and timeout come from the
			// standard OTEL_EXPORTER_OTLP_* variables.
			exp, err = otlptracegrpc.New(ctx)
		case c.Protocol == "" || c.Protocol == ProtocolHTTP:
			exp, err = otlptracehttp.New(ctx)
		default:
			return nil, fmt.Errorf("tracing: OTLP protocol %q is not %s or %s", c.Protocol, ProtocolGRPC, ProtocolHTTP)
		}
	default:
		return nil, fmt.Errorf("tracing: unknown exporter %q", c.Exporter)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: start the %s exporter: %w", c.Exporter, err)
	}
	return exp, nil
}

func (g googleTarget) address() string {
	if g.addr == "" {
		return TelemetryAPI
	}
	return g.addr
}

// googleExporter sends OTLP over gRPC to the Telemetry API, each call
// carrying an access token of the Application Default Credentials (the
// function's service account on Google Cloud; gcloud's on a laptop).
func googleExporter(ctx context.Context, g googleTarget) (sdktrace.SpanExporter, error) {
	// The token source refreshes with the context it was made with: not
	// the cold start's, which ends.
	creds, err := oauth.NewApplicationDefault(context.WithoutCancel(ctx), googleScope)
	if err != nil {
		return nil, fmt.Errorf("find Application Default Credentials for %s: %w", g.address(), err)
	}
	cfg := g.tls
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return otlptracegrpc.New(ctx,
		otlptracegrpc.WithEndpoint(g.address()),
		otlptracegrpc.WithTLSCredentials(credentials.NewTLS(cfg)),
		otlptracegrpc.WithDialOption(grpc.WithPerRPCCredentials(creds)),
	)
}
