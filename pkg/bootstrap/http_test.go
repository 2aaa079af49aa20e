package bootstrap_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// POST /bootstrap takes no body, whether its length is announced or not:
// a chunked body (no Content-Length) is refused like any other and starts
// nothing, and an empty chunked body is no body.
func TestBootstrapRefusesABodyOfUnknownLength(t *testing.T) {
	t.Parallel()
	client := checked(t)
	pub := &countingPublisher{}
	svc := &bootstrap.Service{Operations: bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour), Publisher: pub,
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

// The bootstrap function's admin endpoints follow the one admin rule of
// web.AdminAuth: the token as a bearer token or as a basic-auth password.
func TestBootstrapAdminRule(t *testing.T) {
	t.Parallel()
	client := checked(t)
	const token = "bootstrap-admin-token-0123456789"
	svc := &bootstrap.Service{Operations: bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour), Publisher: &countingPublisher{},
		Registries: rigRegistries, VerifyAdmin: web.StaticToken(token), Logger: quiet}
	h := svc.Handler()
	for name, c := range map[string]struct {
		auth func(*http.Request)
		want int
	}{
		"bearer":         {func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, http.StatusAccepted},
		"basic password": {func(r *http.Request) { r.SetBasicAuth("anyone", token) }, http.StatusAccepted},
		"wrong basic":    {func(r *http.Request) { r.SetBasicAuth("anyone", token+"x") }, http.StatusUnauthorized},
		"none":           {func(*http.Request) {}, http.StatusUnauthorized},
	} {
		req := httptest.NewRequest(http.MethodPost, "/bootstrap", nil)
		c.auth(req)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("%s: %d %s, want %d", name, w.Code, w.Body.String(), c.want)
		}
		if w.Code == http.StatusUnauthorized && len(w.Header().Values("WWW-Authenticate")) != 2 {
			t.Errorf("%s: challenges %q, want Basic and Bearer", name, w.Header().Values("WWW-Authenticate"))
		}
	}
}
