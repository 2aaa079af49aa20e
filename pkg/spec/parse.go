package spec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// MaxSpecBytes bounds one spec document. Firestore documents are limited to
// 1 MiB; a spec is a few kilobytes, so anything near the limit is a mistake.
const MaxSpecBytes = 256 << 10

// Parse decodes one spec from YAML, JSON, or the base64 label form, and
// validates it. It never panics on any input; every failure is an error
// naming what was wrong.
func Parse(data []byte) (*Spec, error) {
	raw, err := decodeDocument(data)
	if err != nil {
		return nil, err
	}
	return parseJSON(raw)
}

// ParseList decodes an index document: a YAML or JSON list of specs (or a
// mapping with a "specs" list). Each entry is parsed on its own so one bad
// entry does not hide the good ones: the result has one item per entry.
func ParseList(data []byte) ([]ListItem, error) {
	raw, err := decodeDocument(data)
	if err != nil {
		return nil, err
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		var wrapped struct {
			Specs []json.RawMessage `json:"specs"`
		}
		if err2 := json.Unmarshal(raw, &wrapped); err2 != nil || wrapped.Specs == nil {
			return nil, errors.New("index document: want a list of specs or a mapping with a 'specs' list")
		}
		entries = wrapped.Specs
	}
	items := make([]ListItem, len(entries))
	for i, e := range entries {
		items[i].Index = i
		var probe struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(e, &probe) // best effort: a name for the error report
		items[i].Name = probe.Name
		items[i].Spec, items[i].Err = parseJSON(e)
	}
	return items, nil
}

// ListItem is one entry of an index document.
type ListItem struct {
	Index int
	Name  string // the entry's name if it had one, even when Err is set
	Spec  *Spec
	Err   error
}

// decodeDocument turns YAML, JSON or base64 of either into JSON bytes.
func decodeDocument(data []byte) ([]byte, error) {
	if len(data) > MaxSpecBytes {
		return nil, fmt.Errorf("spec document is %d bytes, more than the %d allowed", len(data), MaxSpecBytes)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("spec document is empty")
	}
	if decoded, ok := decodeBase64(trimmed); ok {
		trimmed = bytes.TrimSpace(decoded)
		if len(trimmed) == 0 {
			return nil, errors.New("spec document is empty after base64 decoding")
		}
	}
	raw, err := yaml.YAMLToJSON(trimmed)
	if err != nil {
		return nil, fmt.Errorf("spec document is neither YAML nor JSON: %w", err)
	}
	return raw, nil
}

// decodeBase64 accepts the label form: standard base64, possibly wrapped
// over several lines. A YAML or JSON document always contains a character
// outside the base64 alphabet (':' or '{'), so there is no ambiguity.
func decodeBase64(b []byte) ([]byte, bool) {
	compact := strings.Join(strings.Fields(string(b)), "")
	for _, c := range compact {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return nil, false
		}
	}
	out, err := base64.StdEncoding.DecodeString(compact)
	if err != nil {
		out, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(compact, "="))
		if err != nil {
			return nil, false
		}
	}
	return out, true
}

func parseJSON(raw []byte) (*Spec, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, errors.New("spec document is empty")
	}
	var s Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				return nil, fmt.Errorf("spec document: want a mapping, got %s", te.Value)
			}
			return nil, &ValidationError{Problems: []Problem{{Field: field, Reason: fmt.Sprintf("want %s, got %s", jsonKind(te.Type.Kind().String()), te.Value)}}}
		}
		return nil, fmt.Errorf("spec document: %w", err)
	}
	if err := Validate(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "slice", "array":
		return "a list"
	case "map", "struct":
		return "a mapping"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "ptr":
		return "a value"
	default:
		return "a number"
	}
}
