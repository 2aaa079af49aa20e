package catalog

import "github.com/specsync/specsync/pkg/spec"

// SchemaDraft is the JSON Schema version of every schema served. OSB
// platforms MUST support draft 4 and the $schema key MUST be present.
const SchemaDraft = spec.SchemaDraft

// ParametersSchema is the JSON Schema (draft 4) for a set of spec
// parameters: an object with one property per parameter. It always
// returns a schema, even for no parameters; Render leaves empty ones out
// of the catalog, but a handler validating a request may still want one.
//
// Decisions, and why:
//
//   - additionalProperties is false. A spec declares the complete set of
//     parameters its service reads; a misspelt key that is silently
//     accepted gives the user an instance without the setting they asked
//     for, which is worse than a rejected request. Form-building UIs only
//     look at properties, so strictness costs them nothing.
//   - required lists required parameters in declaration order (stable and
//     the author's order), and is omitted when empty: draft 4 requires
//     the array to have at least one element.
//   - The type comes from spec.ParameterTypes; an unknown type (which
//     validation rejects) gets no type keyword rather than a guess.
//   - Secret parameters (display_type password) get "format": "password",
//     the OpenAPI format registry's hint to obscure input, used by
//     schema-driven form generators; draft 4 lets validators ignore formats
//     they do not know, so the schema stays valid. A secret never carries
//     its default, even if one slipped past validation: the catalog is
//     public to every platform user.
//   - display_type and display_group are otherwise dropped. No JSON Schema
//     consumer reads them (OpenShift's console read APB form hints from a
//     separate form definition, not from the schema), and an unknown
//     keyword nobody interprets is noise in every platform's cache.
//   - The update schema (update true) holds only updatable parameters, no
//     required list (an update sends only what changes) and no defaults:
//     OSB keeps a parameter an update omits, so a form pre-filled with the
//     provision-time default would silently revert the user's earlier
//     choice.
//   - pattern is passed as written. Spec validation compiles it as a Go
//     regular expression; JSON Schema says ECMA 262. The common subset
//     (classes, anchors, quantifiers, alternation) means the same in both.
func ParametersSchema(params []spec.Parameter, update bool) map[string]any {
	properties := make(map[string]any, len(params))
	var required []string
	for _, p := range params {
		if update && !p.Updatable {
			continue
		}
		properties[p.Name] = parameterSchema(p, update)
		if p.Required && !update {
			required = append(required, p.Name)
		}
	}
	s := map[string]any{
		"$schema":              SchemaDraft,
		"type":                 "object",
		"properties":           properties,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func parameterSchema(p spec.Parameter, update bool) map[string]any {
	s := make(map[string]any, 4)
	if t, ok := spec.ParameterTypes[p.Type]; ok {
		s["type"] = t
	}
	if p.Title != "" {
		s["title"] = p.Title
	}
	if p.Description != "" {
		s["description"] = p.Description
	}
	if p.Default != nil && !p.Secret() && !update {
		s["default"] = p.Default
	}
	if len(p.Enum) > 0 {
		s["enum"] = p.Enum
	}
	if p.Pattern != "" {
		s["pattern"] = p.Pattern
	}
	if p.MinLength != nil {
		s["minLength"] = *p.MinLength
	}
	if p.MaxLength != nil {
		s["maxLength"] = *p.MaxLength
	}
	if p.Minimum != nil {
		s["minimum"] = *p.Minimum
	}
	if p.Maximum != nil {
		s["maximum"] = *p.Maximum
	}
	if p.Secret() {
		s["format"] = "password"
	}
	return s
}
