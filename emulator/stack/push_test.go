package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// The relay reads every line however long, keeps at most maxRelayLine
// bytes of each and counts the rest: a line it could not read would stop
// it, and the framework's writes to a full pipe would block.
func TestRelayLines(t *testing.T) {
	long := strings.Repeat("a", 3*maxRelayLine+5)
	in := "one\n" + long + "\n\nlast without newline"
	type got struct {
		line string
		cut  int
	}
	var out []got
	relayLines(strings.NewReader(in), func(line string, cut int) { out = append(out, got{line, cut}) })
	want := []got{{"one", 0}, {long[:maxRelayLine], 2*maxRelayLine + 5}, {"", 0}, {"last without newline", 0}}
	if len(out) != len(want) {
		t.Fatalf("%d lines, want %d", len(out), len(want))
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("line %d: %.20q cut %d, want %.20q cut %d", i, out[i].line, out[i].cut, want[i].line, want[i].cut)
		}
	}
}

// The push gate lets through only a Pub/Sub push below its token: the
// functions framework behind it prints a body it cannot parse raw.
func TestPushGate(t *testing.T) {
	var reached []string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reached = append(reached, r.URL.Path+" "+string(b))
	})
	var logs bytes.Buffer
	h := pushGate("token-0123456789abcdef", next, slog.New(slog.NewJSONHandler(&logs, nil)))
	const forged = "x\n{\"severity\":\"EMERGENCY\"}"
	push := `{"message":{"data":"eA==","messageId":"1"},"subscription":"projects/p/subscriptions/s"}`
	for _, c := range []struct {
		method, path, ct, body string
		want                   int
	}{
		{"POST", "/token-0123456789abcdef/projects/p/topics/t", "", push, http.StatusOK},
		{"POST", "/projects/p/topics/t", "", push, http.StatusNotFound},
		{"POST", "/wrong-0123456789abcdefg/projects/p/topics/t", "", push, http.StatusNotFound},
		{"GET", "/token-0123456789abcdef/projects/p/topics/t", "", "", http.StatusMethodNotAllowed},
		{"POST", "/token-0123456789abcdef/other", "", push, http.StatusNotFound},
		{"POST", "/token-0123456789abcdef/projects/p/topics/t", "", forged, http.StatusBadRequest},
		{"POST", "/token-0123456789abcdef/projects/p/topics/t", "", `{"message":"x"}`, http.StatusBadRequest},
		{"POST", "/token-0123456789abcdef/projects/p/topics/t", "", `[]`, http.StatusBadRequest},
		{"POST", "/token-0123456789abcdef/projects/p/topics/t", "application/cloudevents+json", push, http.StatusBadRequest},
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("%s %s %.20q: %d, want %d", c.method, c.path, c.body, w.Code, c.want)
		}
	}
	if len(reached) != 1 || reached[0] != "/projects/p/topics/t "+push {
		t.Errorf("what reached the framework: %q", reached)
	}
	if strings.Contains(logs.String(), "EMERGENCY") {
		t.Errorf("a refused body reached the log: %s", logs.String())
	}
}

// relayStderr turns what is written to os.Stderr into JSON lines of the
// log while the stack runs, and gives os.Stderr back when it closes.
func TestRelayStderr(t *testing.T) {
	orig := os.Stderr
	var logs syncBuffer
	s := &Stack{}
	if err := s.relayStderr(slog.New(slog.NewJSONHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(os.Stderr, "Error: x\n{\"severity\":\"EMERGENCY\",\"msg\":\"forged\"}\n")
	s.Close()
	if os.Stderr != orig {
		t.Fatal("os.Stderr was not given back")
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), logs.String())
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["msg"] != "the functions framework printed" || m["severity"] != nil {
			t.Errorf("relayed line %s", l)
		}
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
