package web

// The input contract shared by every HTTP surface, checked at the edge
// before anything reaches the store: ids (instance, binding, operation,
// service, plan, registry), query strings, and a body that could not be
// read. A request that breaks it is a 400 naming the field; nothing of
// the store's own text is ever part of the answer (WriteFailure). The
// broker's own objects (context, parameters) are pkg/osb's.

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
)

// resourceID is what an id may be: OSB recommends the RFC 3986
// unreserved characters, and ids name Firestore documents. Being ASCII,
// it is valid UTF-8 and holds no slash.
var resourceID = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,255}$`)

// CheckID checks a non-empty id that names a document (what: the field,
// "instance id", "service_id", ...): 1-255 of the RFC 3986 unreserved
// characters, and none of Firestore's reserved forms (".", "..",
// "__x__"). Its error is a failure.Invalid naming the field, quoting at
// most the first 64 bytes of the value.
func CheckID(what, id string) error {
	switch {
	case !resourceID.MatchString(id):
		return failure.New(failure.Invalid, "%s %s must be 1-255 letters, digits or . _ ~ -", what, Quote(id))
	case id == "." || id == "..":
		return failure.New(failure.Invalid, "%s %s is not an id: . and .. name no document", what, Quote(id))
	case len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"):
		return failure.New(failure.Invalid, "%s %s is not an id: names that begin and end with __ are reserved", what, Quote(id))
	}
	return nil
}

// CheckRegistryName checks a registry name a request filters by.
func CheckRegistryName(what, name string) error {
	if !api.IsRegistryName(name) {
		return failure.New(failure.Invalid, "%s %s is not a registry name (a DNS label: lower-case letters, digits and -)", what, Quote(name))
	}
	return nil
}

// Quote is %q of at most the first 64 bytes of s: enough to recognize a
// value, never a whole header's worth of it.
func Quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q... (%d bytes)", s[:64], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// checkQuery refuses a query string that does not parse, or that names
// a parameter more than once: which of two values counts would be the
// server's guess (the first? the last?), and a client that sends two
// meant something neither guess knows.
func checkQuery(raw string) error {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return errors.New("the query string is malformed (parameters are name=value pairs joined by &, percent-encoded)")
	}
	for k, vs := range q {
		if len(vs) > 1 {
			return fmt.Errorf("query parameter %s is given %d times: give it once", Quote(k), len(vs))
		}
	}
	return nil
}

// ReadBodyError answers a body that could not be read: 413 past the
// limit, 408 when the client stopped sending before it was whole (the
// server's read deadline), 400 otherwise. It never takes an unread body
// for an empty one.
func ReadBodyError(w http.ResponseWriter, err error, limit int64) {
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooBig):
		tooLarge(w, limit)
	case errors.As(err, &ne) && ne.Timeout():
		w.Header().Set("Connection", "close")
		WriteError(w, http.StatusRequestTimeout, "RequestTimeout", "the request body did not arrive in time")
	default:
		WriteError(w, http.StatusBadRequest, "BadRequest", "the request body could not be read (cut off, or a malformed chunked encoding)")
	}
}
