package bootstrap_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/store"
)

// The bootstrap function's side of the input contract: a chunked POST
// whose body stalls past the server's read deadline is a 408 and starts
// nothing (it was taken for "no body", and the bootstrap went on with a
// cancelled request, a 503 after 30 s); a repeated dry_run is a 400
// (the last one counted: dry_run=true&dry_run=false started a real run);
// an operation id that is no id is a 400 without the store's text
// (invalid UTF-8 was a 503).
func TestBootstrapInputContract(t *testing.T) {
	t.Parallel()
	client := checked(t)
	pub := &countingPublisher{}
	svc := &bootstrap.Service{Operations: bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour), Publisher: pub,
		Registries: rigRegistries, VerifyAdmin: func(*http.Request, string) bool { return true }, Logger: quiet}
	srv := httptest.NewUnstartedServer(svc.Handler())
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The headers, then nothing: the chunked body never starts.
	fmt.Fprint(conn, "POST /bootstrap HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin\r\nTransfer-Encoding: chunked\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled POST /bootstrap: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a stalled chunked POST /bootstrap: %d %s, want 408", resp.StatusCode, body)
	}

	do := func(method, target string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, nil)
		req.Header.Set("Authorization", "Bearer admin")
		w := httptest.NewRecorder()
		svc.Handler().ServeHTTP(w, req)
		return w
	}
	for _, q := range []string{"dry_run=true&dry_run=false", "dry_run=false&dry_run=true", "dry_run=true&dry_run=true", "dry_run=%zz"} {
		if w := do(http.MethodPost, "/bootstrap?"+q); w.Code != http.StatusBadRequest {
			t.Errorf("POST /bootstrap?%s: %d %s, want 400", q, w.Code, w.Body.String())
		} else {
			wantError(t, w)
		}
	}
	if st := invariant.Require(t, client, invariant.Options{}); len(st.Operations) != 0 || len(pub.msgs) != 0 {
		t.Fatalf("refused starts left %d operations and %d messages", len(st.Operations), len(pub.msgs))
	}
	for _, id := range []string{"%FF", "%ED%B0%80", "%2E", "%2E%2E", "__x__", "a%2Fb", strings.Repeat("a", 300), "x&operation=y"} {
		w := do(http.MethodGet, "/bootstrap/last_operation?operation="+id)
		if w.Code != http.StatusBadRequest {
			t.Errorf("last_operation?operation=%s: %d %s, want 400", id, w.Code, w.Body.String())
			continue
		}
		wantError(t, w)
		for _, s := range []string{"projects/", "documents/", "rpc error", "firestore"} {
			if strings.Contains(strings.ToLower(w.Body.String()), s) {
				t.Errorf("last_operation?operation=%s: the answer holds %q: %s", id, s, w.Body.String())
			}
		}
	}
}
