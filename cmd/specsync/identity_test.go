package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// With SPECSYNC_IDENTITY_TOKEN set, every request the CLI sends carries
// it as X-Serverless-Authorization (Cloud Run's IAM check of a function
// only some identities may invoke) while Authorization keeps the
// application's credential; unset, no such header is sent. The token is
// never printed or logged, not even at debug level or in an error.
func TestIdentityTokenTravelsInItsOwnHeader(t *testing.T) {
	const identity, admin = "eyJhbGciOiJSUzI1NiJ9.identity-token-canary.sig", "admin-token-0123456789abcdef"
	type seen struct{ path, serverless, authorization string }
	var mu sync.Mutex
	var got []seen
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.URL.Path, r.Header.Get("X-Serverless-Authorization"), r.Header.Get("Authorization")})
		refuse := fail
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case refuse:
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error": "Unauthorized", "description": "the admin token is not valid"}`))
		case r.URL.Path == "/bootstrap":
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte(`{"operation": "op-1", "coalesced": false}`))
		case r.URL.Path == "/v2/catalog":
			w.Write([]byte(`{"services": []}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("SPECSYNC_URL", srv.URL)
	t.Setenv("SPECSYNC_ADMIN_TOKEN", admin)
	t.Setenv("SPECSYNC_BROKER_USERNAME", "platform")
	t.Setenv("SPECSYNC_BROKER_PASSWORD", "broker-password")
	run := func(args ...string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := realMain(context.Background(), append(args, "--log-level", "debug"), &out, &errOut)
		all := out.String() + errOut.String()
		if err != nil {
			all += err.Error()
		}
		if strings.Contains(all, "identity-token-canary") {
			t.Errorf("specsync %s prints the identity token:\n%s", strings.Join(args, " "), all)
		}
		return all, err
	}
	requests := func() []seen {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}

	t.Setenv(IdentityTokenEnv, identity+"\n") // as $(gcloud ...) might leave it
	for _, args := range [][]string{{"bootstrap"}, {"catalog"}} {
		if out, err := run(args...); err != nil {
			t.Fatalf("specsync %s: %v\n%s", args[0], err, out)
		}
	}
	r := requests()
	if len(r) != 2 {
		t.Fatalf("%d requests, want 2: %+v", len(r), r)
	}
	for _, s := range r {
		if s.serverless != "Bearer "+identity {
			t.Errorf("%s: X-Serverless-Authorization %q, want the identity token", s.path, s.serverless)
		}
	}
	if r[0].authorization != "Bearer "+admin || !strings.HasPrefix(r[1].authorization, "Basic ") {
		t.Errorf("Authorization is no longer the application's credential: %q, %q", r[0].authorization, r[1].authorization)
	}
	// Refused: the error names the request, never the token.
	refuse := func(on bool) { mu.Lock(); fail = on; mu.Unlock() }
	refuse(true)
	if _, err := run("bootstrap"); err == nil {
		t.Error("a 401 is not an error")
	}
	refuse(false)
	requests()

	t.Setenv(IdentityTokenEnv, "")
	if out, err := run("bootstrap"); err != nil {
		t.Fatalf("specsync bootstrap without an identity token: %v\n%s", err, out)
	}
	for _, s := range requests() {
		if s.serverless != "" {
			t.Errorf("%s: X-Serverless-Authorization %q sent with no identity token set", s.path, s.serverless)
		}
	}
}
