package spec_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/spec"
)

// A spec's plans may give their instance schemas whole, and the spec a
// maintenance version of its own: both parse, validate, and encode back
// to the same digest.
func TestParseSchemasAndMaintenanceVersion(t *testing.T) {
	doc := `name: chart
description: A chart
maintenance_version: 1.2.3-rc.1+build.5
plans:
  - name: default
    description: The default plan
    schemas:
      provision:
        type: object
        properties:
          replicas: {type: integer, minimum: 1, default: 1}
        additionalProperties: false
      update:
        $schema: http://json-schema.org/draft-04/schema#
        properties:
          replicas: {type: integer, minimum: 1}
`
	s, err := spec.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if s.MaintenanceVersion != "1.2.3-rc.1+build.5" || s.MaintenanceAt(7) != "1.2.3-rc.1+build.5" {
		t.Errorf("maintenance version %q, at 7: %q", s.MaintenanceVersion, s.MaintenanceAt(7))
	}
	if got := s.Plans[0].Schemas.Provision["properties"].(map[string]any)["replicas"].(map[string]any)["minimum"]; got != 1.0 {
		t.Errorf("provision schema %v", s.Plans[0].Schemas.Provision)
	}
	b, _ := json.Marshal(s)
	again, err := spec.Parse(b)
	if err != nil || spec.Digest(again) != spec.Digest(s) {
		t.Fatalf("round trip: %v, digests %s %s", err, spec.Digest(again), spec.Digest(s))
	}
	// Without either, a spec encodes as before the fields existed, and
	// its maintenance version is the generation's.
	plain := base()
	if b, _ := json.Marshal(plain); strings.Contains(string(b), "schemas") || strings.Contains(string(b), "maintenance_version") {
		t.Errorf("a spec without them encodes them: %s", b)
	}
	if plain.MaintenanceAt(3) != "3.0.0" || plain.MaintenanceAt(0) != "" {
		t.Errorf("generation scheme: %q %q", plain.MaintenanceAt(3), plain.MaintenanceAt(0))
	}
}

func TestValidateSchemasAndMaintenanceVersion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(s *spec.Spec)
		field  string
		reason string
	}{
		{"shorthand version", func(s *spec.Spec) { s.MaintenanceVersion = "1.2" }, "maintenance_version", "not a semantic version"},
		{"v prefix", func(s *spec.Spec) { s.MaintenanceVersion = "v1.2.3" }, "maintenance_version", "not a semantic version"},
		{"leading zero", func(s *spec.Spec) { s.MaintenanceVersion = "01.2.3" }, "maintenance_version", "not a semantic version"},
		{"schema and parameters", func(s *spec.Spec) {
			s.Plans[0].Schemas.Provision = map[string]any{"type": "object"}
		}, "plans[0].schemas", "by parameters or by schemas, not both"},
		{"draft-07", func(s *spec.Spec) {
			s.Plans[1].Schemas.Provision = map[string]any{"$schema": "http://json-schema.org/draft-07/schema#"}
		}, "plans[1].schemas.provision", "is not draft-04"},
		{"$schema not a string", func(s *spec.Spec) {
			s.Plans[1].Schemas.Update = map[string]any{"$schema": 4.0}
		}, "plans[1].schemas.update", "$schema 4 is not draft-04"},
		{"not an object's", func(s *spec.Spec) {
			s.Plans[1].Schemas.Provision = map[string]any{"type": "string"}
		}, "plans[1].schemas.provision", `type is "string"`},
		{"bad keyword", func(s *spec.Spec) {
			s.Plans[1].Schemas.Provision = map[string]any{"properties": map[string]any{"n": map[string]any{"minimum": "one"}}}
		}, "plans[1].schemas.provision", "does not compile as JSON Schema draft-04"},
		{"bad pattern", func(s *spec.Spec) {
			s.Plans[1].Schemas.Provision = map[string]any{"properties": map[string]any{"n": map[string]any{"pattern": "(["}}}
		}, "plans[1].schemas.provision", "does not compile"},
		{"a file reference", func(s *spec.Spec) {
			s.Plans[1].Schemas.Provision = map[string]any{"$ref": "file:///etc/passwd"}
		}, "plans[1].schemas.provision", "does not compile"},
		{"too big", func(s *spec.Spec) {
			s.Plans[1].Schemas.Update = map[string]any{"description": strings.Repeat("x", spec.MaxSchemaBytes)}
		}, "plans[1].schemas.update", "OSB allows at most 64000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mutate(s)
			err := spec.Validate(s)
			ve, ok := err.(*spec.ValidationError)
			if !ok || len(ve.Problems) != 1 || ve.Problems[0].Field != tc.field || !strings.Contains(ve.Problems[0].Reason, tc.reason) {
				t.Fatalf("got %v, want %s: ...%s...", err, tc.field, tc.reason)
			}
		})
	}
	ok := base()
	ok.MaintenanceVersion = "10.20.30+meta"
	ok.Plans[1].Schemas = spec.Schemas{
		Provision: map[string]any{"$schema": "http://json-schema.org/draft-04/schema", "type": "object",
			"definitions": map[string]any{"n": map[string]any{"type": "integer"}}, "properties": map[string]any{"n": map[string]any{"$ref": "#/definitions/n"}}},
		Update: map[string]any{"properties": map[string]any{"n": map[string]any{"minimum": 1.0, "exclusiveMinimum": true}}},
	}
	if err := spec.Validate(ok); err != nil {
		t.Fatal(err)
	}
}

func TestIsSemver(t *testing.T) {
	for v, want := range map[string]bool{
		"1.2.3": true, "0.0.0": true, "1.2.3-rc.1": true, "1.2.3+build": true, "1.2.3-rc.1+b.2": true,
		"": false, "1.2": false, "1": false, "v1.2.3": false, "1.2.3.4": false, "01.2.3": false, "1.2.3-": false, "latest": false,
	} {
		if got := spec.IsSemver(v); got != want {
			t.Errorf("IsSemver(%q) = %v, want %v", v, got, want)
		}
	}
}

// A spec cannot claim its own provenance: only a verified signature sets
// it, so a label saying who signed it is refused, in any case.
func TestSpecCannotClaimProvenance(t *testing.T) {
	for _, key := range []string{"provenance", "Provenance"} {
		doc := "name: forged\ndescription: d\nplans:\n  - name: p\n    description: d\n" + key + ":\n  digest: sha256:00\n  key: SHA256:trusted\n"
		s, err := spec.Parse([]byte(doc))
		if err == nil {
			t.Fatalf("%s: a spec claiming provenance parsed: %+v", key, s.Provenance)
		}
		if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "verified signature") {
			t.Errorf("%s: error %q does not say the key is refused and why", key, err)
		}
	}
}
