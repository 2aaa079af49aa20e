package osb_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/osb"
)

// A write's log line carries its ids capped: a 60 kB instance or binding
// id (refused with a 400) is logged as its first 64 bytes and its size,
// so no line grows with what a request chose.
func TestWriteLinesCapIDs(t *testing.T) {
	logs := &syncBuffer{}
	e := newEnv(t, time.Minute)
	broker := osb.NewBroker(e.st, osb.Config{Username: brokerUser, Password: brokerPass, MaxBodyBytes: testMaxBody, Logger: logging.New(logs, "info")})
	srv := httptest.NewServer(broker.Handler())
	t.Cleanup(srv.Close)
	e.srv = srv
	db := parseSpec(t, specYAML("db"))
	e.seed(db)
	small := db.Plans[0].ID
	long := strings.Repeat("i", 60<<10)
	e.provision("i-1", db.ID, small)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPut, "/v2/service_instances/" + long, provisionBody(db.ID, small)},
		{http.MethodPatch, "/v2/service_instances/" + long, patchBody(db.ID, "", "")},
		{http.MethodDelete, "/v2/service_instances/" + long + "?service_id=" + db.ID + "&plan_id=" + small, ""},
		{http.MethodPut, bindingURL("i-1", long), bindBody(db.ID, small, "")},
		{http.MethodDelete, bindingURL(long, long) + "?service_id=" + db.ID + "&plan_id=" + small, ""},
	} {
		if r := e.do(c.method, c.path, c.body); r.status != http.StatusBadRequest {
			t.Fatalf("%s of a 60 kB id: %d %s", c.method, r.status, r.body)
		}
	}
	lines := logs.lines(t, "osb write")
	if len(lines) != 6 {
		t.Fatalf("%d write lines, want 6", len(lines))
	}
	want := fmt.Sprintf("(%d bytes)", len(long))
	for i, l := range lines[1:] {
		for _, k := range []string{"instance", "binding"} {
			v, _ := l[k].(string)
			if len(v) > 100 || (v != "i-1" && v != "" && !strings.HasSuffix(v, want)) {
				t.Errorf("line %d: %s is %d bytes: %.120q", i+1, k, len(v), v)
			}
		}
	}
	for _, l := range strings.Split(logs.buf.String(), "\n") {
		if len(l) > 2<<10 {
			t.Errorf("a log line of %d bytes: %.200s", len(l), l)
		}
	}
}

// The whole text of a store error an answer left out goes to the
// broker's logger, not slog.Default: where the deployment reads the
// broker's lines, and where the fuzz targets look for secrets.
func TestStoreErrorsAreLoggedToTheBrokersLogger(t *testing.T) {
	logs, elsewhere := &syncBuffer{}, &syncBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(elsewhere, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	e := newEnv(t, time.Minute)
	broker := osb.NewBroker(e.st, osb.Config{Username: brokerUser, Password: brokerPass, MaxBodyBytes: testMaxBody, Logger: logging.New(logs, "info")})
	// A request whose context is over fails in the store, with the
	// store's text.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodGet, "/v2/service_instances/i-1", nil).WithContext(ctx)
	req.SetBasicAuth(brokerUser, brokerPass)
	req.Header.Set("X-Broker-API-Version", apiVersion)
	w := httptest.NewRecorder()
	broker.Handler().ServeHTTP(w, req)
	if w.Code < 500 {
		t.Fatalf("a store that failed answered %d %s", w.Code, w.Body.String())
	}
	if got := strings.Count(logs.buf.String(), `"message":"a store error answered without its text"`); got != 1 {
		t.Fatalf("the broker's log has %d lines of the store error, want 1: %s", got, logs.buf.String())
	}
	if strings.Contains(elsewhere.buf.String(), "store error") {
		t.Fatalf("the store error went to slog.Default: %s", elsewhere.buf.String())
	}
}
