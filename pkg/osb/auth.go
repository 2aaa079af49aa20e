package osb

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"regexp"
	"strings"
)

// equal compares secrets in constant time (hashing first, so the length
// of the secret does not leak either).
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// BasicAuth guards the broker API with the platform's credentials (an
// empty password accepts nothing).
func BasicAuth(username, password string, next http.Handler) http.Handler {
	return BasicAuthFunc(username, MatchPlain(password), next)
}

// AdminAuth is the one rule of every admin endpoint of both functions
// (POST /bootstrap and its operation, /registries, /admin/*, /status): the
// admin credential as a bearer token (the CLI, curl, Cloud Scheduler's
// OIDC token), or as the password of HTTP basic auth with any user name (a
// browser's own login prompt, so the status page needs no script). verify
// decides whether a credential is acceptable: locally a shared admin
// token; in Google Cloud the same hook also accepts the identity token
// Cloud Scheduler sends. A 401 carries both challenges.
func AdminAuth(verify func(r *http.Request, token string) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			_, token, ok = r.BasicAuth()
		}
		if !ok || token == "" || !verify(r, token) {
			w.Header().Add("WWW-Authenticate", `Basic realm="specsync-admin", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="specsync-admin"`)
			WriteError(w, http.StatusUnauthorized, "Unauthorized", "the admin credential is required (bearer token, or as the basic-auth password)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// StaticToken accepts exactly one token.
func StaticToken(want string) func(*http.Request, string) bool {
	match := MatchPlain(want)
	return func(_ *http.Request, got string) bool { return match(got) }
}

var apiVersion = regexp.MustCompile(`^2\.\d+$`)

// RequestIdentity echoes X-Broker-API-Request-Identity, as OSB asks of
// every response. It wraps the broker's other guards so that a refused
// request (401, 412) can be traced like any other.
func RequestIdentity(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("X-Broker-API-Request-Identity"); id != "" {
			w.Header().Set("X-Broker-API-Request-Identity", id)
		}
		next.ServeHTTP(w, r)
	})
}

// Version requires X-Broker-API-Version 2.x (412 otherwise).
func Version(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get("X-Broker-API-Version")
		if !apiVersion.MatchString(v) {
			WriteError(w, http.StatusPreconditionFailed, "PreconditionFailed", "X-Broker-API-Version must be 2.x (this broker implements 2.17), got %q", v)
			return
		}
		next.ServeHTTP(w, r)
	})
}
