//go:build deploycheck

package terraform_test

// Firestore: every query the store runs has its index, every expiring
// document its TTL policy, and nothing that holds data is destroyed by
// default.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

// The store's queries (pkg/store/queries.go, itself checked against the
// store's code) and the module's composite indexes match both ways.
func TestEveryQueryHasItsIndex(t *testing.T) {
	t.Parallel()
	m := planOf(t, reference(t))
	queriesOnlyInStore(t)
	type field struct{ Path, Mode string } // Mode: ASCENDING, DESCENDING, CONTAINS
	var indexes [][]field
	var indexColl []string
	used := map[int]bool{}
	db := m.instance("google_firestore_database.main", "0")
	for _, ix := range m.ofType("google_firestore_index") {
		if ix.str("database") != db.str("name") {
			t.Errorf("%s is not on the module's database", ix.addr())
		}
		if s := ix.str("query_scope"); s != "" && s != "COLLECTION" {
			t.Errorf("%s: query_scope %s; the store runs no collection-group query", ix.addr(), s)
		}
		var fs []field
		for _, f := range ix.Blocks["fields"] {
			mode := f.str("order")
			if f.str("array_config") == "CONTAINS" {
				mode = "CONTAINS"
			}
			fs = append(fs, field{f.str("field_path"), mode})
		}
		if n := len(fs); n > 0 && fs[n-1].Path == store.DocumentIDField {
			fs = fs[:n-1]
		}
		indexes = append(indexes, fs)
		indexColl = append(indexColl, ix.str("collection"))
	}
	exempt := map[string]bool{} // collection/field without single-field indexes
	for _, f := range m.ofType("google_firestore_field") {
		if ic := f.one("index_config"); ic != nil && len(ic.Blocks["indexes"]) == 0 {
			exempt[f.str("collection")+"/"+f.str("field")] = true
		}
	}
	for _, q := range store.Queries {
		var eq, rng []field
		var order []field
		fields := map[string]bool{}
		for _, f := range q.Filters {
			fields[f.Field] = true
			switch f.Op {
			case store.OpEqual, store.OpIn:
				eq = append(eq, field{f.Field, "ASCENDING"})
			case store.OpArrayContains, store.OpArrayContainsAny:
				eq = append(eq, field{f.Field, "CONTAINS"})
			default:
				rng = append(rng, field{f.Field, "ASCENDING"})
			}
		}
		for _, o := range q.OrderBy {
			if o.Field == store.DocumentIDField {
				continue
			}
			fields[o.Field] = true
			order = append(order, field{o.Field, o.Direction})
		}
		for f := range fields {
			if exempt[q.Collection+"/"+f] {
				t.Errorf("query %s filters or orders on %s/%s, whose single-field indexes firestore.tf exempts", q.Func, q.Collection, f)
			}
		}
		if len(fields) <= 1 {
			continue // served by automatic single-field indexes
		}
		// The composite index Firestore asks for: equalities first (any
		// order), then the orderings, then inequalities not ordered on.
		tail := append([]field(nil), order...)
		for _, r := range rng {
			ordered := false
			for _, o := range order {
				ordered = ordered || o.Path == r.Path
			}
			if !ordered {
				tail = append(tail, r)
			}
		}
		found := false
		for i, ix := range indexes {
			if indexColl[i] != q.Collection || len(ix) != len(eq)+len(tail) {
				continue
			}
			head := map[field]bool{}
			for _, f := range ix[:len(eq)] {
				if f.Mode == "DESCENDING" {
					f.Mode = "ASCENDING" // equality is served either way
				}
				head[f] = true
			}
			ok := true
			for _, f := range eq {
				ok = ok && head[f]
			}
			ok = ok && reflect.DeepEqual(ix[len(eq):], tail) || ok && len(tail) == 0 && len(ix) == len(eq)
			if ok {
				found, used[i] = true, true
			}
		}
		if !found {
			t.Errorf("query %s (%s, filters %v, order %v) has no composite index in firestore.tf; want fields %v then %v", q.Func, q.Collection, q.Filters, q.OrderBy, eq, tail)
		}
	}
	for i := range indexes {
		if !used[i] {
			t.Errorf("composite index on %s %v serves no query in store.Queries: remove it or declare the query", indexColl[i], indexes[i])
		}
	}
}

// queriesOnlyInStore fails for a Firestore query in deployed code outside
// pkg/store, where store.Queries (and so the indexes) would not see it.
func queriesOnlyInStore(t *testing.T) {
	t.Helper()
	queryMethods := map[string]bool{"Where": true, "WherePath": true, "WhereEntity": true, "OrderBy": true, "OrderByPath": true,
		"FindNearest": true, "FindNearestPath": true, "CollectionGroup": true, "Pipeline": true}
	fset := token.NewFileSet()
	for _, dir := range []string{"../pkg", "../functions"} {
		err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if info.IsDir() && filepath.ToSlash(path) == "../pkg/store" {
				return filepath.SkipDir
			}
			if info.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			usesFirestore := false
			for _, imp := range f.Imports {
				usesFirestore = usesFirestore || imp.Path.Value == `"cloud.google.com/go/firestore"`
			}
			if !usesFirestore {
				return nil
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && queryMethods[sel.Sel.Name] {
						t.Errorf("%s: a Firestore query (%s) outside pkg/store: move it to the store and declare it in store.Queries, so its index is deployed", fset.Position(call.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// expiring maps the Go types whose documents carry an expires_at timestamp
// to their TTL policy. A new type with such a field fails until it is
// mapped here and its policy is added to firestore.tf (or it is listed as
// nested, where a TTL would delete the enclosing document).
var expiring = map[string]struct{ Collection, Field string }{
	"api.Operation":   {store.OperationsCollection, "expires_at"},
	"store.Change":    {store.ChangesCollection, "expires_at"},
	"store.Tombstone": {store.TombstonesCollection, "expires_at"},
}

var nestedExpiry = map[string]string{
	"api.Lease": "registries/{name}.lease: a TTL on it would delete the registry's status",
}

func TestTTLPolicies(t *testing.T) {
	t.Parallel()
	m := planOf(t, reference(t))
	// Every struct field tagged firestore:"expires_at" in the module's Go code.
	fset := token.NewFileSet()
	var typesFound []string
	err := filepath.Walk("..", func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() && (info.Name() == ".git" || info.Name() == "terraform") {
			return filepath.SkipDir
		}
		if info.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
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
			for _, fl := range st.Fields.List {
				if fl.Tag == nil {
					continue
				}
				tag, _ := strconv.Unquote(fl.Tag.Value)
				if name, _, _ := strings.Cut(reflect.StructTag(tag).Get("firestore"), ","); name == "expires_at" {
					typesFound = append(typesFound, f.Name.Name+"."+ts.Name.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, typ := range typesFound {
		if e, ok := expiring[typ]; ok {
			want[e.Collection+"/"+e.Field] = true
			continue
		}
		if _, ok := nestedExpiry[typ]; ok {
			continue
		}
		t.Errorf("%s has a firestore expires_at field: add its TTL policy to firestore.tf and map it in this test's expiring (or nestedExpiry)", typ)
	}
	for typ := range expiring {
		if !contains(typesFound, typ) {
			t.Errorf("%s no longer has an expires_at field; update expiring and firestore.tf", typ)
		}
	}
	// The field the code writes is the one mapped.
	if f, ok := reflect.TypeOf(api.Operation{}).FieldByName("ExpiresAt"); !ok || f.Tag.Get("firestore") != expiring["api.Operation"].Field {
		t.Error("api.Operation.ExpiresAt is not stored as expires_at")
	}
	got := map[string]bool{}
	for _, f := range m.ofType("google_firestore_field") {
		if f.one("ttl_config") == nil {
			continue
		}
		key := f.str("collection") + "/" + f.str("field")
		got[key] = true
		for _, data := range []string{store.SpecsCollection, store.InstancesCollection, store.RegistriesCollection, store.MetaCollection} {
			if f.str("collection") == data {
				t.Errorf("%s: a TTL policy on %s would delete data", f.addr(), key)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TTL policies %v, want %v", got, want)
	}
}

// Nothing that holds data is destroyed by default; the database can be
// recovered to any minute of the last 7 days, and may be multi-region.
func TestDataIsProtected(t *testing.T) {
	t.Parallel()
	m := planOf(t, reference(t))
	db := m.instance("google_firestore_database.main", "0")
	if db == nil {
		t.Fatal("no google_firestore_database.main")
	}
	if db.str("type") != "FIRESTORE_NATIVE" {
		t.Errorf("Firestore type %s, want FIRESTORE_NATIVE", db.str("type"))
	}
	if db.str("deletion_policy") != "ABANDON" {
		t.Error("terraform destroy would delete the Firestore database (deletion_policy)")
	}
	if db.str("delete_protection_state") != "DELETE_PROTECTION_ENABLED" {
		t.Error("the Firestore database is not delete-protected by default")
	}
	if db.str("point_in_time_recovery_enablement") != "POINT_IN_TIME_RECOVERY_ENABLED" {
		t.Error("the Firestore database has no point-in-time recovery by default")
	}
	if db.str("location_id") != "europe-west1" {
		t.Errorf("the database is in %s, want the region by default", db.str("location_id"))
	}
	for _, s := range m.ofType("google_secret_manager_secret") {
		if !isTrue(s.Attrs["deletion_protection"]) {
			t.Errorf("%s is not protected from deletion by default", s.addr())
		}
	}
	for _, s := range m.ofType("google_project_service") {
		if v := s.Attrs["disable_on_destroy"]; !v.IsKnown() || isTrue(v) {
			t.Errorf("%s would disable its API on destroy", s.addr())
		}
	}
	// The source bucket holds archives terraform rebuilds; the config
	// bucket holds the registries file's generations.
	for _, b := range m.ofType("google_storage_bucket") {
		if isTrue(b.Attrs["force_destroy"]) != (b.Key == "" && strings.HasSuffix(b.str("name"), "-source")) {
			t.Errorf("%s: force_destroy %v", b.addr(), isTrue(b.Attrs["force_destroy"]))
		}
	}
	if v := m.instance("google_storage_bucket.config", "").one("versioning"); v == nil || !isTrue(v.Attrs["enabled"]) {
		t.Error("the config bucket keeps no older registries files (versioning)")
	}
	// A multi-region database where asked.
	if db := planOf(t, domain).instance("google_firestore_database.main", "0"); db == nil || db.str("location_id") != "nam5" {
		t.Errorf("firestore_location = nam5 does not place the database in nam5")
	}
}
