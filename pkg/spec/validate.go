package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// Problem is one validation failure: the field path and why.
type Problem struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// ValidationError lists every problem found in a spec, in document order.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Field + ": " + p.Reason
	}
	return "invalid spec: " + strings.Join(parts, "; ")
}

// MaxNameLength is the OSB recommendation for names and ids (255 chars).
const MaxNameLength = 255

var (
	// OSB: "alphanumeric characters, periods, and hyphens, with no spaces".
	osbName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*$`)
	// OSB ids travel in URLs; RFC 3986 unreserved characters only.
	osbID = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
	// Parameter names become JSON schema property names and form fields.
	paramName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)
)

// ParameterTypes are the APB parameter types specsync understands, mapped
// to their JSON schema type.
var ParameterTypes = map[string]string{
	"string":  "string",
	"enum":    "string",
	"int":     "integer",
	"integer": "integer",
	"number":  "number",
	"float":   "number",
	"bool":    "boolean",
	"boolean": "boolean",
	"object":  "object",
	"array":   "array",
}

var asyncValues = map[string]bool{"": true, "optional": true, "required": true, "unsupported": true}

// Validate checks a spec against the rules the OSB catalog imposes and
// returns a *ValidationError naming every problem found.
func Validate(s *Spec) error {
	var v validator
	if s == nil {
		v.add("", "no spec")
		return &ValidationError{Problems: v.problems}
	}
	v.name("name", s.Name)
	if s.ID != "" {
		v.id("id", s.ID)
	}
	if strings.TrimSpace(s.Description) == "" {
		v.add("description", "must not be empty")
	}
	if !asyncValues[s.Async] {
		v.add("async", fmt.Sprintf("%q is not one of optional, required, unsupported", s.Async))
	}
	for i, t := range s.Tags {
		if strings.TrimSpace(t) == "" {
			v.add(fmt.Sprintf("tags[%d]", i), "must not be empty")
		}
	}
	for i, p := range s.Platforms {
		if p.OS == "" || p.Architecture == "" {
			v.add(fmt.Sprintf("platforms[%d]", i), "needs both os and architecture")
		}
	}
	v.jsonValue("metadata", s.Metadata)
	if s.MaintenanceVersion != "" && !IsSemver(s.MaintenanceVersion) {
		v.add("maintenance_version", fmt.Sprintf("%q is not a semantic version MAJOR.MINOR.PATCH[-prerelease][+build]", s.MaintenanceVersion))
	}
	if len(s.Plans) == 0 {
		v.add("plans", "at least one plan is required")
	}
	planNames := map[string]int{}
	planIDs := map[string]int{}
	for i, p := range s.Plans {
		f := fmt.Sprintf("plans[%d]", i)
		v.name(f+".name", p.Name)
		if j, dup := planNames[p.Name]; dup && p.Name != "" {
			v.add(f+".name", fmt.Sprintf("%q is already the name of plans[%d]", p.Name, j))
		} else {
			planNames[p.Name] = i
		}
		if p.ID != "" {
			v.id(f+".id", p.ID)
			if j, dup := planIDs[p.ID]; dup {
				v.add(f+".id", fmt.Sprintf("%q is already the id of plans[%d]", p.ID, j))
			} else {
				planIDs[p.ID] = i
			}
		}
		if strings.TrimSpace(p.Description) == "" {
			v.add(f+".description", "must not be empty")
		}
		v.jsonValue(f+".metadata", p.Metadata)
		v.parameters(f+".parameters", p.Parameters)
		v.parameters(f+".bind_parameters", p.BindParameters)
		v.schemas(f, p)
		if p.PlanUpdateable != nil && !*p.PlanUpdateable && len(p.UpdatesTo) > 0 {
			v.add(f+".plan_updateable", fmt.Sprintf("is false, yet updates_to names plans to move to (%s): drop one of the two", strings.Join(p.UpdatesTo, ", ")))
		}
	}
	for i, p := range s.Plans {
		for j, target := range p.UpdatesTo {
			if _, ok := planNames[target]; !ok || target == "" {
				v.add(fmt.Sprintf("plans[%d].updates_to[%d]", i, j), fmt.Sprintf("%q is not a plan of this spec", target))
			}
		}
	}
	if len(v.problems) > 0 {
		return &ValidationError{Problems: v.problems}
	}
	return nil
}

type validator struct{ problems []Problem }

// schemas checks a plan's schemas given whole (CheckSchema), and that the
// plan does not also describe its instance parameters by a list.
func (v *validator) schemas(field string, p Plan) {
	if p.Schemas.IsZero() {
		return
	}
	if len(p.Parameters) > 0 {
		v.add(field+".schemas", "a plan describes its instance parameters by parameters or by schemas, not both")
	}
	for _, s := range []struct {
		name string
		doc  map[string]any
	}{{"provision", p.Schemas.Provision}, {"update", p.Schemas.Update}} {
		if len(s.doc) == 0 {
			continue
		}
		if why := CheckSchema(s.doc); why != "" {
			v.add(field+".schemas."+s.name, why)
		}
	}
}

func (v *validator) add(field, reason string) {
	v.problems = append(v.problems, Problem{Field: field, Reason: reason})
}

func (v *validator) name(field, s string) {
	switch {
	case s == "":
		v.add(field, "must not be empty")
	case len(s) > MaxNameLength:
		v.add(field, fmt.Sprintf("is %d characters, at most %d allowed", len(s), MaxNameLength))
	case !osbName.MatchString(s):
		v.add(field, fmt.Sprintf("%q must be letters, digits, periods and hyphens, starting with a letter or digit", s))
	}
}

func (v *validator) id(field, s string) {
	switch {
	case len(s) > MaxNameLength:
		v.add(field, fmt.Sprintf("is %d characters, at most %d allowed", len(s), MaxNameLength))
	case !osbID.MatchString(s):
		v.add(field, fmt.Sprintf("%q may only hold letters, digits and . _ ~ -", s))
	}
}

func (v *validator) parameters(field string, params []Parameter) {
	seen := map[string]int{}
	for i, p := range params {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case p.Name == "":
			v.add(f+".name", "must not be empty")
		case !paramName.MatchString(p.Name):
			v.add(f+".name", fmt.Sprintf("%q must start with a letter or underscore and hold letters, digits, _ . -", p.Name))
		}
		if j, dup := seen[p.Name]; dup && p.Name != "" {
			v.add(f+".name", fmt.Sprintf("%q is already the name of %s[%d]", p.Name, field, j))
		} else {
			seen[p.Name] = i
		}
		if _, ok := ParameterTypes[p.Type]; !ok {
			v.add(f+".type", fmt.Sprintf("%q is not a known type (string, enum, int, integer, number, float, bool, boolean, object, array)", p.Type))
		}
		if p.Type == "enum" && len(p.Enum) == 0 {
			v.add(f+".enum", "an enum parameter needs at least one value")
		}
		if p.Pattern != "" {
			if _, err := regexp.Compile(p.Pattern); err != nil {
				v.add(f+".pattern", fmt.Sprintf("not a valid regular expression: %v", err))
			}
		}
		if p.MinLength != nil && *p.MinLength < 0 {
			v.add(f+".min_length", "must not be negative")
		}
		if p.MaxLength != nil && *p.MaxLength < 0 {
			v.add(f+".max_length", "must not be negative")
		}
		if p.MinLength != nil && p.MaxLength != nil && *p.MinLength > *p.MaxLength {
			v.add(f+".min_length", fmt.Sprintf("%d is greater than max_length %d", *p.MinLength, *p.MaxLength))
		}
		if p.Minimum != nil && (math.IsNaN(*p.Minimum) || math.IsInf(*p.Minimum, 0)) {
			v.add(f+".minimum", "must be a finite number")
		}
		if p.Maximum != nil && (math.IsNaN(*p.Maximum) || math.IsInf(*p.Maximum, 0)) {
			v.add(f+".maximum", "must be a finite number")
		}
		if p.Minimum != nil && p.Maximum != nil && *p.Minimum > *p.Maximum {
			v.add(f+".minimum", fmt.Sprintf("%v is greater than maximum %v", *p.Minimum, *p.Maximum))
		}
		v.jsonValue(f+".default", p.Default)
		v.jsonValue(f+".enum", p.Enum)
		if p.Default != nil && len(p.Enum) > 0 && !containsValue(p.Enum, p.Default) {
			v.add(f+".default", fmt.Sprintf("%v is not one of the enum values", p.Default))
		}
		if p.Default != nil && p.Secret() {
			v.add(f+".default", "a secret (display_type password) parameter must not have a default")
		}
	}
}

// jsonValue reports a value JSON cannot encode (NaN, a channel...): it
// could not be stored, served, or digested. Only a spec built in Go can
// hold one; a parsed spec holds JSON values only.
func (v *validator) jsonValue(field string, x any) {
	if _, err := json.Marshal(x); err != nil {
		v.add(field, fmt.Sprintf("is not representable as JSON: %v", err))
	}
}

func containsValue(list []any, x any) bool {
	for _, e := range list {
		if fmt.Sprint(e) == fmt.Sprint(x) {
			return true
		}
	}
	return false
}
