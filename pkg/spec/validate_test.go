package spec_test

import (
	"math"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/spec"
)

func ptr[T any](v T) *T { return &v }

// base is a valid spec using most of the model; each case breaks one rule.
func base() *spec.Spec {
	return &spec.Spec{
		Version:     "1.0",
		Name:        "demo",
		Description: "A demo service",
		Bindable:    true,
		Async:       "optional",
		Tags:        []string{"database", "sql"},
		Metadata:    map[string]any{"displayName": "Demo"},
		Platforms:   []spec.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}},
		Plans: []spec.Plan{
			{
				Name: "small", Description: "A small plan", Free: ptr(true),
				UpdatesTo: []string{"large"},
				Parameters: []spec.Parameter{
					{Name: "size", Type: "int", Default: 1, Minimum: ptr(1.0), Maximum: ptr(10.0), Updatable: true},
					{Name: "flavor", Type: "enum", Enum: []any{"a", "b"}, Default: "a"},
					{Name: "password", Type: "string", DisplayType: "password", Required: true, MinLength: ptr(8), MaxLength: ptr(64)},
				},
				BindParameters: []spec.Parameter{{Name: "read_only", Type: "bool", Default: false}},
			},
			{Name: "large", ID: "large-plan", Description: "A large plan", Free: ptr(false)},
		},
	}
}

func TestValidateAcceptsBase(t *testing.T) {
	if err := spec.Validate(base()); err != nil {
		t.Fatal(err)
	}
}

func TestValidateRules(t *testing.T) {
	param := func(s *spec.Spec) *spec.Parameter { return &s.Plans[0].Parameters[0] }
	for _, tc := range []struct {
		name   string
		mutate func(s *spec.Spec)
		want   []string // field, reason pairs, in order
	}{
		// The spec's name, id, description.
		{"empty name", func(s *spec.Spec) { s.Name = "" }, []string{"name", "must not be empty"}},
		{"name with a space", func(s *spec.Spec) { s.Name = "my service" }, []string{"name", "letters, digits, periods and hyphens"}},
		{"name with an underscore", func(s *spec.Spec) { s.Name = "my_service" }, []string{"name", "letters, digits, periods and hyphens"}},
		{"name with a slash", func(s *spec.Spec) { s.Name = "team/db" }, []string{"name", "letters, digits, periods and hyphens"}},
		{"name starting with a hyphen", func(s *spec.Spec) { s.Name = "-db" }, []string{"name", "starting with a letter or digit"}},
		{"name starting with a period", func(s *spec.Spec) { s.Name = ".db" }, []string{"name", "starting with a letter or digit"}},
		{"name not ASCII", func(s *spec.Spec) { s.Name = "bäse" }, []string{"name", "letters, digits"}},
		{"name of 256 characters", func(s *spec.Spec) { s.Name = strings.Repeat("a", 256) }, []string{"name", "is 256 characters, at most 255"}},
		{"id with a slash", func(s *spec.Spec) { s.ID = "a/b" }, []string{"id", "may only hold letters, digits and . _ ~ -"}},
		{"id with a space", func(s *spec.Spec) { s.ID = "a b" }, []string{"id", "may only hold"}},
		{"id of 256 characters", func(s *spec.Spec) { s.ID = strings.Repeat("i", 256) }, []string{"id", "is 256 characters"}},
		{"empty description", func(s *spec.Spec) { s.Description = "" }, []string{"description", "must not be empty"}},
		{"blank description", func(s *spec.Spec) { s.Description = " \t\n" }, []string{"description", "must not be empty"}},
		{"bad async", func(s *spec.Spec) { s.Async = "sometimes" }, []string{"async", `"sometimes" is not one of optional, required, unsupported`}},
		{"async in capitals", func(s *spec.Spec) { s.Async = "Optional" }, []string{"async", "is not one of"}},
		{"empty tag", func(s *spec.Spec) { s.Tags = append(s.Tags, "") }, []string{"tags[2]", "must not be empty"}},
		{"blank tag", func(s *spec.Spec) { s.Tags[0] = "  " }, []string{"tags[0]", "must not be empty"}},
		{"platform without architecture", func(s *spec.Spec) { s.Platforms[1].Architecture = "" }, []string{"platforms[1]", "needs both os and architecture"}},
		{"platform without os", func(s *spec.Spec) { s.Platforms[0].OS = "" }, []string{"platforms[0]", "needs both os and architecture"}},
		{"metadata JSON cannot hold", func(s *spec.Spec) { s.Metadata["x"] = math.NaN() }, []string{"metadata", "not representable as JSON"}},

		// Plans.
		{"no plans", func(s *spec.Spec) { s.Plans = nil }, []string{"plans", "at least one plan is required"}},
		{"empty plan list", func(s *spec.Spec) { s.Plans = []spec.Plan{} }, []string{"plans", "at least one plan is required"}},
		{"empty plan name", func(s *spec.Spec) { s.Plans[1].Name = ""; s.Plans[0].UpdatesTo = nil }, []string{"plans[1].name", "must not be empty"}},
		{"bad plan name", func(s *spec.Spec) { s.Plans[1].Name = "extra large" },
			[]string{"plans[1].name", "letters, digits, periods and hyphens", "plans[0].updates_to[0]", `"large" is not a plan`}},
		{"plan name of 256 characters", func(s *spec.Spec) { s.Plans[1].Name = strings.Repeat("p", 256); s.Plans[0].UpdatesTo = nil }, []string{"plans[1].name", "at most 255"}},
		{"duplicate plan names", func(s *spec.Spec) { s.Plans[1].Name = "small"; s.Plans[0].UpdatesTo = nil }, []string{"plans[1].name", `"small" is already the name of plans[0]`}},
		{"duplicate plan ids", func(s *spec.Spec) { s.Plans[0].ID = "large-plan" }, []string{"plans[1].id", `"large-plan" is already the id of plans[0]`}},
		{"bad plan id", func(s *spec.Spec) { s.Plans[1].ID = "large plan" }, []string{"plans[1].id", "may only hold"}},
		{"plan id of 256 characters", func(s *spec.Spec) { s.Plans[1].ID = strings.Repeat("x", 256) }, []string{"plans[1].id", "is 256 characters"}},
		{"empty plan description", func(s *spec.Spec) { s.Plans[1].Description = "" }, []string{"plans[1].description", "must not be empty"}},
		{"plan metadata JSON cannot hold", func(s *spec.Spec) { s.Plans[1].Metadata = map[string]any{"c": make(chan int)} }, []string{"plans[1].metadata", "not representable as JSON"}},
		{"updates_to an unknown plan", func(s *spec.Spec) { s.Plans[0].UpdatesTo = []string{"large", "huge"} }, []string{"plans[0].updates_to[1]", `"huge" is not a plan of this spec`}},
		{"updates_to the empty name", func(s *spec.Spec) { s.Plans[1].UpdatesTo = []string{""} }, []string{"plans[1].updates_to[0]", `"" is not a plan`}},
		{"updates_to the empty name of an unnamed plan", func(s *spec.Spec) { s.Plans[1].Name = ""; s.Plans[0].UpdatesTo = []string{""} },
			[]string{"plans[1].name", "must not be empty", "plans[0].updates_to[0]", `"" is not a plan`}},

		// Parameters.
		{"empty parameter name", func(s *spec.Spec) { param(s).Name = "" }, []string{"plans[0].parameters[0].name", "must not be empty"}},
		{"bad parameter name", func(s *spec.Spec) { param(s).Name = "1size" }, []string{"plans[0].parameters[0].name", "must start with a letter or underscore"}},
		{"parameter name with a space", func(s *spec.Spec) { param(s).Name = "disk size" }, []string{"plans[0].parameters[0].name", "must start with a letter or underscore"}},
		{"duplicate parameter names", func(s *spec.Spec) { s.Plans[0].Parameters[1].Name = "size" }, []string{"plans[0].parameters[1].name", `"size" is already the name of plans[0].parameters[0]`}},
		{"unknown parameter type", func(s *spec.Spec) { param(s).Type = "uuid" }, []string{"plans[0].parameters[0].type", `"uuid" is not a known type`}},
		{"missing parameter type", func(s *spec.Spec) { param(s).Type = "" }, []string{"plans[0].parameters[0].type", `"" is not a known type`}},
		{"unknown bind parameter type", func(s *spec.Spec) { s.Plans[0].BindParameters[0].Type = "Bool" }, []string{"plans[0].bind_parameters[0].type", "not a known type"}},
		{"enum without values", func(s *spec.Spec) { p := &s.Plans[0].Parameters[1]; p.Enum, p.Default = nil, nil }, []string{"plans[0].parameters[1].enum", "needs at least one value"}},
		{"bad pattern", func(s *spec.Spec) { param(s).Pattern = "^(a|b$" }, []string{"plans[0].parameters[0].pattern", "not a valid regular expression"}},
		{"negative min_length", func(s *spec.Spec) { s.Plans[0].Parameters[2].MinLength = ptr(-1) }, []string{"plans[0].parameters[2].min_length", "must not be negative"}},
		{"negative max_length", func(s *spec.Spec) { s.Plans[0].Parameters[2].MaxLength = ptr(-1) },
			[]string{"plans[0].parameters[2].max_length", "must not be negative", "plans[0].parameters[2].min_length", "8 is greater than max_length -1"}},
		{"min_length over max_length", func(s *spec.Spec) { s.Plans[0].Parameters[2].MinLength = ptr(65) }, []string{"plans[0].parameters[2].min_length", "65 is greater than max_length 64"}},
		{"minimum over maximum", func(s *spec.Spec) { param(s).Minimum = ptr(11.0) }, []string{"plans[0].parameters[0].minimum", "11 is greater than maximum 10"}},
		{"minimum not a number", func(s *spec.Spec) { param(s).Minimum = ptr(math.NaN()) }, []string{"plans[0].parameters[0].minimum", "must be a finite number"}},
		{"maximum infinite", func(s *spec.Spec) { param(s).Maximum = ptr(math.Inf(1)) }, []string{"plans[0].parameters[0].maximum", "must be a finite number"}},
		{"default not in enum", func(s *spec.Spec) { s.Plans[0].Parameters[1].Default = "c" }, []string{"plans[0].parameters[1].default", "c is not one of the enum values"}},
		{"default JSON cannot hold", func(s *spec.Spec) { param(s).Default = math.Inf(-1) }, []string{"plans[0].parameters[0].default", "not representable as JSON"}},
		{"secret with a default", func(s *spec.Spec) { s.Plans[0].Parameters[2].Default = "hunter22" }, []string{"plans[0].parameters[2].default", "must not have a default"}},
		{"secret with an empty default", func(s *spec.Spec) { s.Plans[0].Parameters[2].Default = "" }, []string{"plans[0].parameters[2].default", "must not have a default"}},
		{"secret bind parameter with a default", func(s *spec.Spec) {
			s.Plans[1].BindParameters = []spec.Parameter{{Name: "token", Type: "string", DisplayType: "password", Default: "t"}}
		}, []string{"plans[1].bind_parameters[0].default", "must not have a default"}},

		{"plan_updateable false with updates_to", func(s *spec.Spec) { s.Plans[0].PlanUpdateable = ptr(false) },
			[]string{"plans[0].plan_updateable", "is false, yet updates_to names plans to move to (large)"}},

		// Every problem is reported, in document order.
		{"several problems", func(s *spec.Spec) {
			s.Name, s.Async, s.Tags = "", "never", []string{""}
			s.Plans[1].Name = "small"
			s.Plans[0].Parameters[0].Type = "uuid"
			s.Plans[0].UpdatesTo = []string{"gone"}
		}, []string{
			"name", "must not be empty",
			"async", "is not one of",
			"tags[0]", "must not be empty",
			"plans[0].parameters[0].type", "not a known type",
			"plans[1].name", "already the name of plans[0]",
			"plans[0].updates_to[0]", `"gone" is not a plan`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mutate(s)
			wantProblems(t, spec.Validate(s), tc.want...)
		})
	}
}

// The limits are inclusive, and the rules are no stricter than OSB's.
func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(s *spec.Spec)
	}{
		{"name of 255 characters", func(s *spec.Spec) { s.Name = strings.Repeat("a", 255) }},
		{"name with periods, hyphens, capitals, digits", func(s *spec.Spec) { s.Name = "My-DB.v2" }},
		{"name starting with a digit", func(s *spec.Spec) { s.Name = "9db" }},
		{"one-character name", func(s *spec.Spec) { s.Name = "x" }},
		{"uuid id", func(s *spec.Spec) { s.ID = "3f6c2a8e-9d41-4b7a-a5e3-1c0d7f2b9e64" }},
		{"id with unreserved characters", func(s *spec.Spec) { s.ID = "a.b_c~d-E9" }},
		{"id of 255 characters", func(s *spec.Spec) { s.ID = strings.Repeat("i", 255) }},
		{"no async", func(s *spec.Spec) { s.Async = "" }},
		{"async required", func(s *spec.Spec) { s.Async = "required" }},
		{"async unsupported", func(s *spec.Spec) { s.Async = "unsupported" }},
		{"no tags, metadata or platforms", func(s *spec.Spec) { s.Tags, s.Metadata, s.Platforms = nil, nil, nil }},
		{"min_length equal to max_length", func(s *spec.Spec) { s.Plans[0].Parameters[2].MinLength = ptr(64) }},
		{"minimum equal to maximum", func(s *spec.Spec) { s.Plans[0].Parameters[0].Minimum = ptr(10.0) }},
		{"a numeric enum with a default of another Go type", func(s *spec.Spec) {
			p := &s.Plans[0].Parameters[1]
			p.Enum, p.Default = []any{1.0, 2.0}, 2
		}},
		{"a secret without a default but required", func(s *spec.Spec) { s.Plans[0].Parameters[2].Required = true }},
		{"the same parameter name in parameters and bind_parameters", func(s *spec.Spec) { s.Plans[0].BindParameters[0].Name = "size" }},
		{"the same parameter name in two plans", func(s *spec.Spec) { s.Plans[1].Parameters = []spec.Parameter{{Name: "size", Type: "int"}} }},
		{"a plan updating to itself", func(s *spec.Spec) { s.Plans[1].UpdatesTo = []string{"large"} }},
		{"plan_updateable true with updates_to", func(s *spec.Spec) { s.Plans[0].PlanUpdateable = ptr(true) }},
		{"spec plan_updateable false, a plan overriding it", func(s *spec.Spec) { s.PlanUpdateable = ptr(false) }},
		{"a valid pattern", func(s *spec.Spec) { s.Plans[0].Parameters[2].Pattern = `^[A-Za-z0-9!@#$%^&*]{8,}$` }},
		{"parameter names with _ . -", func(s *spec.Spec) { s.Plans[0].Parameters[0].Name = "_disk.size-gb" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mutate(s)
			if err := spec.Validate(s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Every parameter type the validator knows is accepted, and maps to a JSON
// schema type.
func TestValidateParameterTypes(t *testing.T) {
	schema := map[string]bool{"string": true, "integer": true, "number": true, "boolean": true, "object": true, "array": true}
	for typ, js := range spec.ParameterTypes {
		if !schema[js] {
			t.Errorf("type %q maps to %q, not a JSON schema type", typ, js)
		}
		s := base()
		s.Plans[1].Parameters = []spec.Parameter{{Name: "p", Type: typ, Enum: []any{"v"}}}
		if err := spec.Validate(s); err != nil {
			t.Errorf("type %q: %v", typ, err)
		}
	}
	for _, typ := range []string{"string", "enum", "int", "integer", "number", "float", "bool", "boolean", "object", "array"} {
		if _, ok := spec.ParameterTypes[typ]; !ok {
			t.Errorf("APB type %q is not known", typ)
		}
	}
}

func TestValidateNil(t *testing.T) {
	if err := spec.Validate(nil); err == nil {
		t.Fatal("a nil spec validated")
	}
}
