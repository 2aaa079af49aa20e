package catalog

import (
	"context"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
	"github.com/specsync/specsync/pkg/spec"
)

// chartOffering is a service as a Helm chart makes it: fetched from an
// in-process chart repository by the helm source, with a draft-07 values
// schema and two plans.
func chartOffering(t *testing.T) Offering {
	t.Helper()
	repo := helmtest.NewRepo(t)
	repo.Add(t, helmtest.Chart{
		Name: "pg-chart", Version: "12.1.0+vendor.2", Description: "PostgreSQL, packaged",
		Home: "https://example.com/pg", Icon: "https://example.com/pg.png", Keywords: []string{"database"},
		Annotations: map[string]string{
			registry.PlansAnnotation: "- {name: small, description: One node}\n- {name: large, description: Three nodes, free: false}\n",
		},
		Schema: `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "required": ["auth"],
		  "properties": {
		    "replicas": {"type": "integer", "minimum": 1, "default": 1},
		    "auth": {"type": "object", "properties": {"database": {"type": "string", "pattern": "^[a-z]+$"}}, "additionalProperties": false},
		    "ratio": {"type": "number", "exclusiveMaximum": 1}
		  }, "additionalProperties": false}`,
	})
	src := repo.Source(t, registry.HelmConfig{})
	l, err := src.Fetch(context.Background(), registry.FetchOptions{})
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Err != nil {
		t.Fatalf("fetch: %v %+v", err, l)
	}
	s := l.Entries[0].Spec
	spec.AssignIDs(s, "charts")
	return Offering{Spec: s, Generation: 3}
}

// A chart-derived service renders as a valid OSB service: maintenance_info
// is the chart's version (not the generation's), and the values schema is
// each plan's create and update schema, valid draft-04, checking what the
// chart checks.
func TestChartServiceRenders(t *testing.T) {
	o := chartOffering(t)
	c, err := RenderOfferings(append([]Offering{o}, offerings(fixtures(), 1)...))
	if err != nil {
		t.Fatal(err)
	}
	if err := catalogSchema(t).VisitJSON(asJSONValue(t, c), openapi3.MultiErrors()); err != nil {
		t.Fatalf("a catalog with a chart's service does not match the OSB Catalog schema: %v", err)
	}
	svc := findService(t, c, "pg-chart")
	if svc.Bindable || svc.Metadata["imageUrl"] != "https://example.com/pg.png" || svc.Metadata["documentationUrl"] != "https://example.com/pg" || !slices.Equal(svc.Tags, []string{"database"}) {
		t.Errorf("service %+v", svc)
	}
	for _, name := range []string{"small", "large"} {
		p := findPlan(t, svc, name)
		if p.MaintenanceInfo == nil || p.MaintenanceInfo.Version != "12.1.0+vendor.2" {
			t.Errorf("%s: maintenance_info %+v, want the chart's version", name, p.MaintenanceInfo)
		}
		si := p.Schemas.ServiceInstance
		if p.Schemas.ServiceBinding != nil || si.Create.Parameters["$schema"] != SchemaDraft || si.Update.Parameters["$schema"] != SchemaDraft {
			t.Fatalf("%s: schemas %+v", name, p.Schemas)
		}
		create, update := compile(t, si.Create.Parameters), compile(t, si.Update.Parameters)
		for _, tc := range []struct {
			schema *jsonschema.Schema
			value  string
			want   []string
		}{
			{create, `{}`, nil}, // values.yaml supplies what the chart requires
			{create, `{"replicas": 2, "auth": {"database": "app"}, "ratio": 0.5}`, nil},
			{create, `{"replicas": 0}`, []string{"minimum"}},
			{create, `{"ratio": 1}`, []string{"exclusiveMaximum"}}, // draft-07's, in draft-04 terms
			{create, `{"auth": {"database": "App"}}`, []string{"pattern"}},
			{create, `{"replicaz": 2}`, []string{"additionalProperties"}},
			{update, `{"replicas": 3}`, nil},
		} {
			got := failedKeywords(t, tc.schema, tc.value)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: %s: failed keywords %v, want %v", name, tc.value, got, tc.want)
			}
		}
		if _, ok := si.Update.Parameters["properties"].(map[string]any)["replicas"].(map[string]any)["default"]; ok {
			t.Errorf("%s: the update schema carries a default", name)
		}
	}
	// The same service through the piece the cache and the feed use.
	if p := NewPiece(o); p.err != nil {
		t.Fatal(p.err)
	}
}
