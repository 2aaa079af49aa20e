package catalog

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// catalogSchema is the schema of the 200 response of GET /v2/catalog in the
// OSB OpenAPI file, found by path and status rather than by component name,
// so the test checks what the operation promises.
func catalogSchema(t *testing.T) *openapi3.Schema {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join("testdata", "osb-openapi.yaml"))
	if err != nil {
		t.Fatalf("load OSB OpenAPI: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("OSB OpenAPI does not validate: %v", err)
	}
	item := doc.Paths.Find("/v2/catalog")
	if item == nil || item.Get == nil {
		t.Fatal("OSB OpenAPI has no GET /v2/catalog")
	}
	resp := item.Get.Responses.Status(200)
	if resp == nil || resp.Value == nil {
		t.Fatal("GET /v2/catalog has no 200 response")
	}
	media := resp.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil || media.Schema.Value == nil {
		t.Fatal("GET /v2/catalog 200 has no application/json schema")
	}
	return media.Schema.Value
}

// asJSONValue decodes v's JSON encoding into plain any, which is what a
// platform receives and what VisitJSON expects.
func asJSONValue(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal(mustJSON(t, v), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCatalogMatchesOSBOpenAPI(t *testing.T) {
	schema := catalogSchema(t)
	cases := map[string]*Catalog{
		"fixtures": mustRender(t, fixtures()),
		"empty":    mustRender(t, nil),
		"one spec": mustRender(t, fixtures()[2:]),
	}
	// A Helm chart's service: schemas given whole, its own maintenance
	// version (chart_test.go).
	chart, err := RenderOfferings([]Offering{chartOffering(t)})
	if err != nil {
		t.Fatal(err)
	}
	cases["a chart"] = chart
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if err := schema.VisitJSON(asJSONValue(t, c), openapi3.MultiErrors()); err != nil {
				t.Fatalf("rendered catalog does not match the OSB Catalog schema: %v", err)
			}
		})
	}
}

// TestOSBSchemaRejectsBrokenCatalogs proves the check above can fail: each
// breakage of a valid rendered catalog must be caught.
func TestOSBSchemaRejectsBrokenCatalogs(t *testing.T) {
	schema := catalogSchema(t)
	service := func(doc any) map[string]any {
		return doc.(map[string]any)["services"].([]any)[0].(map[string]any)
	}
	plan := func(doc any) map[string]any {
		return service(doc)["plans"].([]any)[0].(map[string]any)
	}
	breakages := map[string]func(doc any){
		"service without id":          func(doc any) { delete(service(doc), "id") },
		"service without plans":       func(doc any) { delete(service(doc), "plans") },
		"service without bindable":    func(doc any) { delete(service(doc), "bindable") },
		"bindable not a boolean":      func(doc any) { service(doc)["bindable"] = "yes" },
		"unknown requires permission": func(doc any) { service(doc)["requires"] = []any{"root"} },
		"plan without name":           func(doc any) { delete(plan(doc), "name") },
		"free not a boolean":          func(doc any) { plan(doc)["free"] = "true" },
		"maintenance_info no version": func(doc any) { plan(doc)["maintenance_info"] = map[string]any{} },
		"services not a list":         func(doc any) { doc.(map[string]any)["services"] = map[string]any{} },
	}
	c := mustRender(t, fixtures())
	for name, breakIt := range breakages {
		t.Run(name, func(t *testing.T) {
			doc := asJSONValue(t, c)
			breakIt(doc)
			if err := schema.VisitJSON(doc); err == nil {
				t.Fatal("broken catalog passed the OSB Catalog schema")
			}
		})
	}
}
