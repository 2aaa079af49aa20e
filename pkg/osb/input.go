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
