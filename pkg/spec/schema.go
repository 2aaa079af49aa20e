package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SchemaDraft is the JSON Schema draft OSB platforms MUST read (draft-04),
// as the $schema key names it. The catalog writes it into every parameters
// schema it serves.
const SchemaDraft = "http://json-schema.org/draft-04/schema#"

// MaxSchemaBytes is OSB's limit on one parameters schema ("MUST NOT be
// larger than 64kB"), read as 64,000 bytes, the stricter reading, and
// measured as the catalog serves the schema.
const MaxSchemaBytes = 64_000

// draft04 are the spellings of SchemaDraft a document may use.
var draft04 = map[string]bool{
	SchemaDraft:                              true,
	"http://json-schema.org/draft-04/schema": true,
}

// IsDraft04 reports whether a $schema value names draft-04.
func IsDraft04(schema string) bool { return draft04[schema] }

// WithDraft returns doc with $schema set to SchemaDraft: doc itself when it
// already says draft-04, else a shallow copy (doc is never modified).
func WithDraft(doc map[string]any) map[string]any {
	if s, ok := doc["$schema"].(string); ok && IsDraft04(s) {
		return doc
	}
	out := maps.Clone(doc)
	if out == nil {
		out = map[string]any{}
	}
	out["$schema"] = SchemaDraft
	return out
}

// CheckSchema validates a parameters schema given whole as OSB platforms
// will read it, and returns why it is not one ("" when it is):
//
//   - its $schema, if it has one, names draft-04: a platform reads the
//     schema as draft-04 whatever it says, so a schema written for
//     another draft would mean something else there;
//   - it describes an object (parameters are a JSON object): a type, if
//     given, is "object";
//   - it compiles as draft-04, which checks it against the draft-04
//     meta-schema (every keyword of the right shape) and compiles its
//     patterns and references. No reference may leave the document: no
//     loader is configured, so a $ref to a URL or a file is an error and
//     nothing is fetched or read;
//   - served (with its $schema), it fits OSB's 64 kB.
//
// These are the checks the parameters a spec lists get (known types,
// patterns that compile, sizes), made for a schema as a whole.
func CheckSchema(doc map[string]any) string {
	if v, ok := doc["$schema"]; ok {
		s, _ := v.(string)
		if !IsDraft04(s) {
			return fmt.Sprintf("$schema %v is not draft-04 (%s), the draft OSB platforms read", jsonText(v), SchemaDraft)
		}
	}
	if t, ok := doc["type"]; ok && t != "object" {
		return fmt.Sprintf("type is %s: parameters are a JSON object, so the schema's type must be \"object\"", jsonText(t))
	}
	served, err := json.Marshal(WithDraft(doc))
	if err != nil {
		return fmt.Sprintf("is not representable as JSON: %v", err)
	}
	if len(served) > MaxSchemaBytes {
		return fmt.Sprintf("is %d bytes served, OSB allows at most %d", len(served), MaxSchemaBytes)
	}
	// The compiler wants the JSON values its own decoder makes
	// (json.Number for numbers).
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(served))
	if err != nil {
		return fmt.Sprintf("does not decode: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const url = "urn:specsync:parameters-schema"
	if err := c.AddResource(url, value); err != nil {
		return fmt.Sprintf("does not compile as JSON Schema draft-04: %v", err)
	}
	if _, err := c.Compile(url); err != nil {
		return "does not compile as JSON Schema draft-04: " + oneLine(err.Error())
	}
	return ""
}

// jsonText renders a decoded JSON value for a message.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// oneLine folds the compiler's multi-line messages into one line, as every
// problem of a spec is reported.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
	}
	return strings.Join(lines, "; ")
}
