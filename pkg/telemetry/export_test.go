package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	texporter "github.com/GoogleCloudPlatform/opentelemetry-operations-go/exporter/trace"
)

// noOTLPEnvironment clears the variables the OTLP exporters read
// themselves, so the machine's own cannot steer a test.
func noOTLPEnvironment(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_INSECURE",
		"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_RESOURCE_ATTRIBUTES", "K_SERVICE"} {
		t.Setenv(k, "")
	}
}

// exportOne starts and ends a span on c's provider and flushes it.
func exportOne(t *testing.T, c Config, name string) {
	t.Helper()
	ctx := context.Background()
	tp, err := newProvider(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tp.Shutdown(ctx) }()
	_, span := tp.Tracer("t").Start(ctx, name)
	span.End()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// SPECSYNC_TRACE=otlp with no endpoint is Google's Telemetry API: OTLP
// over gRPC and TLS, each call carrying an access token of the
// Application Default Credentials, the spans' resource naming the
// service and the project (gcp.project_id, which the API files them
// under). The receiver here stands where telemetry.googleapis.com:443
// is, and the credentials' token endpoint is an OAuth server in the
// process.
func TestOTLPToGoogleWithApplicationDefaultCredentials(t *testing.T) {
	noOTLPEnvironment(t)
	applicationDefaultCredentials(t, "ya29.token-of-the-test")
	serverCreds, clientTLS := selfSigned(t)
	rcv := &receiver{}
	addr := rcv.serve(t, serverCreds)

	exportOne(t, Config{Exporter: ExportOTLP, SampleRatio: 1, Project: "specsync-prod", google: googleTarget{addr: addr, tls: clientTLS}}, "bootstrap")

	got, auth := rcv.answered()
	if names := spanNames(got); !slices.Equal(names, []string{"bootstrap"}) {
		t.Fatalf("the Telemetry API got spans %v, want the one bootstrap", names)
	}
	res := resourceAttrs(got[0])
	if res["gcp.project_id"] != "specsync-prod" || res["service.name"] != "specsync" {
		t.Errorf("the spans' resource is %v: want gcp.project_id specsync-prod and service.name specsync", res)
	}
	if !slices.Equal(auth, []string{"Bearer ya29.token-of-the-test"}) {
		t.Errorf("the export carried authorization %q, want the ADC's access token", auth)
	}
	if (googleTarget{}).address() != "telemetry.googleapis.com:443" {
		t.Errorf("the Telemetry API is at %s", (googleTarget{}).address())
	}
}

// With an endpoint, otlp speaks to it in the protocol asked for (HTTP by
// default, gRPC), and never sends it Google's credentials: a collector
// is not Google.
func TestOTLPToAnEndpoint(t *testing.T) {
	noOTLPEnvironment(t)
	applicationDefaultCredentials(t, "ya29.must-not-leave")

	t.Run("http", func(t *testing.T) {
		got := make(chan string, 10)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type") + " auth=" + r.Header.Get("Authorization")
		}))
		defer srv.Close()
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
		exportOne(t, Config{Exporter: ExportOTLP, SampleRatio: 1, Project: "p", Endpoint: srv.URL}, "bootstrap")
		select {
		case g := <-got:
			if g != "POST /v1/traces application/x-protobuf auth=" {
				t.Errorf("the collector got %q", g)
			}
		default:
			t.Fatal("the flush returned before the span reached the collector")
		}
	})
	t.Run("grpc", func(t *testing.T) {
		rcv := &receiver{}
		endpoint := "http://" + rcv.serve(t, nil)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
		exportOne(t, Config{Exporter: ExportOTLP, SampleRatio: 1, Project: "p", Endpoint: endpoint, Protocol: ProtocolGRPC}, "bootstrap")
		got, auth := rcv.answered()
		if names := spanNames(got); !slices.Equal(names, []string{"bootstrap"}) || resourceAttrs(got[0])["gcp.project_id"] != "p" {
			t.Fatalf("the collector got spans %v", names)
		}
		if len(auth) != 0 {
			t.Errorf("the collector was sent credentials %q", auth)
		}
	})

	ctx := context.Background()
	if off, err := newProvider(ctx, Config{Exporter: ExportOff}); off != nil || err != nil {
		t.Errorf("off built %v, %v", off, err)
	}
	if _, err := newProvider(ctx, Config{Exporter: "jaeger"}); err == nil {
		t.Error("an unknown exporter built a provider")
	}
	if _, err := newProvider(ctx, Config{Exporter: ExportOTLP, Endpoint: "http://127.0.0.1:1", Protocol: "http/json"}); err == nil || !strings.Contains(err.Error(), "http/json") {
		t.Errorf("an unknown protocol: %v", err)
	}
}

// cloudtrace is Google's Cloud Trace exporter until the day Google
// archives it, with a warning that names the day and what to set; from
// that day it is the Telemetry API, with a warning that says so.
func TestCloudTraceUntilItsArchiveDate(t *testing.T) {
	noOTLPEnvironment(t)
	applicationDefaultCredentials(t, "ya29.token-of-the-test")
	serverCreds, clientTLS := selfSigned(t)
	rcv := &receiver{}
	target := googleTarget{addr: rcv.serve(t, serverCreds), tls: clientTLS}

	var before bytes.Buffer
	exp, err := newExporter(context.Background(), Config{Exporter: ExportCloudTrace, Project: "p", google: target,
		Logger: slog.New(slog.NewJSONHandler(&before, nil)), now: func() time.Time { return CloudTraceArchived.Add(-time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := exp.(*texporter.Exporter); !ok {
		t.Errorf("before %s cloudtrace is a %T, want Cloud Trace's exporter", CloudTraceArchived, exp)
	}
	_ = exp.Shutdown(context.Background())
	if l := before.String(); !strings.Contains(l, `"level":"WARN"`) || !strings.Contains(l, "2027-01-01") || !strings.Contains(l, "SPECSYNC_TRACE=otlp") {
		t.Errorf("before the archive date the line is %q", l)
	}

	var after bytes.Buffer
	exportOne(t, Config{Exporter: ExportCloudTrace, SampleRatio: 1, Project: "p", google: target,
		Logger: slog.New(slog.NewJSONHandler(&after, nil)), now: func() time.Time { return CloudTraceArchived }}, "bootstrap")
	if got, _ := rcv.answered(); !slices.Equal(spanNames(got), []string{"bootstrap"}) {
		t.Errorf("from %s cloudtrace sent %v to the Telemetry API", CloudTraceArchived, spanNames(got))
	}
	if l := after.String(); !strings.Contains(l, `"level":"WARN"`) || !strings.Contains(l, "archived") || !strings.Contains(l, "Telemetry API") {
		t.Errorf("after the archive date the line is %q", l)
	}
}
