package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
)

// A source's config shape is declared once, in its own file of
// pkg/registry (registry.Register); pkg/config loads it generically. This
// fails when pkg/config declares a source's shape again: a struct field
// named after a registered type (the old `OCI *OCI json:"oci"`), or a
// struct whose JSON fields are a registered block's (or its auth's), all
// of them or at least two and nothing else.
func TestConfigDeclaresNoSourceShape(t *testing.T) {
	shapes := map[string][]string{} // "oci", "oci.auth" -> JSON names
	types := map[string]bool{}
	for _, k := range registry.Kinds() {
		types[k.Type] = true
		collectShapes(reflect.TypeOf(k.New()), k.Type, shapes)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			checked++
			var fields []string
			for _, fl := range st.Fields.List {
				if fl.Tag == nil {
					continue
				}
				tag, _ := strconv.Unquote(fl.Tag.Value)
				name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
				if name == "" || name == "-" {
					continue
				}
				fields = append(fields, name)
				if types[name] {
					t.Errorf("%s: %s has a field %q, the block of a registered source: declare it in pkg/registry (registry.Register), not here", fset.Position(fl.Pos()), ts.Name.Name, name)
				}
			}
			if len(fields) == 0 {
				return true
			}
			for where, shape := range shapes {
				all := true
				for _, f := range fields {
					all = all && slices.Contains(shape, f)
				}
				covers := true
				for _, f := range shape {
					covers = covers && slices.Contains(fields, f)
				}
				if covers || (all && len(fields) >= 2) {
					t.Errorf("%s: %s has the JSON fields of registry's %s block (%v): a source's shape is declared once, in pkg/registry", fset.Position(ts.Pos()), ts.Name.Name, where, shape)
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("found no struct type in pkg/config to check")
	}
}

// collectShapes records the JSON names of t's fields under where, and of
// the structs below it.
func collectShapes(t reflect.Type, where string, out map[string][]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		names = append(names, name)
		collectShapes(f.Type, where+"."+name, out)
	}
	if len(names) > 0 {
		out[where] = names
	}
}
