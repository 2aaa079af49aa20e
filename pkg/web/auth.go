package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/specsync/specsync/pkg/failure"
)

// EqualSecret compares secrets in constant time (hashing first, so the
// length of the secret does not leak either).
func EqualSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
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
		token, ok, err := adminCredential(r)
		if err != nil {
			WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
			return
		}
		if !ok || !verify(r, token) {
			w.Header().Add("WWW-Authenticate", `Basic realm="specsync-admin", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="specsync-admin"`)
			WriteError(w, http.StatusUnauthorized, "Unauthorized", "the admin credential is required (bearer token, or as the basic-auth password)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// IsAdmin says a request carries a credential AdminAuth would let
// through: for a decision taken before the handler runs (a bootstrap's
// trace is kept when the admin asked for it, and only then).
func IsAdmin(r *http.Request, verify func(r *http.Request, token string) bool) bool {
	token, ok, err := adminCredential(r)
	return err == nil && ok && verify(r, token)
}

// adminCredential is the admin credential a request presents, as a
// bearer token or a basic-auth password; ok is false when it presents
// none.
func adminCredential(r *http.Request) (token string, ok bool, err error) {
	scheme, cred, err := Authorization(r)
	if err != nil {
		return "", false, err
	}
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		token, ok = cred, true
	case strings.EqualFold(scheme, "Basic"):
		_, token, ok = BasicCredentials(cred)
	}
	return token, ok && token != "", nil
}

// Authorization parses a request's Authorization header as RFC 9110
// §11.4 has it: an auth scheme (compared case-insensitively by the
// caller) and, after one or more spaces, its credentials. No header is
// ("", "", nil). More than one is an error, never the first one taken
// silently: a proxy that adds its own, or a client that sends two, gets
// told rather than authenticated as whichever came first.
func Authorization(r *http.Request) (scheme, credentials string, err error) {
	vs := r.Header.Values("Authorization")
	switch len(vs) {
	case 0:
		return "", "", nil
	case 1:
	default:
		return "", "", failure.New(failure.Invalid, "the request has %d Authorization headers: send one", len(vs))
	}
	scheme, credentials, _ = strings.Cut(strings.TrimSpace(vs[0]), " ")
	return scheme, strings.TrimLeft(credentials, " "), nil
}

// BasicCredentials decodes the credentials of HTTP basic auth
// (base64 of user:password).
func BasicCredentials(cred string) (user, password string, ok bool) {
	raw, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		return "", "", false
	}
	user, password, ok = strings.Cut(string(raw), ":")
	return user, password, ok
}

// StaticToken accepts exactly one token.
func StaticToken(want string) func(*http.Request, string) bool {
	match := MatchPlain(want)
	return func(_ *http.Request, got string) bool { return match(got) }
}

// RequestIdentityHeader is OSB's request identity: a platform's id of
// one request, for tracing it through both sides' logs.
const RequestIdentityHeader = "X-Broker-API-Request-Identity"

// RequestIdentity echoes X-Broker-API-Request-Identity, as OSB asks of
// every response. It wraps everything else of the catalog function (the
// body limit too), so that a refused request (401, 412, 413) can be
// traced like any other.
func RequestIdentity(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		EchoRequestIdentity(w, r)
		next.ServeHTTP(w, r)
	})
}

// EchoRequestIdentity sets the answer's request identity to the
// request's, when it has one (the local stack's 431 uses it too).
func EchoRequestIdentity(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get(RequestIdentityHeader); id != "" {
		w.Header().Set(RequestIdentityHeader, id)
	}
}
