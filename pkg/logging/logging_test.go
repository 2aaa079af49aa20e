package logging

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestCloudLoggingFields(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "debug")
	log.Warn("registry down", "registry", "r1")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	if line["severity"] != "WARNING" || line["message"] != "registry down" || line["registry"] != "r1" {
		t.Fatalf("want severity/message/attrs, got %v", line)
	}
	if _, ok := line["level"]; ok {
		t.Fatalf("slog's level key leaked: %v", line)
	}
}

func TestLevelFilters(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, "error").Info("hidden")
	if buf.Len() != 0 {
		t.Fatalf("info logged at error level: %q", buf.String())
	}
	for in, want := range map[string]string{"debug": "DEBUG", "info": "INFO", "WARNING": "WARNING", "error": "ERROR", "bogus": "INFO"} {
		if got := severity(ParseLevel(in)); got != want {
			t.Errorf("ParseLevel(%q) -> %s, want %s", in, got, want)
		}
	}
}
