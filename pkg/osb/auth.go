package osb

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/logging"
)

// equal compares secrets in constant time (hashing first, so the length
// of the secret does not leak either).
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// BasicAuth guards the broker API with one credential of the platform's
// (an empty password accepts nothing): a single view of every service.
func BasicAuth(username, password string, next http.Handler) http.Handler {
	return ViewAuth([]*View{{Name: DefaultViewName, Username: username, Password: MatchPlain(password)}}, next)
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
		scheme, cred, err := Authorization(r)
		if err != nil {
			WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
			return
		}
		token, ok := "", false
		switch {
		case strings.EqualFold(scheme, "Bearer"):
			token, ok = cred, true
		case strings.EqualFold(scheme, "Basic"):
			_, token, ok = basicCredentials(cred)
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

// basicCredentials decodes the credentials of HTTP basic auth
// (base64 of user:password).
func basicCredentials(cred string) (user, password string, ok bool) {
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

var apiVersion = regexp.MustCompile(`^2\.\d+$`)

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

// requestIdentity is the log attribute of a request identity: the value
// when it is at most maxIdentityBytes, else only its size (a 60 kB
// header once made a 60 kB line of every write's log).
func requestIdentity(id string) slog.Attr {
	const key = "request_identity"
	if len(id) > maxIdentityBytes {
		return slog.Group(key, "error", "over 4 KiB, not logged", "bytes", len(id))
	}
	return slog.String(key, id)
}

// Version requires X-Broker-API-Version 2.x (412 otherwise). Any minor
// version is accepted: OSB's minor versions only add optional fields,
// which a platform of an older one ignores in answers and never needs to
// send, so nothing this broker serves depends on a newer one.
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

// logWrite runs h, an instance or binding write (operation: provision,
// update, deprovision, bind, unbind), and logs one structured line for
// it whatever its outcome: the ids, the status, the view whose
// credential asked (views.go), the platform's request
// identity and, decoded, its originating identity (OSB's user who asked;
// an audit trail of who changed what). Nothing else of the request is
// logged: not its body (parameters may hold secrets), not its
// credentials.
func (b *Broker) logWrite(w http.ResponseWriter, r *http.Request, operation string, h http.HandlerFunc) {
	sw := &logging.StatusWriter{ResponseWriter: w}
	h(sw, r)
	attrs := []any{"operation", operation, "instance", r.PathValue("id")}
	if id := r.PathValue("binding_id"); id != "" {
		attrs = append(attrs, "binding", id)
	}
	attrs = append(attrs, "status", sw.Status)
	if v := viewOf(r); v != nil {
		attrs = append(attrs, "view", v.Name) // which platform's credential
	}
	if id := r.Header.Get(RequestIdentityHeader); id != "" {
		attrs = append(attrs, requestIdentity(id))
	}
	if oi := r.Header.Get("X-Broker-API-Originating-Identity"); oi != "" {
		attrs = append(attrs, originatingIdentity(oi))
	}
	b.cfg.Logger.InfoContext(r.Context(), "osb write", attrs...)
}

// identityPlatform is what OSB's profile names platforms with
// (cloudfoundry, kubernetes, ...).
var identityPlatform = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// maxIdentityBytes bounds the decoded identity a log line repeats.
const maxIdentityBytes = 4 << 10

// originatingIdentity decodes X-Broker-API-Originating-Identity, OSB's
// "Platform value" where value is the base64 of a JSON object (Cloud
// Foundry's {"user_id"}, Kubernetes' {"username", "uid", "groups",
// "extra"}), into a log attribute: the platform and the decoded object.
// It identifies a user and holds no credential. A header that is not of
// that form is logged as such, without its raw text: what a malformed
// header holds is unknown.
func originatingIdentity(h string) slog.Attr {
	const key = "originating_identity"
	platform, value, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !identityPlatform.MatchString(platform) {
		return slog.Group(key, "error", "not \"platform value\" with a platform name")
	}
	value = strings.TrimSpace(value)
	if base64.StdEncoding.DecodedLen(len(value)) > maxIdentityBytes {
		return slog.Group(key, "platform", platform, "error", "value is over 4 KiB")
	}
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(value)
	}
	var v map[string]any
	if err != nil || json.Unmarshal(raw, &v) != nil || v == nil {
		return slog.Group(key, "platform", platform, "error", "value is not the base64 of a JSON object")
	}
	return slog.Group(key, "platform", platform, "value", v)
}
