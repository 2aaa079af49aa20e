package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/specsync/specsync/pkg/spec"
)

// compile compiles a generated schema the way a platform gets it: through
// its JSON encoding. Compiling also validates it against the draft 4
// meta-schema, so a successful compile proves the schema is valid draft 4.
func compile(t *testing.T, schema map[string]any) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustJSON(t, schema)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("schema does not compile as draft 4: %v\n%s", err, mustJSON(t, schema))
	}
	return s
}

// failedKeywords returns the keywords that rejected v, so tests check what
// failed rather than the library's message text.
func failedKeywords(t *testing.T, s *jsonschema.Schema, v string) []string {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(v))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("validate %s: %v", v, err)
	}
	var out []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, strings.Join(e.ErrorKind.KeywordPath(), "/"))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(out)
	return out
}

func TestEveryRenderedSchemaCompiles(t *testing.T) {
	n := 0
	for _, svc := range mustRender(t, fixtures()).Services {
		for _, p := range svc.Plans {
			if p.Schemas == nil {
				continue
			}
			var all []*InputParameters
			if si := p.Schemas.ServiceInstance; si != nil {
				all = append(all, si.Create, si.Update)
			}
			if sb := p.Schemas.ServiceBinding; sb != nil {
				all = append(all, sb.Create)
			}
			for _, ip := range all {
				if ip == nil {
					continue
				}
				if ip.Parameters["$schema"] != SchemaDraft {
					t.Errorf("%s/%s: $schema is %v", svc.Name, p.Name, ip.Parameters["$schema"])
				}
				compile(t, ip.Parameters)
				n++
			}
		}
	}
	// postgresql/dev: create, update, bind; redis/bindable: bind; mq/tuned: create.
	if n != 5 {
		t.Fatalf("compiled %d schemas, want 5", n)
	}
	// Empty schemas, which Render leaves out, are valid too.
	compile(t, ParametersSchema(nil, false))
	compile(t, ParametersSchema(nil, true))
}

// TestCompilerRejectsInvalidDraft4 shows the compile check is real: an
// empty required list is invalid draft 4, which is why ParametersSchema
// omits it.
func TestCompilerRejectsInvalidDraft4(t *testing.T) {
	s := ParametersSchema(nil, false)
	s["required"] = []string{}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustJSON(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource("mem://bad.json", doc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compile("mem://bad.json"); err == nil {
		t.Fatal("a schema with an empty required list compiled")
	}
}

func TestParameterValues(t *testing.T) {
	pg := fixtures()[0]
	dev := pg.Plans[0]
	create := compile(t, ParametersSchema(dev.Parameters, false))
	update := compile(t, ParametersSchema(dev.Parameters, true))
	bind := compile(t, ParametersSchema(dev.BindParameters, false))

	const minimal = `"db_name": "app", "db_password": "s3cretpass"`
	cases := []struct {
		name   string
		schema *jsonschema.Schema
		value  string
		want   []string // failing keywords; nil means valid
	}{
		{"create minimal", create, `{` + minimal + `}`, nil},
		{"create every type", create, `{` + minimal + `, "version": "16", "max_connections": 200, "replicas": 0,
			"cpu": 0.5, "memory_ratio": 0.75, "backups": false, "tls": true, "settings": {"a": 1}, "extensions": ["x"]}`, nil},
		{"missing required", create, `{"db_name": "app"}`, []string{"required"}},
		{"missing all required", create, `{}`, []string{"required"}},
		{"string for integer", create, `{` + minimal + `, "max_connections": "200"}`, []string{"type"}},
		{"fraction for integer", create, `{` + minimal + `, "replicas": 1.5}`, []string{"type"}},
		{"string for boolean", create, `{` + minimal + `, "backups": "yes"}`, []string{"type"}},
		{"array for object", create, `{` + minimal + `, "settings": []}`, []string{"type"}},
		{"object for array", create, `{` + minimal + `, "extensions": {}}`, []string{"type"}},
		{"number for string", create, `{"db_name": 5, "db_password": "s3cretpass"}`, []string{"type"}},
		{"below minimum", create, `{` + minimal + `, "max_connections": 5}`, []string{"minimum"}},
		{"above maximum", create, `{` + minimal + `, "cpu": 9}`, []string{"maximum"}},
		{"not in enum", create, `{` + minimal + `, "version": "9.6"}`, []string{"enum"}},
		{"pattern mismatch", create, `{"db_name": "App", "db_password": "s3cretpass"}`, []string{"pattern"}},
		{"too short", create, `{"db_name": "app", "db_password": "short"}`, []string{"minLength"}},
		{"too long", create, `{"db_name": "` + strings.Repeat("a", 64) + `", "db_password": "s3cretpass"}`, []string{"maxLength"}},
		{"unknown property", create, `{` + minimal + `, "db_nmae": "typo"}`, []string{"additionalProperties"}},
		{"not an object", create, `[]`, []string{"type"}},

		{"update nothing", update, `{}`, nil},
		{"update updatable", update, `{"max_connections": 300, "cpu": 2, "memory_ratio": 0.1, "backups": true}`, nil},
		{"update out of range", update, `{"max_connections": 5000}`, []string{"maximum"}},
		{"update not updatable", update, `{"db_name": "other"}`, []string{"additionalProperties"}},

		{"bind", bind, `{"role": "readonly", "role_password": "x"}`, nil},
		{"bind missing required", bind, `{"role_password": "x"}`, []string{"required"}},
		{"bind not in enum", bind, `{"role": "admin"}`, []string{"enum"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := failedKeywords(t, tc.schema, tc.value)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("value %s: failed keywords %v, want %v", tc.value, got, tc.want)
			}
		})
	}
}

func TestParametersSchemaShape(t *testing.T) {
	params := fixtures()[0].Plans[0].Parameters
	create := ParametersSchema(params, false)
	update := ParametersSchema(params, true)
	prop := func(s map[string]any, name string) map[string]any {
		p, _ := s["properties"].(map[string]any)[name].(map[string]any)
		return p
	}

	if got := fmt.Sprint(create["required"]); got != "[db_name db_password]" {
		t.Errorf("required %s, want declaration order [db_name db_password]", got)
	}
	if _, ok := update["required"]; ok {
		t.Error("update schema has required")
	}
	if create["additionalProperties"] != false || update["additionalProperties"] != false {
		t.Error("additionalProperties is not false")
	}

	// Every APB type maps through spec.ParameterTypes.
	for _, p := range params {
		if got, want := prop(create, p.Name)["type"], spec.ParameterTypes[p.Type]; got != want {
			t.Errorf("%s (%s): type %v, want %s", p.Name, p.Type, got, want)
		}
	}

	pw := prop(create, "db_password")
	if pw["format"] != "password" {
		t.Errorf("secret parameter: format %v, want password", pw["format"])
	}
	if _, ok := prop(create, "db_name")["format"]; ok {
		t.Error("non-secret parameter has a format")
	}
	for _, k := range []string{"display_type", "display_group", "displayType", "displayGroup"} {
		if _, ok := prop(create, "version")[k]; ok {
			t.Errorf("display hint %s leaked into the schema", k)
		}
	}

	if got := prop(create, "max_connections")["default"]; got != 100.0 {
		t.Errorf("create default %v, want 100", got)
	}
	if _, ok := prop(update, "max_connections")["default"]; ok {
		t.Error("update schema carries a default")
	}
	if prop(update, "db_name") != nil {
		t.Error("update schema has a non-updatable parameter")
	}
	if len(update["properties"].(map[string]any)) != 4 {
		t.Errorf("update properties %v, want the 4 updatable ones", update["properties"])
	}

	// A secret never carries a default, even one that slipped past validation.
	leaky := []spec.Parameter{{Name: "token", Type: "string", DisplayType: "password", Default: "hunter2"}}
	if b := mustJSON(t, ParametersSchema(leaky, false)); bytes.Contains(b, []byte("hunter2")) {
		t.Fatalf("secret default in schema: %s", b)
	}

	// An unknown type gets no type keyword rather than a guess.
	odd := ParametersSchema([]spec.Parameter{{Name: "x", Type: "date"}}, false)
	if _, ok := prop(odd, "x")["type"]; ok {
		t.Error("unknown parameter type produced a type keyword")
	}
}
