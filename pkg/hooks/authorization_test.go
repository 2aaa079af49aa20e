package hooks_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"
)

// A bearer hook reads Authorization as RFC 9110 has it: "bearer" in any
// case is the scheme, and two Authorization headers are refused (401)
// whichever holds the secret, never the first one taken.
func TestHookAuthorizationParsing(t *testing.T) {
	e := newHookEnv(t, registriesYAML(t, ""), 10*time.Millisecond, true)
	post := func(auth ...string) answer {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.url+"/hooks/team", bytes.NewReader(push("apps/redis", "latest")))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range auth {
			req.Header.Add("Authorization", a)
		}
		return e.do(req)
	}
	for _, a := range []string{"bearer " + bearerSecret, "BEARER " + bearerSecret, "Bearer  " + bearerSecret} {
		post(a).accepted(t)
	}
	post("Bearer "+bearerSecret, "Bearer wrong-0123456789abcdef").error(t, http.StatusUnauthorized, "Unauthorized", "2 Authorization headers")
	post("Bearer wrong-0123456789abcdef", "Bearer "+bearerSecret).error(t, http.StatusUnauthorized, "Unauthorized", "2 Authorization headers")
	post("Basic "+bearerSecret).error(t, http.StatusUnauthorized, "Unauthorized", "needs an Authorization: Bearer header")
}
