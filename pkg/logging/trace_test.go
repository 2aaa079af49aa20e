package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// A line logged inside a span names the span's trace as Cloud Logging
// reads it; a line without one, and one logged without its context,
// carries no trace field.
func TestLinesInsideASpanCarryItsTrace(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "info", Project("proj-1")).With("registry", "r1")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	log.InfoContext(ctx, "inside")
	log.InfoContext(context.Background(), "outside")
	log.Info("no context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	var in map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &in); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		TraceKey:        "projects/proj-1/traces/4bf92f3577b34da6a3ce929d0e0e4736",
		SpanIDKey:       "00f067aa0ba902b7",
		TraceSampledKey: true,
		"registry":      "r1",
		"message":       "inside",
	}
	for k, v := range want {
		if in[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, in[k], v, lines[0])
		}
	}
	for _, l := range lines[1:] {
		if strings.Contains(l, "logging.googleapis.com") {
			t.Errorf("a line outside any span names a trace: %s", l)
		}
	}
}

// A logger bound to a span's context names that span on lines logged
// without one; a line logged with another span names that one.
func TestBoundLoggerNamesTheSpan(t *testing.T) {
	var buf bytes.Buffer
	mk := func(b byte) context.Context {
		return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1, b}, SpanID: trace.SpanID{2, b}}))
	}
	log := WithContext(New(&buf, "info", Project("p")), mk(1)).With("registry", "r1")
	log.Info("bound")
	log.InfoContext(mk(2), "own")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for i, want := range []string{"0201000000000000", "0202000000000000"} {
		var l map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &l); err != nil {
			t.Fatal(err)
		}
		if l[SpanIDKey] != want || l["registry"] != "r1" || l[TraceSampledKey] != false {
			t.Errorf("line %d: %v, want span %s", i, l, want)
		}
	}
}
