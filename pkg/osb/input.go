package osb

// The input contract of both functions' HTTP surfaces, checked at the
// edge before anything reaches the store: ids (instance, binding,
// operation, service, plan, registry), query strings, and the JSON
// objects OSB lets a platform send (context, parameters). A request that
// breaks it is a 400 naming the field; nothing of the store's own text
// is ever part of the answer (WriteFailure).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// Limits of the JSON objects a request carries (context, parameters).
const (
	// MaxObjectDepth bounds how deeply a context or parameters object may
	// nest (objects and arrays; the object itself is level 1).
	MaxObjectDepth = 32
	// MaxContextBytes bounds a context as stored (canonical JSON): far
	// below what one Firestore document holds, whatever the body limit.
	MaxContextBytes = 32 << 10
)

// CheckID checks a non-empty id that names a document (what: the field,
// "instance id", "service_id", ...): 1-255 of the RFC 3986 unreserved
// characters, and none of Firestore's reserved forms (".", "..",
// "__x__"). Its error is a failure.Invalid naming the field, quoting at
// most the first 64 bytes of the value.
func CheckID(what, id string) error {
	switch {
	case !resourceID.MatchString(id):
		return failure.New(failure.Invalid, "%s %s must be 1-255 letters, digits or . _ ~ -", what, quote(id))
	case id == "." || id == "..":
		return failure.New(failure.Invalid, "%s %s is not an id: . and .. name no document", what, quote(id))
	case len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"):
		return failure.New(failure.Invalid, "%s %s is not an id: names that begin and end with __ are reserved", what, quote(id))
	}
	return nil
}

// CheckRegistryName checks a registry name a request filters by.
func CheckRegistryName(what, name string) error {
	if !api.IsRegistryName(name) {
		return failure.New(failure.Invalid, "%s %s is not a registry name (a DNS label: lower-case letters, digits and -)", what, quote(name))
	}
	return nil
}

// quote is %q of at most the first 64 bytes of s: enough to recognize a
// value, never a whole header's worth of it.
func quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q... (%d bytes)", s[:64], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// checkIDs writes a 400 for the first of the named ids (pairs of field
// and value; an empty value is not checked: required is the caller's
// rule) that breaks CheckID.
func checkIDs(w http.ResponseWriter, pairs ...string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			continue
		}
		if err := CheckID(pairs[i], pairs[i+1]); err != nil {
			WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
			return false
		}
	}
	return true
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
			return fmt.Errorf("query parameter %s is given %d times: give it once", quote(k), len(vs))
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

// jsonObject decodes a field that must be a JSON object (OSB's context,
// parameters) within the contract's limits: at most MaxObjectDepth
// levels, numbers kept as written. An absent or null field is nil.
func jsonObject(raw json.RawMessage, field string) (map[string]any, error) {
	if !present(raw) {
		return nil, nil
	}
	if d := depth(raw); d > MaxObjectDepth {
		return nil, failure.New(failure.Invalid, "%s nests %d levels deep; at most %d are allowed", field, d, MaxObjectDepth)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, failure.New(failure.Invalid, "%s must be a JSON object", field)
	}
	return m, nil
}

// depth is how deeply raw (valid JSON: the body decoded) nests objects
// and arrays; strings are skipped with their escapes.
func depth(raw []byte) int {
	d, most, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			most = max(most, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return most
}

// readAll reads a body up to limit for DecodeBody.
func readAll(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}
