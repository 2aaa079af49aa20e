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

// statusWriter remembers the status a handler wrote, for its log line.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logWrite runs h, an instance or binding write (operation: provision,
// update, deprovision, bind, unbind), and logs one structured line for
// it whatever its outcome: the ids, the status, the platform's request
// identity and, decoded, its originating identity (OSB's user who asked;
// an audit trail of who changed what). Nothing else of the request is
// logged: not its body (parameters may hold secrets), not its
// credentials.
func (b *Broker) logWrite(w http.ResponseWriter, r *http.Request, operation string, h http.HandlerFunc) {
	sw := &statusWriter{ResponseWriter: w}
	h(sw, r)
	attrs := []any{"operation", operation, "instance", r.PathValue("id")}
	if id := r.PathValue("binding_id"); id != "" {
		attrs = append(attrs, "binding", id)
	}
	attrs = append(attrs, "status", sw.status)
	if id := r.Header.Get("X-Broker-API-Request-Identity"); id != "" {
		attrs = append(attrs, "request_identity", id)
	}
	if oi := r.Header.Get("X-Broker-API-Originating-Identity"); oi != "" {
		attrs = append(attrs, originatingIdentity(oi))
	}
	b.cfg.Logger.Info("osb write", attrs...)
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
