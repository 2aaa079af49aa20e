package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A trace backend that takes the export and never answers costs a kept
// request its flush's bound, never its answer: the request is answered
// while the backend still holds the export (whose own timeouts, the
// exporter's and the batch's, set to ten minutes here, would otherwise
// be what ended the wait).
func TestFlushIsBoundedWhenTheBackendHangs(t *testing.T) {
	noOTLPEnvironment(t)
	rcv := &receiver{hold: make(chan struct{})}
	endpoint := "http://" + rcv.serve(t, nil)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "600000")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "600000")
	was := flushTimeout
	flushTimeout = 200 * time.Millisecond
	t.Cleanup(func() { flushTimeout = was })

	ctx := context.Background()
	tp, err := newProvider(ctx, Config{Exporter: ExportOTLP, SampleRatio: 1, Endpoint: endpoint, Protocol: ProtocolGRPC})
	if err != nil {
		t.Fatal(err)
	}
	// Shutdown waits on the held export too, which the receiver's
	// cleanup (after this one) lets go: it is cut short.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
	})
	h := handler(tp.Tracer("t"), "catalog", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("the catalog"))
	}), nil)

	for i := range 3 {
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v2/catalog", nil))
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("request %d: still waiting on the trace backend after a minute: the flush is not bounded", i)
		}
		if w.Code != http.StatusOK || w.Body.String() != "the catalog" {
			t.Errorf("request %d: answered %d %q", i, w.Code, w.Body)
		}
	}
	if got, _ := rcv.answered(); len(got) != 0 {
		t.Fatalf("the backend answered %d exports: it was meant to hang", len(got))
	}
	// The requests were answered while the export was held, not because
	// none was attempted.
	for deadline := time.Now().Add(30 * time.Second); rcv.calls.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no export reached the backend")
		}
	}
}
