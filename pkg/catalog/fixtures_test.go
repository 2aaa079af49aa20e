package catalog

import (
	"encoding/json"
	"testing"

	"github.com/specsync/specsync/pkg/spec"
)

// fixtures are hand-written specs that between them use every parameter
// type, required, secret, updatable and bind parameters, plans with and
// without parameters, bindable overrides, updates_to and platforms.
func fixtures() []*spec.Spec {
	specs := []*spec.Spec{
		{
			Name:        "postgresql",
			Description: "PostgreSQL database",
			Bindable:    true,
			Async:       "optional",
			Tags:        []string{"database", "sql"},
			Metadata: map[string]any{
				"displayName":         "PostgreSQL (APB)",
				"imageUrl":            "https://example.com/pg.png",
				"longDescription":     "A PostgreSQL server in a container.",
				"providerDisplayName": "Example, Inc.",
				"documentationUrl":    "https://example.com/docs",
				"supportUrl":          "https://example.com/support",
			},
			Platforms: []spec.Platform{
				{OS: "linux", Architecture: "arm64"},
				{OS: "linux", Architecture: "amd64"},
				{OS: "linux", Architecture: "arm", Variant: "v7"},
				{OS: "linux", Architecture: "amd64"},
			},
			Plans: []spec.Plan{
				{
					Name:        "dev",
					Description: "Single node, ephemeral storage",
					Metadata:    map[string]any{"bullets": []any{"1 GB RAM"}, "cost": 0.0},
					UpdatesTo:   []string{"prod"},
					Parameters: []spec.Parameter{
						{Name: "db_name", Title: "Database name", Description: "Name of the database", Type: "string",
							Required: true, Pattern: "^[a-z][a-z0-9_]*$", MinLength: new(1), MaxLength: new(63)},
						{Name: "db_password", Title: "Password", Type: "string", Required: true, DisplayType: "password", MinLength: new(8)},
						{Name: "version", Type: "enum", Enum: []any{"15", "16", "17"}, Default: "17", DisplayGroup: "Server"},
						{Name: "max_connections", Type: "int", Default: 100.0, Updatable: true, Minimum: new(10.0), Maximum: new(1000.0), DisplayGroup: "Server"},
						{Name: "replicas", Type: "integer", Default: 1.0, Minimum: new(0.0)},
						{Name: "cpu", Type: "number", Updatable: true, Minimum: new(0.25), Maximum: new(8.0)},
						{Name: "memory_ratio", Type: "float", Default: 0.5, Updatable: true},
						{Name: "backups", Type: "bool", Default: true, Updatable: true},
						{Name: "tls", Type: "boolean"},
						{Name: "settings", Type: "object", Default: map[string]any{"work_mem": "4MB"}},
						{Name: "extensions", Type: "array", Default: []any{"pgcrypto"}},
					},
					BindParameters: []spec.Parameter{
						{Name: "role", Type: "enum", Enum: []any{"readonly", "readwrite"}, Required: true},
						{Name: "role_password", Type: "string", DisplayType: "password"},
					},
				},
				{
					Name:        "prod",
					Description: "Three nodes, persistent storage",
					Free:        new(false),
				},
			},
		},
		{
			Name:        "redis",
			Description: "Redis cache",
			Bindable:    false,
			Plans: []spec.Plan{
				{
					Name:           "bindable",
					Description:    "Bindable despite the service default",
					Bindable:       new(true),
					Free:           new(true),
					BindParameters: []spec.Parameter{{Name: "prefix", Type: "string", Default: "app:"}},
				},
				{
					// bind_parameters on a plan that cannot be bound: OSB uses
					// the binding schema only for bindable plans.
					Name:           "unbound",
					Description:    "Not bindable",
					BindParameters: []spec.Parameter{{Name: "prefix", Type: "string"}},
				},
			},
		},
		{
			Name:        "mq",
			Description: "Message queue",
			Bindable:    true,
			Plans: []spec.Plan{
				{Name: "basic", Description: "No parameters at all", Bindable: new(false)},
				{
					Name:        "tuned",
					Description: "Parameters, none updatable",
					Parameters:  []spec.Parameter{{Name: "queues", Type: "int", Default: 4.0}},
				},
			},
		},
	}
	for _, s := range specs {
		spec.AssignIDs(s, "test")
	}
	return specs
}

func mustRender(t testing.TB, specs []*spec.Spec) *Catalog {
	t.Helper()
	c, err := Render(specs)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return c
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

func findService(t *testing.T, c *Catalog, name string) Service {
	t.Helper()
	for _, s := range c.Services {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("service %q not in catalog", name)
	return Service{}
}

func findPlan(t *testing.T, s Service, name string) Plan {
	t.Helper()
	for _, p := range s.Plans {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("plan %q not in service %q", name, s.Name)
	return Plan{}
}
