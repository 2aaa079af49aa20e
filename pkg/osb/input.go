package osb

// The broker's part of the input contract (ids and query strings are
// pkg/web's): the JSON objects OSB lets a platform send (context,
// parameters). A request that breaks it is a 400 naming the field;
// nothing of the store's own text is ever part of the answer
// (web.WriteFailure).

import (
	"bytes"
	"encoding/json"
	"net/http"
	"unicode"
	"unicode/utf8"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/web"
)

// Limits of the JSON objects a request carries (context, parameters).
const (
	// MaxObjectDepth bounds how deeply a context or parameters object may
	// nest (objects and arrays; the object itself is level 1).
	MaxObjectDepth = 32
	// MaxContextBytes bounds a context as stored (canonical JSON): far
	// below what one Firestore document holds, whatever the body limit.
	MaxContextBytes = 32 << 10
)

// checkIDs writes a 400 for the first of the named ids (pairs of field
// and value; an empty value is not checked: required is the caller's
// rule) that breaks web.CheckID.
func checkIDs(w http.ResponseWriter, pairs ...string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			continue
		}
		if err := web.CheckID(pairs[i], pairs[i+1]); err != nil {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
			return false
		}
	}
	return true
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

// Limits of the free-text fields OSB lets a request carry: enough for
// what each names (a GUID is 36 bytes, a version a semantic version, a
// route a URL), far below what a record or a log line should hold.
const (
	// MaxTextBytes bounds organization_guid, space_guid,
	// maintenance_info.version and app_guid (top-level or bind_resource's).
	MaxTextBytes = 255
	// MaxRouteBytes bounds bind_resource.route, a URL.
	MaxRouteBytes = 2048
)

// text is a free-text field of a request: its name, its value and its
// limit.
type text struct {
	field, value string
	limit        int
}

// checkText checks free-text fields (an empty value is not checked:
// required is the caller's rule): each valid UTF-8 within its limit
// without a control character, which no GUID, version or route holds and
// which a record or a log line should not. It writes a 400 naming the
// field for the first that breaks it.
func checkText(w http.ResponseWriter, fields ...text) bool {
	for _, f := range fields {
		if err := textError(f); err != nil {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
			return false
		}
	}
	return true
}

func textError(f text) error {
	switch {
	case len(f.value) > f.limit:
		return failure.New(failure.Invalid, "%s is %d bytes; at most %d are allowed", f.field, len(f.value), f.limit)
	case !utf8.ValidString(f.value):
		return failure.New(failure.Invalid, "%s %s is not valid UTF-8", f.field, web.Quote(f.value))
	}
	for i, r := range f.value {
		if unicode.IsControl(r) {
			return failure.New(failure.Invalid, "%s %s holds a control character (%U at byte %d)", f.field, web.Quote(f.value), r, i)
		}
	}
	return nil
}
