package store_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/store"
)

// TestQueriesAreDeclared parses this package's source, finds every
// Firestore query chain (a collection followed by Where/OrderBy/Limit
// calls) and compares them with store.Queries, which the deployment's
// indexes are derived from and checked against. A query added to the code
// without being declared fails here, and so does a declared query the code
// no longer runs.
func TestQueriesAreDeclared(t *testing.T) {
	found, problems := scanQueries(t, ".")
	for _, p := range problems {
		t.Error(p)
	}
	got := map[string]int{}
	for _, q := range found {
		got[queryKey(q)]++
	}
	want := map[string]int{}
	for _, q := range store.Queries {
		want[queryKey(q)]++
	}
	for k, n := range got {
		if want[k] < n {
			t.Errorf("query in the code but not in store.Queries (pkg/store/queries.go): %s", k)
		}
	}
	for k, n := range want {
		if got[k] < n {
			t.Errorf("query in store.Queries but not in the code: %s", k)
		}
	}
	if len(found) == 0 {
		t.Fatal("no query found in the package source: the scanner is broken")
	}
}

// TestScannerSeesQueries keeps the scanner honest: a package with a query
// of every supported shape, one built in two statements (which cannot be
// declared) and one with an unsupported method.
func TestScannerSeesQueries(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import "cloud.google.com/go/firestore"

const things = "things"

type S struct{ client *firestore.Client }

func (s *S) coll() *firestore.CollectionRef { return s.client.Collection(things) }

func (s *S) A() { _ = s.coll().Where("a", "==", 1).Where("b", ">", 2).OrderBy("b", firestore.Desc).Limit(3) }

func (s *S) B() { _ = s.client.Collection("other").OrderBy(firestore.DocumentID, firestore.Asc) }

func (s *S) C() {
	q := s.coll().Where("a", "==", 1)
	_ = q.Where("c", "==", 2)
}

func (s *S) D() { _ = s.coll().WherePath(firestore.FieldPath{"x"}, "==", 1) }
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	found, problems := scanQueries(t, dir)
	var keys []string
	for _, q := range found {
		keys = append(keys, queryKey(q))
	}
	sort.Strings(keys)
	want := []string{
		queryKey(store.Query{Func: "A", Collection: "things",
			Filters: []store.Filter{{Field: "a", Op: "=="}, {Field: "b", Op: ">"}},
			OrderBy: []store.Order{{Field: "b", Direction: store.Descending}}, Limit: 3}),
		queryKey(store.Query{Func: "B", Collection: "other",
			OrderBy: []store.Order{{Field: store.DocumentIDField, Direction: store.Ascending}}}),
		queryKey(store.Query{Func: "C", Collection: "things", Filters: []store.Filter{{Field: "a", Op: "=="}}}),
	}
	sort.Strings(want)
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("found\n  %s\nwant\n  %s", strings.Join(keys, "\n  "), strings.Join(want, "\n  "))
	}
	if len(problems) != 2 {
		t.Fatalf("want 2 problems (a query continued from a variable, WherePath), got %d: %q", len(problems), problems)
	}
	if !strings.Contains(problems[0]+problems[1], "C:") || !strings.Contains(problems[0]+problems[1], "WherePath") {
		t.Errorf("problems do not name the function and the method: %q", problems)
	}
}

func queryKey(q store.Query) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", q.Func, q.Collection)
	for _, f := range q.Filters {
		fmt.Fprintf(&b, " where %s %s", f.Field, f.Op)
	}
	for _, o := range q.OrderBy {
		fmt.Fprintf(&b, " order by %s %s", o.Field, o.Direction)
	}
	if q.Limit != 0 {
		fmt.Fprintf(&b, " limit %d", q.Limit)
	}
	return b.String()
}

// queryMethods are firestore.Query's chainable methods. The declared ones
// are understood; the others fail the scan until Query can describe them.
var queryMethods = map[string]bool{
	"Where": true, "OrderBy": true, "Limit": true,
	"WherePath": false, "WhereEntity": false, "OrderByPath": false, "LimitToLast": false,
	"Offset": false, "StartAt": false, "StartAfter": false, "EndAt": false, "EndBefore": false,
	"Select": false, "SelectPaths": false, "FindNearest": false, "FindNearestPath": false,
}

// scanQueries parses the non-test Go files of dir and returns the query
// chains in them, with a problem for everything it cannot turn into a
// declared query.
func scanQueries(t *testing.T, dir string) ([]store.Query, []string) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}

	// String constants, for collection names and fields spelled as constants.
	consts := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := stringLit(vs.Values[i]); ok {
							consts[n.Name] = s
						}
					}
				}
			}
		}
	}
	str := func(e ast.Expr) (string, bool) {
		if s, ok := stringLit(e); ok {
			return s, true
		}
		if id, ok := e.(*ast.Ident); ok {
			s, ok := consts[id.Name]
			return s, ok
		}
		return "", false
	}
	// collectionOf resolves X.Collection(NAME) to NAME.
	collectionOf := func(e ast.Expr) (string, bool) {
		call, ok := e.(*ast.CallExpr)
		if !ok {
			return "", false
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Collection" || len(call.Args) != 1 {
			return "", false
		}
		return str(call.Args[0])
	}
	// Helper methods such as specs() that return one collection.
	helpers := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || len(fd.Body.List) != 1 {
				continue
			}
			if ret, ok := fd.Body.List[0].(*ast.ReturnStmt); ok && len(ret.Results) == 1 {
				if c, ok := collectionOf(ret.Results[0]); ok {
					helpers[fd.Name.Name] = c
				}
			}
		}
	}
	rootCollection := func(e ast.Expr) (string, bool) {
		if c, ok := collectionOf(e); ok {
			return c, true
		}
		if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 0 {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				c, ok := helpers[sel.Sel.Name]
				return c, ok
			}
		}
		return "", false
	}

	var out []store.Query
	var problems []string
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn := fd.Name.Name
			inner := map[*ast.CallExpr]bool{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || inner[call] {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "CollectionGroup" || sel.Sel.Name == "Pipeline") {
					problems = append(problems, fmt.Sprintf("%s: %s: %s queries cannot be declared in store.Queries yet", fset.Position(call.Pos()), fn, sel.Sel.Name))
					return true
				}
				var steps []*ast.CallExpr
				cur := ast.Expr(call)
				for {
					c, ok := cur.(*ast.CallExpr)
					if !ok {
						break
					}
					sel, ok := c.Fun.(*ast.SelectorExpr)
					if !ok {
						break
					}
					if _, isStep := queryMethods[sel.Sel.Name]; !isStep {
						break
					}
					steps = append([]*ast.CallExpr{c}, steps...)
					inner[c] = true
					cur = sel.X
				}
				if len(steps) == 0 {
					return true
				}
				coll, ok := rootCollection(cur)
				if !ok {
					// Limit alone on something that is not a collection is
					// not a Firestore query.
					if len(steps) == 1 && steps[0].Fun.(*ast.SelectorExpr).Sel.Name == "Limit" {
						return true
					}
					problems = append(problems, fmt.Sprintf("%s: %s: a query continued from an expression that is not a collection; build each query in one expression from its collection so it can be declared", fset.Position(call.Pos()), fn))
					return true
				}
				q := store.Query{Func: fn, Collection: coll}
				declarable := true
				for _, s := range steps {
					m := s.Fun.(*ast.SelectorExpr).Sel.Name
					bad := func(why string) {
						declarable = false
						problems = append(problems, fmt.Sprintf("%s: %s: %s: %s", fset.Position(s.Pos()), fn, m, why))
					}
					switch m {
					case "Where":
						field, ok1 := str(s.Args[0])
						op, ok2 := str(s.Args[1])
						if !ok1 || !ok2 {
							bad("field and operator must be constants")
							continue
						}
						q.Filters = append(q.Filters, store.Filter{Field: field, Op: op})
					case "OrderBy":
						field, ok := str(s.Args[0])
						if isSel(s.Args[0], "firestore", "DocumentID") {
							field, ok = store.DocumentIDField, true
						}
						dir := ""
						switch {
						case isSel(s.Args[1], "firestore", "Asc"):
							dir = store.Ascending
						case isSel(s.Args[1], "firestore", "Desc"):
							dir = store.Descending
						}
						if !ok || dir == "" {
							bad("field and direction must be constants")
							continue
						}
						q.OrderBy = append(q.OrderBy, store.Order{Field: field, Direction: dir})
					case "Limit":
						// A limit never needs an index: a literal is
						// recorded as is, anything else as VariableLimit.
						q.Limit = store.VariableLimit
						if lit, ok := s.Args[0].(*ast.BasicLit); ok {
							n, err := strconv.Atoi(lit.Value)
							if err != nil {
								bad("the limit must be an integer")
								continue
							}
							q.Limit = n
						}
					case "Select":
						// A projection reads fewer fields of the same
						// documents: it needs no index.
					default:
						bad("not describable by store.Query yet: extend Query, this scanner and the index check")
					}
				}
				if declarable {
					out = append(out, q)
				}
				return true
			})
		}
	}
	return out, problems
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func isSel(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}
