package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/spec"
)

func TestPlanMapping(t *testing.T) {
	c := mustRender(t, fixtures())
	cases := []struct {
		service, plan     string
		free, bindable    bool
		planUpdateable    *bool // nil: inherits the service's
		create, update    bool  // schemas present
		bind, schemasNone bool
	}{
		// free unset -> true; bindable unset -> the spec's true; has updates_to.
		{service: "postgresql", plan: "dev", free: true, bindable: true, create: true, update: true, bind: true},
		// free false kept; no updates_to while a sibling has them -> false.
		{service: "postgresql", plan: "prod", free: false, bindable: true, planUpdateable: new(false), schemasNone: true},
		// plan bindable true overrides the spec's false.
		{service: "redis", plan: "bindable", free: true, bindable: true, bind: true},
		// bindable inherited false: its bind_parameters cannot be used.
		{service: "redis", plan: "unbound", free: true, bindable: false, schemasNone: true},
		// plan bindable false overrides the spec's true; no parameters.
		{service: "mq", plan: "basic", free: true, bindable: false, schemasNone: true},
		// parameters but none updatable: create only.
		{service: "mq", plan: "tuned", free: true, bindable: true, create: true},
	}
	for _, tc := range cases {
		t.Run(tc.service+"/"+tc.plan, func(t *testing.T) {
			p := findPlan(t, findService(t, c, tc.service), tc.plan)
			if p.Free != tc.free || p.Bindable != tc.bindable {
				t.Errorf("free %v bindable %v, want %v %v", p.Free, p.Bindable, tc.free, tc.bindable)
			}
			if fmt.Sprint(deref(p.PlanUpdateable)) != fmt.Sprint(deref(tc.planUpdateable)) {
				t.Errorf("plan_updateable %v, want %v", deref(p.PlanUpdateable), deref(tc.planUpdateable))
			}
			if tc.schemasNone {
				if p.Schemas != nil {
					t.Fatalf("schemas %s, want none", mustJSON(t, p.Schemas))
				}
				return
			}
			if p.Schemas == nil {
				t.Fatal("no schemas")
			}
			si, sb := p.Schemas.ServiceInstance, p.Schemas.ServiceBinding
			if got := si != nil && si.Create != nil; got != tc.create {
				t.Errorf("create schema %v, want %v", got, tc.create)
			}
			if got := si != nil && si.Update != nil; got != tc.update {
				t.Errorf("update schema %v, want %v", got, tc.update)
			}
			if got := sb != nil && sb.Create != nil; got != tc.bind {
				t.Errorf("binding schema %v, want %v", got, tc.bind)
			}
		})
	}
}

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

func TestServiceMapping(t *testing.T) {
	specs := fixtures()
	c := mustRender(t, specs)

	if got := names(c); got != "mq,postgresql,redis" {
		t.Errorf("service order %s, want sorted by name", got)
	}

	pg := findService(t, c, "postgresql")
	if !pg.PlanUpdateable {
		t.Error("postgresql: a plan has updates_to but plan_updateable is false")
	}
	if redis := findService(t, c, "redis"); redis.PlanUpdateable {
		t.Error("redis: no plan has updates_to but plan_updateable is true")
	}
	if got := fmt.Sprint(pg.Metadata["platforms"]); got != "[linux/amd64 linux/arm/v7 linux/arm64]" {
		t.Errorf("metadata.platforms %s, want sorted and deduplicated", got)
	}
	for k, v := range specs[0].Metadata {
		if pg.Metadata[k] != v {
			t.Errorf("metadata %s = %v, want %v passed through", k, pg.Metadata[k], v)
		}
	}
	if _, ok := specs[0].Metadata["platforms"]; ok {
		t.Error("Render wrote platforms into the input spec's metadata")
	}
	if mq := findService(t, c, "mq"); mq.Metadata != nil {
		t.Errorf("mq: metadata %v, want none (no metadata, no platforms)", mq.Metadata)
	}
	if got := strings.Join(pg.Tags, ","); got != "database,sql" || !pg.Bindable || pg.ID != specs[0].ID {
		t.Errorf("postgresql: tags %s bindable %v id %s", got, pg.Bindable, pg.ID)
	}
	if got := planNames(pg); got != "dev,prod" {
		t.Errorf("plans %s, want spec order", got)
	}
	dev := findPlan(t, pg, "dev")
	if dev.ID != specs[0].Plans[0].ID || fmt.Sprint(dev.Metadata["bullets"]) != "[1 GB RAM]" {
		t.Errorf("dev: id %s metadata %v", dev.ID, dev.Metadata)
	}

	// Platforms replace an author's own key; the spec's metadata is copied.
	s := &spec.Spec{Name: "x", ID: "x", Description: "x", Metadata: map[string]any{"platforms": "any", "a": 1.0},
		Platforms: []spec.Platform{{OS: "linux", Architecture: "s390x"}}, Plans: []spec.Plan{{Name: "p", ID: "p", Description: "p"}}}
	md := mustRender(t, []*spec.Spec{s}).Services[0].Metadata
	if fmt.Sprint(md["platforms"]) != "[linux/s390x]" || md["a"] != 1.0 || s.Metadata["platforms"] != "any" {
		t.Errorf("metadata %v, input %v", md, s.Metadata)
	}

	// The JSON uses OSB's names, and leaves out what specsync never sets.
	b := string(mustJSON(t, c))
	for _, want := range []string{`"services":`, `"plan_updateable":true`, `"free":false`, `"bindable":false`,
		`"instances_retrievable":true`, `"allow_context_updates":true`, `"bindings_retrievable":true`,
		`"service_instance":{"create":{"parameters":{"$schema":"http://json-schema.org/draft-04/schema#"`, `"service_binding":{"create":`} {
		if !strings.Contains(b, want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	for _, absent := range []string{"dashboard_client", "maintenance_info", "maximum_polling_duration", "requires", "async",
		"display_type", "display_group", `"s3cret`} {
		if strings.Contains(b, absent) {
			t.Errorf("JSON contains %s", absent)
		}
	}
	if b := string(mustJSON(t, mustRender(t, nil))); b != `{"services":[]}` {
		t.Errorf("empty catalog %s, want an empty list (services is required)", b)
	}
}

func names(c *Catalog) string {
	out := make([]string, len(c.Services))
	for i, s := range c.Services {
		out[i] = s.Name
	}
	return strings.Join(out, ",")
}

func planNames(s Service) string {
	out := make([]string, len(s.Plans))
	for i, p := range s.Plans {
		out[i] = p.Name
	}
	return strings.Join(out, ",")
}

func TestDeterministic(t *testing.T) {
	specs := fixtures()
	before := make([]string, len(specs))
	for i, s := range specs {
		before[i] = spec.Digest(s)
	}
	want := mustJSON(t, mustRender(t, specs))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		shuffled := slices.Clone(specs)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := mustJSON(t, mustRender(t, shuffled)); !bytes.Equal(got, want) {
			t.Fatalf("render %d differs:\n%s\nwant\n%s", i, got, want)
		}
	}
	for i, s := range specs {
		if spec.Digest(s) != before[i] {
			t.Errorf("Render modified input spec %s", s.Name)
		}
	}
}

// problemCase is a catalog with specs Render must leave out.
type problemCase struct {
	name     string
	specs    []*spec.Spec
	kept     string // service ids in the catalog
	dropped  string // spec ids reported
	conflict string // ConflictsWith of the problems
}

func problemSpec(name, id string, planIDs ...string) *spec.Spec {
	s := &spec.Spec{Name: name, ID: id, Description: "d"}
	for i, pid := range planIDs {
		s.Plans = append(s.Plans, spec.Plan{Name: fmt.Sprintf("p%d", i), ID: pid, Description: "d"})
	}
	return s
}

func problemCases() []problemCase {
	mk := problemSpec
	huge := mk("huge", "huge-id", "huge-plan")
	huge.Plans[0].Parameters = []spec.Parameter{{Name: "x", Type: "string", Description: strings.Repeat("x", MaxSchemaBytes)}}
	return []problemCase{
		{"duplicate name: first in input wins", []*spec.Spec{mk("pg", "b-id", "b1"), mk("pg", "a-id", "a1"), mk("mq", "c-id", "c1")},
			"c-id,b-id", "a-id", "b-id"},
		{"duplicate service id", []*spec.Spec{mk("one", "same", "p1"), mk("two", "same", "p2")}, "same", "same", "same"},
		{"plan id used by another service", []*spec.Spec{mk("one", "one-id", "p1"), mk("two", "two-id", "p2", "p1")},
			"one-id", "two-id", "one-id"},
		{"no spec id", []*spec.Spec{mk("one", "", "p1"), mk("two", "two-id", "p2")}, "two-id", "", ""},
		{"no plan id", []*spec.Spec{mk("one", "one-id", "")}, "", "one-id", ""},
		{"no plans", []*spec.Spec{mk("one", "one-id")}, "", "one-id", ""},
		{"nil spec", []*spec.Spec{nil, mk("two", "two-id", "p2")}, "two-id", "", ""},
		{"schema over 64kB", []*spec.Spec{huge, mk("small", "small-id", "s1")}, "small-id", "huge-id", ""},
		// A dropped spec claims nothing: a later spec may use its name.
		{"dropped spec frees its name", []*spec.Spec{mk("x", "x1", ""), mk("x", "x2", "p")}, "x2", "x1", ""},
	}
}

func TestProblems(t *testing.T) {
	mk := problemSpec
	cases := problemCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Render(tc.specs)
			var de *DropError
			if !errors.As(err, &de) {
				t.Fatalf("error %v, want a *DropError", err)
			}
			if c == nil {
				t.Fatal("no catalog next to the problems")
			}
			var kept, dropped, conflicts []string
			for _, s := range c.Services {
				kept = append(kept, s.ID)
			}
			for _, p := range de.Problems {
				dropped = append(dropped, p.SpecID)
				conflicts = append(conflicts, p.ConflictsWith)
			}
			if got := strings.Join(kept, ","); got != tc.kept {
				t.Errorf("kept %s, want %s", got, tc.kept)
			}
			if got := strings.Join(dropped, ","); got != tc.dropped {
				t.Errorf("dropped %s, want %s", got, tc.dropped)
			}
			if got := strings.Join(conflicts, ","); got != tc.conflict {
				t.Errorf("conflicts with %s, want %s", got, tc.conflict)
			}
		})
	}

	// The message names both services of a name conflict, for the operator.
	_, err := Render([]*spec.Spec{mk("pg", "first-id", "f1"), mk("pg", "second-id", "s1")})
	if msg := fmt.Sprint(err); !strings.Contains(msg, "first-id") || !strings.Contains(msg, "second-id") || !strings.Contains(msg, `"pg"`) {
		t.Errorf("error %q does not name the service and both ids", msg)
	}
}

func TestETag(t *testing.T) {
	tags := map[string]bool{}
	for _, tc := range []struct {
		rev     int64
		variant string
	}{{1, ""}, {2, ""}, {1, "gzip"}, {1, "gz ip"}, {1, "gz\"ip"}, {10, ""}, {1, "0"}} {
		tag := ETag(tc.rev, tc.variant)
		if tag != ETag(tc.rev, tc.variant) {
			t.Fatalf("ETag(%d, %q) is not stable", tc.rev, tc.variant)
		}
		// RFC 9110 strong entity-tag: DQUOTE *etagc DQUOTE.
		inner, ok := strings.CutPrefix(tag, `"`)
		inner, ok2 := strings.CutSuffix(inner, `"`)
		if !ok || !ok2 || strings.ContainsFunc(inner, func(r rune) bool { return r <= ' ' || r == '"' || r == 0x7f }) {
			t.Errorf("ETag(%d, %q) = %s is not a strong entity tag", tc.rev, tc.variant, tag)
		}
		if tags[tag] {
			t.Errorf("ETag(%d, %q) = %s collides", tc.rev, tc.variant, tag)
		}
		tags[tag] = true
	}

	c := mustRender(t, fixtures())
	d1, err := Digest(c)
	if err != nil {
		t.Fatal(err)
	}
	if d2, _ := Digest(mustRender(t, fixtures())); d2 != d1 || !strings.HasPrefix(d1, "sha256:") {
		t.Errorf("digests %s and %s of equal catalogs", d1, d2)
	}
	changed := fixtures()
	changed[1].Description = "Redis, changed"
	if d3, _ := Digest(mustRender(t, changed)); d3 == d1 {
		t.Error("digest did not change with the catalog")
	}
}

// benchSpecs is a catalog of n specs with three plans each, two of them
// with parameters, like a registry of real APBs.
func benchSpecs(n int) []*spec.Spec {
	base := fixtures()[0]
	specs := make([]*spec.Spec, n)
	for i := range specs {
		s := *base
		s.ID = ""
		s.Name = fmt.Sprintf("service-%03d", n-i)
		s.Plans = []spec.Plan{base.Plans[0], base.Plans[1], base.Plans[0]}
		s.Plans[2].Name = "dev-large"
		for j := range s.Plans {
			s.Plans[j].ID = ""
		}
		spec.AssignIDs(&s, "bench")
		specs[i] = &s
	}
	return specs
}

func BenchmarkRender(b *testing.B) {
	specs := benchSpecs(200)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(specs); err != nil {
			b.Fatal(err)
		}
	}
}

// OSB's plan_updateable, from the spec's own field (service default, plan
// override) and from APB's updates_to: the service says the default, a plan
// only where it differs, and bindings_retrievable follows bindability.
func TestPlanUpdateableAndSurfaceFlags(t *testing.T) {
	plan := func(name string, updatesTo []string, updateable *bool) spec.Plan {
		return spec.Plan{Name: name, ID: name + "-id", Description: name, UpdatesTo: updatesTo, PlanUpdateable: updateable}
	}
	cases := []struct {
		name     string
		service  *bool
		plans    []spec.Plan
		bindable bool
		want     bool             // the service's plan_updateable
		plan     map[string]*bool // rendered per plan (nil: inherits)
	}{
		{name: "nothing said", plans: []spec.Plan{plan("a", nil, nil), plan("b", nil, nil)},
			want: false, plan: map[string]*bool{"a": nil, "b": nil}},
		{name: "updates_to on one plan", plans: []spec.Plan{plan("a", []string{"b"}, nil), plan("b", nil, nil)},
			want: true, plan: map[string]*bool{"a": nil, "b": new(false)}},
		{name: "service true", service: new(true), plans: []spec.Plan{plan("a", nil, nil), plan("b", nil, nil)}, bindable: true,
			want: true, plan: map[string]*bool{"a": nil, "b": nil}},
		{name: "service true, one plan false", service: new(true), plans: []spec.Plan{plan("a", nil, new(false)), plan("b", nil, nil)},
			want: true, plan: map[string]*bool{"a": new(false), "b": nil}},
		{name: "service false, one plan true", service: new(false), plans: []spec.Plan{plan("a", nil, new(true)), plan("b", nil, nil)},
			want: false, plan: map[string]*bool{"a": new(true), "b": nil}},
		{name: "service false, updates_to overrides", service: new(false), plans: []spec.Plan{plan("a", []string{"b"}, nil), plan("b", nil, nil)},
			want: false, plan: map[string]*bool{"a": new(true), "b": nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &spec.Spec{Name: "s", ID: "s-id", Description: "s", Bindable: tc.bindable, PlanUpdateable: tc.service, Plans: tc.plans}
			svc, err := RenderService(Offering{Spec: s, Generation: 1})
			if err != nil {
				t.Fatal(err)
			}
			if svc.PlanUpdateable != tc.want {
				t.Errorf("service plan_updateable %v, want %v", svc.PlanUpdateable, tc.want)
			}
			for _, p := range svc.Plans {
				if fmt.Sprint(deref(p.PlanUpdateable)) != fmt.Sprint(deref(tc.plan[p.Name])) {
					t.Errorf("plan %s plan_updateable %v, want %v", p.Name, deref(p.PlanUpdateable), deref(tc.plan[p.Name]))
				}
			}
			if !svc.InstancesRetrievable || !svc.AllowContextUpdates || svc.BindingsRetrievable != tc.bindable {
				t.Errorf("instances_retrievable %v allow_context_updates %v bindings_retrievable %v (bindable %v)",
					svc.InstancesRetrievable, svc.AllowContextUpdates, svc.BindingsRetrievable, tc.bindable)
			}
		})
	}
}
