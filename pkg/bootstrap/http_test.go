package bootstrap_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/invariant"
)

// POST /bootstrap takes no body, whether its length is announced or not:
// a chunked body (no Content-Length) is refused like any other and starts
// nothing, and an empty chunked body is no body.
func TestBootstrapRefusesABodyOfUnknownLength(t *testing.T) {
	t.Parallel()
	client := emulatortest.Firestore(t)
	pub := &countingPublisher{}
	svc := &bootstrap.Service{Operations: bootstrap.NewOperations(client, 10*time.Minute, time.Hour), Publisher: pub,
		Registries: rigRegistries, VerifyAdmin: func(*http.Request, string) bool { return true }, Logger: quiet}
	h := svc.Handler()
	post := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/bootstrap", strings.NewReader(body))
		req.ContentLength = -1 // as the server sees a chunked body
		req.Header.Set("Authorization", "Bearer admin")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := post(`{"dry_run": true}`); w.Code != http.StatusBadRequest {
		t.Fatalf("chunked body: %d %s, want 400", w.Code, w.Body.String())
	} else {
		wantError(t, w)
	}
	if st := invariant.Require(t, client, invariant.Options{}); len(st.Operations) != 0 || len(pub.msgs) != 0 {
		t.Fatalf("a refused start left %d operations and %d messages", len(st.Operations), len(pub.msgs))
	}
	if w := post(""); w.Code != http.StatusAccepted {
		t.Fatalf("empty chunked body: %d %s, want 202", w.Code, w.Body.String())
	}
}
