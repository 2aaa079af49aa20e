package spec_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/specsync/specsync/pkg/spec"
)

// Derived ids are part of the public contract (an id never changes once
// published): these values must never change.
func TestDerivedIDsAreStable(t *testing.T) {
	specID := spec.DeriveSpecID("examples", "postgresql")
	if specID != "4ea26264-9d26-5dd8-96d6-7fa9af5c18a8" {
		t.Errorf("DeriveSpecID(examples, postgresql) = %s; changing it changes every published id", specID)
	}
	if planID := spec.DerivePlanID(specID, "dev"); planID != "2f8ca477-3fd6-5915-a53c-564400fc25ee" {
		t.Errorf("DerivePlanID(..., dev) = %s; changing it changes every published plan id", planID)
	}
	for _, id := range []string{specID, spec.DerivePlanID(specID, "dev"), spec.DeriveSpecID("", "")} {
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 5 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Errorf("%s is not a canonical UUIDv5: %v", id, err)
		}
	}
}

func TestDerivedIDsAreDeterministicAndDistinct(t *testing.T) {
	type pair struct{ a, b string }
	specs := []pair{
		{"examples", "postgresql"},
		{"examples", "redis"},
		{"other", "postgresql"},    // same name, another registry
		{"examples", "Postgresql"}, // names are case-sensitive
		{"ab", "c"},                // the separator keeps these apart
		{"a", "bc"},
		{"a\x00b", "c"},
		{"", "examples"},
		{"examples", ""},
	}
	seen := map[string]pair{}
	for _, p := range specs {
		id := spec.DeriveSpecID(p.a, p.b)
		if again := spec.DeriveSpecID(p.a, p.b); again != id {
			t.Errorf("DeriveSpecID(%q, %q) gave %s then %s", p.a, p.b, id, again)
		}
		if prev, dup := seen[id]; dup {
			t.Errorf("DeriveSpecID(%q, %q) = DeriveSpecID(%q, %q)", p.a, p.b, prev.a, prev.b)
		}
		seen[id] = p
		// A plan id never collides with a spec id, and depends on both the
		// spec id and the plan name.
		for _, plan := range []string{"dev", "prod"} {
			pid := spec.DerivePlanID(id, plan)
			if again := spec.DerivePlanID(id, plan); again != pid {
				t.Errorf("DerivePlanID not deterministic")
			}
			if prev, dup := seen[pid]; dup {
				t.Errorf("plan %s of %v has the id of %v", plan, p, prev)
			}
			seen[pid] = pair{id, plan}
		}
	}
	// The spec and plan namespaces are apart: a plan id is not the spec id
	// of a registry named like the spec id.
	if spec.DerivePlanID("r", "n") == spec.DeriveSpecID("r", "n") {
		t.Error("plan and spec ids share a namespace")
	}
}

func TestAssignIDs(t *testing.T) {
	t.Run("derives what is missing", func(t *testing.T) {
		s := base()
		s.Plans[1].ID = ""
		spec.AssignIDs(s, "examples")
		if want := spec.DeriveSpecID("examples", "demo"); s.ID != want {
			t.Errorf("spec id %s, want %s", s.ID, want)
		}
		for _, p := range s.Plans {
			if want := spec.DerivePlanID(s.ID, p.Name); p.ID != want {
				t.Errorf("plan %s id %s, want %s", p.Name, p.ID, want)
			}
		}
		if err := spec.Validate(s); err != nil {
			t.Errorf("derived ids do not validate: %v", err)
		}
	})
	t.Run("keeps explicit ids", func(t *testing.T) {
		s := base()
		s.ID = "my-service"
		spec.AssignIDs(s, "examples")
		if s.ID != "my-service" || s.Plans[1].ID != "large-plan" {
			t.Errorf("explicit ids changed: %s, %s", s.ID, s.Plans[1].ID)
		}
		// A derived plan id hangs off the explicit spec id, so it follows
		// the spec across registries.
		if want := spec.DerivePlanID("my-service", "small"); s.Plans[0].ID != want {
			t.Errorf("plan id %s, want %s", s.Plans[0].ID, want)
		}
		other := base()
		other.ID = "my-service"
		spec.AssignIDs(other, "elsewhere")
		if !reflect.DeepEqual(s, other) {
			t.Error("a spec with an explicit id gets other ids from another registry")
		}
	})
	t.Run("is idempotent", func(t *testing.T) {
		s := base()
		spec.AssignIDs(s, "examples")
		once := spec.Digest(s)
		spec.AssignIDs(s, "examples")
		spec.AssignIDs(s, "elsewhere") // ids once assigned are explicit
		if spec.Digest(s) != once {
			t.Error("AssignIDs changed ids it had assigned")
		}
	})
	t.Run("registry and name change the derived ids", func(t *testing.T) {
		ids := func(registry, name string) (string, string) {
			s := base()
			s.Name = name
			spec.AssignIDs(s, registry)
			return s.ID, s.Plans[0].ID
		}
		a, ap := ids("examples", "demo")
		b, bp := ids("other", "demo")
		c, cp := ids("examples", "demo2")
		if a == b || a == c || b == c || ap == bp || ap == cp || bp == cp {
			t.Errorf("ids not distinct: %s %s %s / %s %s %s", a, b, c, ap, bp, cp)
		}
	})
}

var digestFormat = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// The digest is of the content, not of how it was written.
func TestDigestIgnoresTheWriting(t *testing.T) {
	forms := []string{
		`version: "1.0"
name: demo
description: A demo service
bindable: true
tags: [a, b]
metadata:
  displayName: Demo
  costs: {amount: 1, unit: MONTHLY}
plans:
  - name: small
    description: A small plan
    free: true
    parameters:
      - name: size
        type: int
        default: 1
        minimum: 0
        maximum: 10
`,
		// Keys in another order, other quoting and styles, comments.
		`# the same spec
plans:
- parameters:
  - {maximum: 10.0, minimum: 0, default: 1, type: int, name: size}
  free: yes
  description: "A small plan"
  name: 'small'
metadata: {costs: {unit: MONTHLY, amount: 1.0}, displayName: Demo}
tags:
- a
- b
bindable: True
description: >-
  A demo
  service
name: demo
version: '1.0'
`,
		`{"plans":[{"name":"small","description":"A small plan","free":true,"parameters":[{"name":"size","type":"int","default":1,"minimum":0,"maximum":1e1}]}],
		 "name":"demo","tags":["a","b"],"version":"1.0","bindable":true,"description":"A demo service",
		 "metadata":{"displayName":"Demo","costs":{"unit":"MONTHLY","amount":1}}}`,
	}
	forms = append(forms, b64(forms[0]), wrap(b64(forms[2]), 64, "\n"))
	var want string
	for i, f := range forms {
		s, err := spec.Parse([]byte(f))
		if err != nil {
			t.Fatalf("form %d: %v", i, err)
		}
		d := spec.Digest(s)
		if !digestFormat.MatchString(d) {
			t.Fatalf("digest %q", d)
		}
		if i == 0 {
			want = d
		} else if d != want {
			j, _ := json.Marshal(s)
			t.Errorf("form %d has digest %s, want %s: %s", i, d, want, j)
		}
	}
}

// A change in any field changes the digest. The fields are found by
// reflection, so a field added to the model is covered without a new case.
func TestDigestCoversEveryField(t *testing.T) {
	full := func() *spec.Spec {
		s := base()
		s.ID = "demo-id"
		s.Plans[0].ID = "small-plan"
		s.Plans[0].Bindable = ptr(true)
		s.Plans[0].Metadata = map[string]any{"cost": "$1"}
		p := &s.Plans[0].Parameters[0]
		p.Title, p.Description, p.Pattern, p.DisplayGroup, p.Required = "Size", "The size", "^[0-9]+$", "Resources", true
		p.Enum, p.MinLength, p.MaxLength, p.DisplayType = []any{1, 2}, ptr(1), ptr(2), "select"
		s.Provenance = &spec.Provenance{Digest: "sha256:0a", Identity: "https://ci.example/release", Issuer: "https://issuer.example", Key: "sha256:0b"}
		return s
	}
	want := spec.Digest(full())
	if spec.Digest(full()) != want {
		t.Fatal("the digest of equal specs differs")
	}
	var paths []string
	var visit func(v reflect.Value, path string)
	visit = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				visit(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Pointer:
			if v.Type().Elem().Kind() == reflect.Struct && !v.IsNil() {
				visit(v.Elem(), path) // a nested struct: each of its fields
				break
			}
			paths = append(paths, path)
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Struct {
				visit(v.Index(0), path+"[0]")
			}
			paths = append(paths, path)
		default:
			paths = append(paths, path)
		}
	}
	visit(reflect.ValueOf(full()).Elem(), "")
	for _, path := range paths {
		s := full()
		if !mutate(reflect.ValueOf(s).Elem(), path) {
			t.Errorf("%s: no way to change it; teach mutate", path)
			continue
		}
		if spec.Digest(s) == want {
			t.Errorf("changing %s does not change the digest", path)
		}
	}
	if len(paths) < 40 {
		t.Errorf("only %d fields visited", len(paths))
	}
}

// mutate changes the field at path (as visit names it) and reports whether
// it knew how.
func mutate(v reflect.Value, path string) bool {
	for path != "" {
		var name string
		if path[0] == '[' {
			v, path = v.Index(0), path[3:]
			continue
		}
		path = path[1:]
		end := len(path)
		for i, c := range path {
			if c == '.' || c == '[' {
				end = i
				break
			}
		}
		name, path = path[:end], path[end:]
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		v = v.FieldByName(name)
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Pointer:
		switch e := v.Type().Elem(); e.Kind() {
		case reflect.Bool:
			if v.IsNil() {
				v.Set(reflect.ValueOf(ptr(false)))
			} else {
				v.Set(reflect.ValueOf(ptr(!v.Elem().Bool())))
			}
		case reflect.Int:
			v.Set(reflect.ValueOf(ptr(7)))
		case reflect.Float64:
			v.Set(reflect.ValueOf(ptr(7.5)))
		default:
			return false
		}
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
	case reflect.Map:
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		v.SetMapIndex(reflect.ValueOf("added"), reflect.ValueOf(any("x")))
	case reflect.Interface:
		v.Set(reflect.ValueOf(any(fmt.Sprint(v.Interface()) + "x")))
	default:
		return false
	}
	return true
}

// Assigning ids is a change of content.
func TestDigestSeesIDs(t *testing.T) {
	s := base()
	before := spec.Digest(s)
	spec.AssignIDs(s, "examples")
	if spec.Digest(s) == before {
		t.Error("AssignIDs did not change the digest")
	}
}
