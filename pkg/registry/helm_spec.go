package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/specsync/specsync/pkg/spec"
)

// Chart annotations specsync reads (Chart.yaml's annotations, a map of
// strings).
const (
	// PlansAnnotation holds the chart's plans: a YAML list of plans, each
	// with name and description and optionally free, bindable and
	// metadata. Without it a chart has one plan, "default".
	PlansAnnotation = "specsync.io/plans"
	// BindableAnnotation makes the chart's service bindable ("true") or
	// not ("false", the default).
	BindableAnnotation = "specsync.io/bindable"
)

// DefaultChartPlan is the name of a chart's plan when its annotations name
// none.
const DefaultChartPlan = "default"

// chartSpec maps a chart version to its spec (docs/specs.md, "Helm
// charts"):
//
//   - name, description and keywords (as tags) are the chart's; icon and
//     home become the imageUrl and documentationUrl metadata platforms
//     show, displayName is the chart's name, and metadata.helm says what
//     to install (chart, version, appVersion, repository);
//   - the chart's version is the spec's maintenance version, so the plans'
//     maintenance_info follows the chart;
//   - the service is bindable only when the bindable annotation says so:
//     a chart installs workloads and describes no credentials;
//   - the plans are those of the plans annotation, else one "default"
//     plan; every plan takes the chart's values.schema.json (see
//     chartSchemas) as its provision and update schema.
//
// A broken annotation or schema is the chart's error.
func chartSpec(c chartContent, repository string) (*spec.Spec, error) {
	m := c.meta
	s := &spec.Spec{
		Name:               m.Name,
		Description:        strings.TrimSpace(m.Description),
		MaintenanceVersion: strings.TrimPrefix(m.Version, "v"),
	}
	if s.Description == "" {
		s.Description = "The " + m.Name + " Helm chart"
	}
	for _, k := range m.Keywords {
		if k = strings.TrimSpace(k); k != "" && !slices.Contains(s.Tags, k) {
			s.Tags = append(s.Tags, k)
		}
	}
	helm := map[string]any{"chart": m.Name, "version": m.Version, "repository": repository}
	if m.AppVersion != "" {
		helm["appVersion"] = m.AppVersion
	}
	s.Metadata = map[string]any{"displayName": m.Name, "helm": helm}
	if m.Icon != "" {
		s.Metadata["imageUrl"] = m.Icon
	}
	if m.Home != "" {
		s.Metadata["documentationUrl"] = m.Home
	}
	switch b := m.Annotations[BindableAnnotation]; b {
	case "", "false":
	case "true":
		s.Bindable = true
	default:
		return nil, fmt.Errorf("annotation %s: %q is not true or false", BindableAnnotation, b)
	}
	plans, err := chartPlans(m.Annotations[PlansAnnotation], m.Name)
	if err != nil {
		return nil, err
	}
	var schemas spec.Schemas
	if c.schema != nil {
		if schemas, err = chartSchemas(c.schema); err != nil {
			return nil, err
		}
	}
	for i := range plans {
		plans[i].Schemas = schemas
	}
	s.Plans = plans
	if err := spec.Validate(s); err != nil {
		return nil, err
	}
	return s, nil
}

// annotatedPlan is one plan of the plans annotation.
type annotatedPlan struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Free        *bool          `json:"free,omitempty"`
	Bindable    *bool          `json:"bindable,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// chartPlans reads the plans annotation: absent, one default plan.
func chartPlans(annotation, chart string) ([]spec.Plan, error) {
	if strings.TrimSpace(annotation) == "" {
		return []spec.Plan{{Name: DefaultChartPlan, Description: "The " + chart + " chart with the values it is given"}}, nil
	}
	fail := func(err error) ([]spec.Plan, error) {
		return nil, fmt.Errorf("annotation %s: %w", PlansAnnotation, err)
	}
	raw, err := yaml.YAMLToJSON([]byte(annotation))
	if err != nil {
		return fail(fmt.Errorf("not YAML: %w", err))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var listed []annotatedPlan
	if err := dec.Decode(&listed); err != nil {
		return fail(fmt.Errorf("want a list of plans (name, description, free, bindable, metadata): %w", err))
	}
	if len(listed) == 0 {
		return fail(errors.New("names no plan"))
	}
	plans := make([]spec.Plan, len(listed))
	for i, p := range listed {
		plans[i] = spec.Plan{Name: p.Name, Description: p.Description, Free: p.Free, Bindable: p.Bindable, Metadata: p.Metadata}
	}
	return plans, nil
}

// laterKeywords are keywords drafts after draft-04 added that constrain
// (or reference) values. A platform reads a parameters schema as draft-04,
// which ignores them: it would accept values the chart refuses.
var laterKeywords = []string{
	"const", "contains", "minContains", "maxContains", "propertyNames",
	"if", "then", "else", "dependentRequired", "dependentSchemas",
	"prefixItems", "unevaluatedItems", "unevaluatedProperties",
	"$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
}

// chartSchemas makes a chart's values.schema.json the plans' instance
// schemas. Platforms read draft-04; charts are written for whichever draft
// their author knew (helm validates with any), so:
//
//   - a schema without $schema or with draft-04's is taken as draft-04;
//   - one of another draft is taken when it means the same as draft-04:
//     none of the keywords later drafts added that draft-04 would ignore
//     (const, if/then/else, ...: an error naming it and where), a numeric
//     exclusiveMinimum/exclusiveMaximum (draft-06) rewritten to draft-04's
//     minimum with exclusiveMinimum: true, a boolean subschema to {} or
//     {"not": {}}; its $schema becomes draft-04's;
//   - then it must pass spec.CheckSchema (compile as draft-04, 64 kB).
//
// A values schema validates the values helm installs with: values.yaml
// merged with what the user gives. Provision and update parameters are
// only what the user gives, so every "required" is dropped (values.yaml
// supplies those values); the update schema drops every "default" as
// well, as generated update schemas do (a form pre-filled with a default
// would silently revert an earlier choice).
func chartSchemas(raw []byte) (spec.Schemas, error) {
	decode := func() (map[string]any, error) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		var doc any
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("values.schema.json is not JSON: %w", err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, errors.New("values.schema.json is not JSON: data after the schema")
		}
		m, ok := doc.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("values.schema.json is %s, not a schema object", jsonKind(doc))
		}
		declared, has := m["$schema"]
		d, _ := declared.(string)
		later := has && !spec.IsDraft04(d)
		out, err := draft04(m, "", later)
		if err != nil {
			return nil, fmt.Errorf("values.schema.json (%s %v): %w", "$schema", jsonValueText(declared, has), err)
		}
		if later {
			out.(map[string]any)["$schema"] = spec.SchemaDraft
		}
		return out.(map[string]any), nil
	}
	provision, err := decode()
	if err != nil {
		return spec.Schemas{}, err
	}
	update, _ := decode()
	eachSchema(provision, func(m map[string]any) { delete(m, "required") })
	eachSchema(update, func(m map[string]any) { delete(m, "required"); delete(m, "default") })
	for _, s := range []map[string]any{provision, update} {
		if why := spec.CheckSchema(s); why != "" {
			return spec.Schemas{}, fmt.Errorf("values.schema.json: %s", why)
		}
	}
	return spec.Schemas{Provision: provision, Update: update}, nil
}

func jsonValueText(v any, has bool) string {
	if !has {
		return "none"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// Where subschemas are, by keyword: a schema, a mapping of schemas, or a
// list of them (items and dependencies may be either of two).
var (
	subschema      = []string{"additionalProperties", "additionalItems", "not", "items", "contains", "propertyNames", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties"}
	subschemaMaps  = []string{"properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies"}
	subschemaLists = []string{"allOf", "anyOf", "oneOf", "items", "prefixItems"}
	// boolAllowed are the keywords where draft-04 itself takes a boolean.
	boolAllowed = map[string]bool{"additionalProperties": true, "additionalItems": true}
)

// draft04 copies a (sub)schema at ptr (a JSON pointer, for messages) in
// draft-04 terms, or says why it cannot be: see chartSchemas. later says
// the document names a later draft.
func draft04(v any, ptr string, later bool) (any, error) {
	switch t := v.(type) {
	case bool:
		if t {
			return map[string]any{}, nil
		}
		return map[string]any{"not": map[string]any{}}, nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = x
		}
		if later {
			for _, k := range laterKeywords {
				if _, ok := t[k]; ok {
					return nil, fmt.Errorf("%s at %s is a keyword of a later draft than draft-04, which OSB platforms read: they would not check it", k, pointer(ptr))
				}
			}
			for _, k := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
				n, isNumber := t[k[0]].(float64)
				if !isNumber {
					continue
				}
				if _, both := t[k[1]]; both {
					return nil, fmt.Errorf("%s at %s: both a numeric %s and %s, which draft-04 cannot say at once", k[0], pointer(ptr), k[0], k[1])
				}
				out[k[1]], out[k[0]] = n, true
			}
		}
		for _, k := range subschema {
			if x, ok := t[k]; ok {
				if _, isBool := x.(bool); isBool && boolAllowed[k] {
					continue
				}
				if _, isList := x.([]any); isList {
					continue // items as a list: below
				}
				var err error
				if out[k], err = draft04(x, ptr+"/"+k, later); err != nil {
					return nil, err
				}
			}
		}
		for _, k := range subschemaMaps {
			m, ok := t[k].(map[string]any)
			if !ok {
				continue
			}
			sub := make(map[string]any, len(m))
			for name, x := range m {
				if _, isList := x.([]any); isList && k == "dependencies" {
					sub[name] = x // a property dependency: names, not a schema
					continue
				}
				var err error
				if sub[name], err = draft04(x, ptr+"/"+k+"/"+escapePointer(name), later); err != nil {
					return nil, err
				}
			}
			out[k] = sub
		}
		for _, k := range subschemaLists {
			l, ok := t[k].([]any)
			if !ok {
				continue
			}
			sub := make([]any, len(l))
			for i, x := range l {
				var err error
				if sub[i], err = draft04(x, fmt.Sprintf("%s/%s/%d", ptr, k, i), later); err != nil {
					return nil, err
				}
			}
			out[k] = sub
		}
		return out, nil
	default:
		// Not a schema: the draft-04 compile names it.
		return v, nil
	}
}

// eachSchema calls fn on every (sub)schema object of doc.
func eachSchema(v any, fn func(map[string]any)) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	fn(m)
	for _, k := range subschema {
		eachSchema(m[k], fn)
	}
	for _, k := range subschemaMaps {
		if sub, ok := m[k].(map[string]any); ok {
			for _, x := range sub {
				eachSchema(x, fn)
			}
		}
	}
	for _, k := range subschemaLists {
		if l, ok := m[k].([]any); ok {
			for _, x := range l {
				eachSchema(x, fn)
			}
		}
	}
}

func pointer(p string) string {
	if p == "" {
		return "the root"
	}
	return p
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
