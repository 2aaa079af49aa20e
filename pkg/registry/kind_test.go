package registry_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
)

// Every credential field a kind declares is under its block's auth and
// ends in _env or _file: the one convention terraform/registries.tf
// derives the reconcile function's secrets by (every key of a source
// block's auth ending in _env or _file). A field that broke it would name
// a secret terraform never creates. And every field of a block that looks
// like one (a string ending in _env or _file, anywhere in the block) is
// declared, so a secret cannot hide from CredentialRefs either.
func TestKindCredentialsFollowTerraformsConvention(t *testing.T) {
	if len(registry.Kinds()) == 0 {
		t.Fatal("no kind is registered")
	}
	for _, k := range registry.Kinds() {
		declared := map[string]bool{}
		for _, p := range k.Credentials {
			declared[p] = true
			if !strings.HasPrefix(p, "auth.") || strings.Count(p, ".") != 1 {
				t.Errorf("%s: credential field %s is not a key of the block's auth", k.Type, p)
			}
			if !strings.HasSuffix(p, "_env") && !strings.HasSuffix(p, "_file") {
				t.Errorf("%s: credential field %s ends in neither _env nor _file", k.Type, p)
			}
			if ft, ok := jsonPath(reflect.TypeOf(k.New()), p); !ok || ft.Kind() != reflect.String {
				t.Errorf("%s: credential field %s is not a string field of its block", k.Type, p)
			}
		}
		for _, p := range secretLookingFields(reflect.TypeOf(k.New()), "") {
			if !declared[p] {
				t.Errorf("%s: field %s names a secret by its name but is not among the kind's Credentials", k.Type, p)
			}
		}
	}
}

// Every registered kind runs the conformance suite (conformance_test.go):
// a driver named after its type, or after its type and a variant
// ("helm-oci").
func TestEveryKindRunsTheConformanceSuite(t *testing.T) {
	for _, k := range registry.Kinds() {
		found := false
		for _, d := range drivers {
			if d.name == k.Type || strings.HasPrefix(d.name, k.Type+"-") {
				found = true
			}
		}
		if !found {
			t.Errorf("kind %s has no driver in the conformance suite", k.Type)
		}
	}
}

// jsonPath is the type of the field a dotted JSON path names in t.
func jsonPath(t reflect.Type, p string) (reflect.Type, bool) {
	for _, part := range strings.Split(p, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil, false
		}
		found := false
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == part {
				t, found = f.Type, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return t, true
}

// secretLookingFields are the dotted JSON paths of t's string fields whose
// names end in _env or _file.
func secretLookingFields(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		p := prefix + name
		if f.Type.Kind() == reflect.String && (strings.HasSuffix(name, "_env") || strings.HasSuffix(name, "_file")) {
			out = append(out, p)
		}
		out = append(out, secretLookingFields(f.Type, p+".")...)
	}
	return out
}
