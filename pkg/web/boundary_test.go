package web_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const osbPath = "github.com/specsync/specsync/pkg/osb"

// brokerAPI is what of pkg/osb may be named outside it: the broker, its
// configuration and its views. Plumbing (errors, methods, body limits,
// authorization, credentials, request identity, the id contract) is this
// package's; a name missing here that something outside pkg/osb uses is
// plumbing put back into the broker, or broker API to add here on
// purpose.
var brokerAPI = map[string]bool{
	"NewBroker":              true,
	"Broker":                 true,
	"Config":                 true,
	"View":                   true,
	"ServiceFacts":           true,
	"DefaultViewName":        true,
	"Cache":                  true,
	"Rendered":               true,
	"DefaultMaxCatalogBytes": true,
}

// brokerWiring is where the broker is built and served: the functions'
// entry points and the local stack. No other package imports pkg/osb.
var brokerWiring = []string{"functions", "emulator/stack"}

// TestOnlyTheWiringImportsTheBroker keeps pkg/osb the OSB surface alone:
// outside pkg/osb, only the wiring imports it, and only for its
// brokerAPI. A hook, the bootstrap or the CLI that wants an error body,
// a method check or a header parsed takes it from here.
func TestOnlyTheWiringImportsTheBroker(t *testing.T) {
	root := moduleRoot(t)
	exported := exportedNames(t, filepath.Join(root, "pkg", "osb"))
	for name := range brokerAPI {
		if !exported[name] {
			t.Errorf("brokerAPI names osb.%s, which pkg/osb does not export: drop it", name)
		}
	}
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "pkg/osb" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		local := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == osbPath {
				local = "osb"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			return nil
		}
		if !inWiring(rel) {
			t.Errorf("%s imports pkg/osb: only the broker's wiring (%s) does; take HTTP plumbing from pkg/web", rel, strings.Join(brokerWiring, ", "))
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && !brokerAPI[sel.Sel.Name] {
				t.Errorf("%s:%d uses osb.%s, which is not the broker's API (brokerAPI): plumbing belongs in pkg/web", rel, fset.Position(sel.Pos()).Line, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files from %s; the check would be vacuous", files, root)
	}
}

func inWiring(rel string) bool {
	for _, w := range brokerWiring {
		if strings.HasPrefix(rel, w+"/") {
			return true
		}
	}
	return false
}

// moduleRoot is the directory of go.mod above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package")
		}
		dir = parent
	}
}

// exportedNames is what the package in dir declares at top level and
// exports (its non-test files).
func exportedNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					out[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	if len(out) < 5 {
		t.Fatalf("pkg/osb exports %d names; the parser read nothing", len(out))
	}
	return out
}
