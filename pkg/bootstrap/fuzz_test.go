package bootstrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/store"
)

// FuzzBootstrapParams sends arbitrary query strings, bodies and operation
// ids to POST /bootstrap and GET /bootstrap/last_operation: the answer is
// 202, 200, 400 or 404, never 5xx; every refusal is an OSB error body; a
// refused start creates no operation and publishes nothing.
func FuzzBootstrapParams(f *testing.F) {
	for _, s := range [][3]string{
		{"", "", ""}, {"dry_run=true", "", ""}, {"dry_run=false", "", ""}, {"dry_run=maybe", "", ""},
		{"dry_run=1&dry_run=0", "", ""}, {"dry_run", "", ""}, {"force=true", "", ""}, {"%zz", "", ""},
		{";;;&&&==", "", ""}, {"", "{}", ""}, {"", "x", "op"}, {"", "", "operation=" + strings.Repeat("a", 2000)},
		{"", "", "operation=../../meta/bootstrap"}, {"", "", "operation="}, {"", "", "operation=%00"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	client := emulatortest.Firestore(f)
	ops := bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour)
	pub := &countingPublisher{}
	logs := &lockedBuffer{}
	svc := &bootstrap.Service{Operations: ops, Publisher: pub, Registries: rigRegistries,
		VerifyAdmin: func(*http.Request, string) bool { return true }, Logger: logging.New(logs, "debug")}
	h := svc.Handler()
	// No answer and no log line holds the credential, and every log line
	// is one JSON object.
	checkLogs := func(t *testing.T, w *httptest.ResponseRecorder) {
		t.Helper()
		out := logs.String()
		if strings.Contains(out, bootstrapCanary) || strings.Contains(w.Body.String(), bootstrapCanary) {
			t.Fatal("the admin credential is in an answer or the log")
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l != "" && !json.Valid([]byte(l)) {
				t.Fatalf("a log line is not JSON: %q", l)
			}
		}
	}
	f.Fuzz(func(t *testing.T, query, body, pollQuery string) {
		before, _, err := invariant.Check(context.Background(), client, invariant.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pub.mu.Lock()
		published := len(pub.msgs)
		pub.mu.Unlock()
		req := httptest.NewRequest(http.MethodPost, "/bootstrap", strings.NewReader(body))
		req.URL.RawQuery = query
		req.Header.Set("Authorization", "Bearer "+bootstrapCanary)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusAccepted:
		case http.StatusBadRequest:
			wantError(t, w)
			after := invariant.Require(t, client, invariant.Options{Settled: true, Feed: true})
			pub.mu.Lock()
			n := len(pub.msgs)
			pub.mu.Unlock()
			if len(after.Operations) != len(before.Operations) || n != published {
				t.Fatalf("a refused start (%q, body %q) created an operation or published", query, body)
			}
		default:
			t.Fatalf("POST /bootstrap?%s: %d %s", query, w.Code, w.Body.String())
		}
		checkLogs(t, w)
		req = httptest.NewRequest(http.MethodGet, "/bootstrap/last_operation", nil)
		req.URL.RawQuery = pollQuery
		req.Header.Set("Authorization", "Bearer "+bootstrapCanary)
		w = httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusNotFound:
			wantError(t, w)
		default:
			t.Fatalf("GET last_operation?%s: %d %s", pollQuery, w.Code, w.Body.String())
		}
		checkLogs(t, w)
	})
}

// bootstrapCanary is the admin credential of the fuzzed requests.
const bootstrapCanary = "bootstrap-fuzz-canary-0123456789"

// lockedBuffer is a log the fuzz target reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func wantError(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Description == "" {
		t.Fatalf("%d with a body that is not an OSB error: %q", w.Code, w.Body.String())
	}
}
