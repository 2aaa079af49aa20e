package osb

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/web"
)

// BasicAuth guards the broker API with one credential of the platform's
// (an empty password accepts nothing): a single view of every service.
func BasicAuth(username, password string, next http.Handler) http.Handler {
	return ViewAuth([]*View{{Name: DefaultViewName, Username: username, Password: web.MatchPlain(password)}}, next)
}

var apiVersion = regexp.MustCompile(`^2\.\d+$`)

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
			web.WriteError(w, http.StatusPreconditionFailed, "PreconditionFailed", "X-Broker-API-Version must be 2.x (this broker implements 2.17), got %q", v)
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
	attrs := []any{"operation", operation, "instance", loggedID(r.PathValue("id"))}
	if id := r.PathValue("binding_id"); id != "" {
		attrs = append(attrs, "binding", loggedID(id))
	}
	attrs = append(attrs, "status", sw.Status)
	if v := viewOf(r); v != nil {
		attrs = append(attrs, "view", v.Name) // which platform's credential
	}
	if id := r.Header.Get(web.RequestIdentityHeader); id != "" {
		attrs = append(attrs, requestIdentity(id))
	}
	if oi := r.Header.Get("X-Broker-API-Originating-Identity"); oi != "" {
		attrs = append(attrs, originatingIdentity(oi))
	}
	b.cfg.Logger.InfoContext(r.Context(), "osb write", attrs...)
}

// loggedID is a path id as a log line carries it: whole when it could be
// an id (web.CheckID allows 255 bytes), or else a refused request's
// first 64 bytes and its size, as a refusal quotes it (web.Quote): the
// line of a request refused for its id stays as small as any other.
func loggedID(id string) string {
	if len(id) <= 255 {
		return id
	}
	return web.Quote(id)
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

// passwordCheck is the broker's password check: VerifyPassword, or else
// the plain Password.
func (c Config) passwordCheck() func(string) bool {
	if c.VerifyPassword != nil {
		return c.VerifyPassword
	}
	return web.MatchPlain(c.Password)
}
