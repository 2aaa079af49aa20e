package spec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	goyaml "go.yaml.in/yaml/v2"
)

// MaxSpecBytes bounds one spec document. Firestore documents are limited to
// 1 MiB; a spec is a few kilobytes, so anything near the limit is a mistake.
const MaxSpecBytes = 256 << 10

// MaxIndexBytes bounds an index document (ParseList): many specs in one
// file. Each entry is still bounded by MaxSpecBytes.
const MaxIndexBytes = 16 << 20

// expansion is how much bigger than its source a YAML document may become
// once its aliases are expanded (see converter).
const expansion = 4

// Parse decodes one spec from YAML, JSON, or the base64 label form, and
// validates it. It never panics on any input; every failure is an error
// naming what was wrong.
func Parse(data []byte) (*Spec, error) {
	raw, err := decodeDocument(data, MaxSpecBytes)
	if err != nil {
		return nil, err
	}
	return parseJSON(raw)
}

// ParseList decodes an index document: a YAML or JSON list of specs (or a
// mapping with a "specs" list). Each entry is parsed on its own so one bad
// entry does not hide the good ones: the result has one item per entry.
func ParseList(data []byte) ([]ListItem, error) {
	raw, err := decodeDocument(data, MaxIndexBytes)
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
		if len(e) > MaxSpecBytes {
			items[i].Err = fmt.Errorf("spec is %d bytes of JSON, more than the %d allowed", len(e), MaxSpecBytes)
			continue
		}
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
func decodeDocument(data []byte, limit int) ([]byte, error) {
	if len(data) > limit {
		return nil, fmt.Errorf("spec document is %d bytes, more than the %d allowed", len(data), limit)
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
	// JSON is read as JSON: YAML 1.1 is not quite a superset of it (raw
	// DEL and C1 control characters inside strings, for one, are valid
	// JSON but not valid YAML), and json.Marshal writes such characters.
	if (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid(trimmed) {
		return trimmed, nil
	}
	return yamlToJSON(trimmed, expansion*limit)
}

// yamlToJSON converts a YAML document to JSON, refusing one that grows
// past budget bytes once its aliases are expanded. Mapping keys become
// strings the way sigs.k8s.io/yaml makes them.
func yamlToJSON(doc []byte, budget int) ([]byte, error) {
	var obj any
	if err := goyaml.Unmarshal(doc, &obj); err != nil {
		return nil, fmt.Errorf("spec document is neither YAML nor JSON: %w", err)
	}
	c := converter{budget: budget}
	v, err := c.convert(obj)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("spec document is neither YAML nor JSON: %w", err)
	}
	return raw, nil
}

// converter turns decoded YAML into values encoding/json can write, and
// keeps count of the size of what it built: aliases are expanded here, so
// a few kilobytes of anchors and aliases could otherwise stand for
// gigabytes (the "billion laughs"; the YAML decoder itself stops only the
// exponential case).
type converter struct {
	budget, size int
}

func (c *converter) convert(v any) (any, error) {
	if c.size > c.budget {
		return nil, fmt.Errorf("spec document expands to more than %d bytes once its YAML aliases are expanded", c.budget)
	}
	switch t := v.(type) {
	case map[any]any:
		c.size += 2
		out := make(map[string]any, len(t))
		for k, e := range t {
			key, err := keyString(k)
			if err != nil {
				return nil, err
			}
			// 1 and "1" are two YAML keys but one JSON key; which value
			// won would depend on map order.
			if _, dup := out[key]; dup {
				return nil, fmt.Errorf("spec document: the mapping key %q appears twice (as different YAML types)", key)
			}
			c.size += len(key) + 3
			if out[key], err = c.convert(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		c.size += 2
		out := make([]any, len(t))
		for i, e := range t {
			var err error
			c.size++
			if out[i], err = c.convert(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case string:
		c.size += len(t) + 2
	default:
		c.size++
	}
	return v, nil
}

// keyString renders a YAML mapping key as a JSON object key.
func keyString(k any) (string, error) {
	switch t := k.(type) {
	case string:
		return t, nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case uint64:
		return strconv.FormatUint(t, 10), nil
	case float64:
		switch s := strconv.FormatFloat(t, 'g', -1, 64); s {
		case "+Inf":
			return ".inf", nil
		case "-Inf":
			return "-.inf", nil
		case "NaN":
			return ".nan", nil
		default:
			return s, nil
		}
	case bool:
		return strconv.FormatBool(t), nil
	case nil:
		return "", errors.New("spec document: a mapping key is null")
	default:
		return "", fmt.Errorf("spec document: a mapping key is a %s, not a scalar", kindName(k))
	}
}

// kindName names a decoded YAML value for an error message.
func kindName(v any) string {
	switch v.(type) {
	case map[any]any:
		return "mapping"
	case []any:
		return "list"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// decodeBase64 accepts the label form: standard base64, possibly wrapped
// over several lines, of a UTF-8 text. A YAML or JSON spec always contains
// a character outside the base64 alphabet (':' or '{'), so there is no
// ambiguity for a spec; a scalar document that happens to be made of
// base64 characters ("1234", "true") decodes to binary, not to text, and
// is read as it stands.
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
	if !utf8.Valid(out) {
		return nil, false
	}
	return out, true
}

func parseJSON(raw []byte) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("spec document: %w", err)
	}
	var doc map[string]any
	switch t := tree.(type) {
	case nil:
		return nil, errors.New("spec document is empty")
	case map[string]any:
		doc = t
	default:
		return nil, fmt.Errorf("spec document: want a mapping, got %s", kindOf(tree))
	}
	// APB specs say `version: 1.0`, which YAML reads as a number. Keep the
	// number's text (as JSON writes it: 1.0 is 1) rather than refuse the
	// spec; the version is informative only.
	if n, ok := doc["version"].(json.Number); ok {
		if f, err := n.Float64(); err == nil {
			text, _ := json.Marshal(f)
			doc["version"] = string(text)
			if raw, err = json.Marshal(doc); err != nil {
				return nil, fmt.Errorf("spec document: %w", err)
			}
		}
	}
	problems := typeProblems(doc)
	for k := range doc {
		// Who signed is the verified signature's word, never the spec's:
		// a spec claiming it would forge its own provenance (encoding/json
		// matches keys case-insensitively, so any case is refused).
		if strings.EqualFold(k, "provenance") {
			problems = append(problems, Problem{Field: k, Reason: "is set by specsync from a verified signature, not by the spec"})
		}
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	var s Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		// typeProblems mirrors encoding/json; this is a safety net.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &ValidationError{Problems: []Problem{{Field: te.Field, Reason: fmt.Sprintf("want %s, got %s", te.Type, te.Value)}}}
		}
		return nil, fmt.Errorf("spec document: %w", err)
	}
	if err := Validate(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

// typeProblems reports every value of doc whose JSON kind does not fit the
// field it would fill, with the field path Validate uses ("plans[1].free"),
// in field order. encoding/json reports only the first such value, and
// without list indexes ("plans.free"), which does not say which plan.
func typeProblems(doc map[string]any) []Problem {
	var out []Problem
	checkType(doc, reflect.TypeFor[Spec](), "", &out)
	return out
}

func checkType(v any, t reflect.Type, path string, out *[]Problem) {
	if v == nil {
		return // null leaves the field as it is, whatever its type
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bad := func(want string) {
		*out = append(*out, Problem{Field: path, Reason: fmt.Sprintf("want %s, got %s", want, kindOf(v))})
	}
	switch t.Kind() {
	case reflect.Interface:
		checkNumbers(v, path, out)
	case reflect.String:
		switch v.(type) {
		case string:
		case bool:
			// Specs are YAML 1.1, as APB labels were: an unquoted y, n,
			// yes, no, on or off is a boolean there, which surprises
			// anyone naming a plan "on" or "y".
			*out = append(*out, Problem{Field: path, Reason: "want a string, got a boolean " +
				"(YAML 1.1 reads unquoted y, n, yes, no, on, off, true and false as booleans: quote the value)"})
		default:
			bad("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			bad("a boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			bad("an integer")
		} else if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			bad(fmt.Sprintf("an integer of at most %d bits", t.Bits()))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			bad("a non-negative integer")
		} else if _, err := strconv.ParseUint(n.String(), 10, t.Bits()); err != nil {
			bad(fmt.Sprintf("a non-negative integer of at most %d bits", t.Bits()))
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			bad("a number")
		} else if _, err := strconv.ParseFloat(n.String(), t.Bits()); err != nil {
			bad(fmt.Sprintf("a number within float%d range", t.Bits()))
		}
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			bad("a list")
			return
		}
		for i, e := range list {
			checkType(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			bad("a mapping")
			return
		}
		for _, k := range sortedKeys(m) {
			checkType(m[k], t.Elem(), joinPath(path, k), out)
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			bad("a mapping")
			return
		}
		// Match keys to fields the way encoding/json does: an exact match
		// first, else the first case-insensitive one; unknown keys are
		// ignored.
		names := make([]string, t.NumField())
		for i := range names {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch name {
			case "-":
				continue
			case "":
				name = f.Name
			}
			names[i] = name
		}
		byField := make([][]string, len(names))
		for _, k := range sortedKeys(m) {
			match := -1
			for i, name := range names {
				if name != "" && name == k {
					match = i
					break
				}
			}
			for i, name := range names {
				if match < 0 && name != "" && strings.EqualFold(name, k) {
					match = i
				}
			}
			if match >= 0 {
				byField[match] = append(byField[match], k)
			}
		}
		for i, keys := range byField {
			for _, k := range keys {
				checkType(m[k], t.Field(i).Type, joinPath(path, names[i]), out)
			}
		}
	}
}

// checkNumbers reports numbers a float64 cannot hold anywhere in a value
// decoded into an interface (metadata, defaults, enum values).
func checkNumbers(v any, path string, out *[]Problem) {
	switch t := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(t.String(), 64); err != nil {
			*out = append(*out, Problem{Field: path, Reason: fmt.Sprintf("want a number within float64 range, got %s", kindOf(v))})
		}
	case []any:
		for i, e := range t {
			checkNumbers(e, fmt.Sprintf("%s[%d]", path, i), out)
		}
	case map[string]any:
		for _, k := range sortedKeys(t) {
			checkNumbers(t[k], joinPath(path, k), out)
		}
	}
}

// kindOf names the JSON kind of a decoded value for an error message.
func kindOf(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "number " + t.String()
	case float64:
		return "number " + strconv.FormatFloat(t, 'g', -1, 64)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
