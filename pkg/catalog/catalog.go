// Package catalog renders service specs into the Open Service Broker (OSB
// v2.17) catalog that GET /v2/catalog serves. It is pure: no Firestore, no
// HTTP. The handler reads the active specs, calls Render, encodes the
// result and tags it with ETag (or Digest).
//
// # Mapping from spec to OSB
//
// Services are sorted by name, then id; plans keep spec order, because the
// spec author ordered them (smallest first, usually) and platforms show
// them in catalog order.
//
//   - Service metadata is the spec's free-form metadata, passed through:
//     APB specs already use the OSB profile's display keys (displayName,
//     imageUrl, longDescription, providerDisplayName, documentationUrl,
//     supportUrl). The spec's platforms are added as metadata.platforms, a
//     sorted list of "os/arch[/variant]" strings, because OSB has no field
//     for them and platforms treat metadata as an opaque blob. They replace
//     an author's own "platforms" key: the image index is the authority on
//     what the image runs on. Likewise metadata.provenance is who signed
//     the version served ({digest, key} or {digest, identity, issuer}),
//     set only from a verified signature (spec.Provenance): an author's
//     own "provenance" key is dropped.
//   - Plan free defaults to true when the spec leaves it unset (the APB and
//     OSB default); plan bindable inherits the spec's bindable. Both are
//     always written out, so a consumer never has to re-implement the
//     inheritance rule.
//   - Service plan_updateable is the spec's plan_updateable when it has
//     one, else true when any plan is updateable (see spec.Spec.Updateable:
//     a plan's own plan_updateable, else updates_to, else the spec's). OSB
//     only has a boolean, APB lists the plans a plan may move to; "some
//     plan can move somewhere" is the only honest service-wide answer.
//     A plan whose answer differs from the service's says so itself, so
//     platforms do not offer a plan change that the spec rules out. The
//     target list itself stays the update handler's check
//     (spec.Spec.PlanChange).
//   - Plan metadata is passed through unchanged.
//   - Plan schemas come from parameters (see ParametersSchema): create from
//     parameters, update from the updatable ones, binding create from
//     bind_parameters when the plan is bindable (OSB: the binding schema is
//     "used only if the Service Plan is bindable"). A schema with nothing
//     in it is left out, and so is the schemas object when all three are.
//     A plan that gives its instance schemas whole (spec.Plan.Schemas: a
//     Helm chart's values.schema.json) gets them as they are, with
//     $schema set to draft-04 (the spec parser accepts no other draft).
//   - Nothing is rendered for the spec's async or version (OSB's catalog
//     has no field for either; async is the provisioning handler's
//     business).
//   - instances_retrievable and allow_context_updates are true and
//     bindings_retrievable is true for a service with a bindable plan:
//     they describe the broker (pkg/osb serves GET of instances and
//     bindings and context-only updates for every service), not a spec,
//     but they are set here because this one rendering is what both the
//     catalog and the change feed serve, which must agree.
//
// # Problems
//
// A catalog must keep serving when one spec is wrong, so Render never fails
// as a whole: a spec that would make the catalog invalid (a service name or
// id another service already uses, a plan id used elsewhere, a parameter
// schema over OSB's 64 kB limit, missing ids) is left out and reported in a
// *DropError, next to a catalog that is valid without it. The first spec
// in input order wins a conflict, so the caller decides who keeps a name:
// pass established specs first (for instance by creation time) and a newly
// published spec can never displace one that instances already use.
//
// Rendered values share tags and metadata maps with the input specs; treat
// both as read-only.
package catalog

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/specsync/specsync/pkg/spec"
)

// Catalog is the body of GET /v2/catalog.
type Catalog struct {
	Services []Service `json:"services"`
}

// Service is an OSB Service Offering object.
type Service struct {
	Name                 string           `json:"name"`
	ID                   string           `json:"id"`
	Description          string           `json:"description"`
	Tags                 []string         `json:"tags,omitempty"`
	Requires             []string         `json:"requires,omitempty"`
	Bindable             bool             `json:"bindable"`
	InstancesRetrievable bool             `json:"instances_retrievable,omitempty"`
	BindingsRetrievable  bool             `json:"bindings_retrievable,omitempty"`
	AllowContextUpdates  bool             `json:"allow_context_updates,omitempty"`
	Metadata             map[string]any   `json:"metadata,omitempty"`
	DashboardClient      *DashboardClient `json:"dashboard_client,omitempty"`
	PlanUpdateable       bool             `json:"plan_updateable,omitempty"`
	Plans                []Plan           `json:"plans"`
}

// DashboardClient is the Cloud Foundry dashboard SSO extension. specsync
// never sets it; it is here so a handler can, without a second type.
type DashboardClient struct {
	ID          string `json:"id"`
	Secret      string `json:"secret"`
	RedirectURI string `json:"redirect_uri,omitempty"`
}

// Plan is an OSB Service Plan object.
type Plan struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Free        bool           `json:"free"`
	Bindable    bool           `json:"bindable"`
	// PlanUpdateable is set only where it differs from the service's.
	PlanUpdateable         *bool            `json:"plan_updateable,omitempty"`
	Schemas                *Schemas         `json:"schemas,omitempty"`
	MaximumPollingDuration *int             `json:"maximum_polling_duration,omitempty"`
	MaintenanceInfo        *MaintenanceInfo `json:"maintenance_info,omitempty"`
}

// MaintenanceInfo is the OSB Maintenance Info object.
type MaintenanceInfo struct {
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// Schemas is the OSB Schemas object of a plan.
type Schemas struct {
	ServiceInstance *ServiceInstanceSchema `json:"service_instance,omitempty"`
	ServiceBinding  *ServiceBindingSchema  `json:"service_binding,omitempty"`
}

// ServiceInstanceSchema holds the provision and update parameter schemas.
type ServiceInstanceSchema struct {
	Create *InputParameters `json:"create,omitempty"`
	Update *InputParameters `json:"update,omitempty"`
}

// ServiceBindingSchema holds the bind parameter schema.
type ServiceBindingSchema struct {
	Create *InputParameters `json:"create,omitempty"`
}

// InputParameters is the OSB Input Parameters Schema object.
type InputParameters struct {
	Parameters map[string]any `json:"parameters"`
}

// MaxSchemaBytes is OSB's limit on one parameters schema ("MUST NOT be
// larger than 64kB"); read as 64,000 bytes, the stricter reading.
const MaxSchemaBytes = spec.MaxSchemaBytes

// Problem is one spec Render left out of the catalog, and why.
type Problem struct {
	SpecID string
	Name   string
	// ConflictsWith is the id of the spec already in the catalog that this
	// one collides with, for name and id conflicts; empty otherwise.
	ConflictsWith string
	Reason        string
}

func (p Problem) String() string {
	return fmt.Sprintf("spec %q (name %q) left out of the catalog: %s", p.SpecID, p.Name, p.Reason)
}

// DropError lists the specs Render left out. The catalog returned with it
// is valid and servable; failing the whole request instead is the caller's
// choice.
type DropError struct {
	Problems []Problem
}

func (e *DropError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "catalog: " + strings.Join(parts, "; ")
}

// Offering is a spec as the store serves it: the spec and its generation,
// the count of versions adopted (store.SpecRecord.Generation).
type Offering struct {
	Spec       *spec.Spec
	Generation int64
}

// Render turns specs (ids assigned, already validated) into the catalog,
// without maintenance_info (see RenderOfferings).
func Render(specs []*spec.Spec) (*Catalog, error) {
	offs := make([]Offering, len(specs))
	for i, s := range specs {
		offs[i] = Offering{Spec: s}
	}
	return RenderOfferings(offs)
}

// RenderOfferings turns offerings into the catalog. It always returns a
// valid catalog; when it had to leave specs out, the error is a *DropError
// naming each of them (see the package comment).
func RenderOfferings(offs []Offering) (*Catalog, error) {
	c := &Catalog{Services: make([]Service, 0, len(offs))}
	var problems []Problem
	taken := newClaims(len(offs))
	for i, o := range offs {
		s := o.Spec
		if s == nil {
			problems = append(problems, Problem{Reason: fmt.Sprintf("specs[%d] is nil", i)})
			continue
		}
		cl := claimOf(s)
		if p, bad := taken.conflict(cl); bad {
			problems = append(problems, p)
			continue
		}
		svc, err := RenderService(o)
		if err != nil {
			problems = append(problems, Problem{SpecID: s.ID, Name: s.Name, Reason: err.Error()})
			continue
		}
		taken.take(cl)
		c.Services = append(c.Services, svc)
	}
	slices.SortFunc(c.Services, func(a, b Service) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	if len(problems) > 0 {
		return c, &DropError{Problems: problems}
	}
	return c, nil
}

// claim is what a service takes in the catalog: its name and id, and its
// plans' ids (with their names, for the messages).
type claim struct {
	id, name string
	plans    []planClaim
}

type planClaim struct{ id, name string }

func claimOf(s *spec.Spec) claim {
	cl := claim{id: s.ID, name: s.Name, plans: make([]planClaim, len(s.Plans))}
	for i, p := range s.Plans {
		cl.plans[i] = planClaim{id: p.ID, name: p.Name}
	}
	return cl
}

// claims are the names and ids the services admitted so far hold.
type claims struct {
	names   map[string]string // service name -> spec id
	ids     map[string]string // service id -> name
	planIDs map[string]string // plan id -> spec id
}

func newClaims(n int) *claims {
	return &claims{names: make(map[string]string, n), ids: make(map[string]string, n), planIDs: make(map[string]string, n)}
}

func (c *claims) take(cl claim) {
	c.names[cl.name] = cl.id
	c.ids[cl.id] = cl.name
	for _, p := range cl.plans {
		c.planIDs[p.id] = cl.id
	}
}

// conflict checks what a single spec's validation cannot: uniqueness across
// the catalog. OSB wants service names unique in the catalog and ids
// (service and plan) globally unique; ids missing would be a caller bug,
// but one that must not take the other services down.
func (c *claims) conflict(cl claim) (Problem, bool) {
	p := Problem{SpecID: cl.id, Name: cl.name}
	switch {
	case cl.id == "":
		p.Reason = "spec has no id"
	case len(cl.plans) == 0:
		p.Reason = "spec has no plans (OSB requires at least one)"
	case c.names[cl.name] != "":
		p.ConflictsWith = c.names[cl.name]
		p.Reason = fmt.Sprintf("service name %q is already used by spec %q", cl.name, c.names[cl.name])
	case c.ids[cl.id] != "":
		p.ConflictsWith = cl.id
		p.Reason = fmt.Sprintf("service id %q is already used by service %q", cl.id, c.ids[cl.id])
	default:
		for i, pl := range cl.plans {
			if pl.id == "" {
				p.Reason = fmt.Sprintf("plans[%d] (%q) has no id", i, pl.name)
				return p, true
			}
			if owner := c.planIDs[pl.id]; owner != "" {
				p.ConflictsWith = owner
				p.Reason = fmt.Sprintf("plan id %q (plan %q) is already used by spec %q", pl.id, pl.name, owner)
				return p, true
			}
		}
		return p, false
	}
	return p, true
}

// RenderService renders one offering as the catalog would list it (the
// checks across services aside): the change feed carries it.
//
// With a generation, every plan gets OSB maintenance_info version
// "<generation>.0.0": it advances exactly when a new version of the spec
// is adopted, never for a version held back, so a platform offers an
// instance upgrade only when there is one. A spec with a maintenance
// version of its own (a Helm chart's version) gets that instead: it too
// is the served version's, so it moves only when one is adopted.
func RenderService(o Offering) (Service, error) {
	s := o.Spec
	if s == nil {
		return Service{}, fmt.Errorf("no spec")
	}
	svc := Service{
		Name:        s.Name,
		ID:          s.ID,
		Description: s.Description,
		Tags:        s.Tags,
		Bindable:    s.Bindable,
		Metadata:    serviceMetadata(s),
		Plans:       make([]Plan, len(s.Plans)),
	}
	svc.PlanUpdateable = s.ServiceUpdateable()
	svc.InstancesRetrievable, svc.AllowContextUpdates = true, true
	for i, p := range s.Plans {
		out := Plan{
			ID:          p.ID,
			Name:        p.Name,
			Description: p.Description,
			Metadata:    p.Metadata,
			Free:        p.Free == nil || *p.Free,
			Bindable:    s.PlanBindable(p),
		}
		if u := s.Updateable(p); u != svc.PlanUpdateable {
			out.PlanUpdateable = new(u)
		}
		svc.BindingsRetrievable = svc.BindingsRetrievable || out.Bindable
		schemas, err := planSchemas(p, out.Bindable)
		if err != nil {
			return Service{}, fmt.Errorf("plan %q: %w", p.Name, err)
		}
		out.Schemas = schemas
		out.MaintenanceInfo = maintenanceInfo(s, o.Generation)
		svc.Plans[i] = out
	}
	return svc, nil
}

// maintenanceInfo is the plans' maintenance_info: the spec's own
// maintenance version (a chart's version) when it has one, else the
// generation's "<generation>.0.0"; nil for neither (generation 0).
func maintenanceInfo(s *spec.Spec, generation int64) *MaintenanceInfo {
	v := s.MaintenanceAt(generation)
	switch {
	case v == "":
		return nil
	case s.MaintenanceVersion != "":
		return &MaintenanceInfo{Version: v, Description: fmt.Sprintf("version %s of %s", v, s.Name)}
	default:
		return &MaintenanceInfo{Version: v, Description: fmt.Sprintf("version %d of %s adopted from its registry", generation, s.Name)}
	}
}

// serviceMetadata copies the spec's metadata only when it adds platforms
// or provenance, so the input spec is never modified.
func serviceMetadata(s *spec.Spec) map[string]any {
	_, claimed := s.Metadata["provenance"]
	if len(s.Platforms) == 0 && s.Provenance == nil && !claimed {
		return s.Metadata
	}
	md := make(map[string]any, len(s.Metadata)+2)
	for k, v := range s.Metadata {
		md[k] = v
	}
	// Who signed is the verified signature's word (spec.Provenance), set
	// by a registry with a verify block; an author's own key would claim
	// it unverified.
	delete(md, "provenance")
	if p := s.Provenance; p != nil {
		pm := map[string]any{"digest": p.Digest}
		if p.Key != "" {
			pm["key"] = p.Key
		} else {
			pm["identity"], pm["issuer"] = p.Identity, p.Issuer
		}
		md["provenance"] = pm
	}
	if len(s.Platforms) == 0 {
		return md
	}
	platforms := make([]string, len(s.Platforms))
	for i, p := range s.Platforms {
		platforms[i] = p.String()
	}
	// Sorted and deduplicated so the catalog does not change with the order
	// of manifests in an image index.
	slices.Sort(platforms)
	md["platforms"] = slices.Compact(platforms)
	return md
}

func planSchemas(p spec.Plan, bindable bool) (*Schemas, error) {
	var out Schemas
	if !p.Schemas.IsZero() {
		// Given whole (validated by the spec parser): served as they are,
		// with the $schema OSB requires.
		si := &ServiceInstanceSchema{}
		var err error
		if si.Create, err = givenSchema(p.Schemas.Provision, "service_instance.create"); err != nil {
			return nil, err
		}
		if si.Update, err = givenSchema(p.Schemas.Update, "service_instance.update"); err != nil {
			return nil, err
		}
		out.ServiceInstance = si
	} else if len(p.Parameters) > 0 {
		create, err := inputParameters(p.Parameters, false, "service_instance.create")
		if err != nil {
			return nil, err
		}
		out.ServiceInstance = &ServiceInstanceSchema{Create: create}
		if slices.ContainsFunc(p.Parameters, func(x spec.Parameter) bool { return x.Updatable }) {
			update, err := inputParameters(p.Parameters, true, "service_instance.update")
			if err != nil {
				return nil, err
			}
			out.ServiceInstance.Update = update
		}
	}
	if bindable && len(p.BindParameters) > 0 {
		create, err := inputParameters(p.BindParameters, false, "service_binding.create")
		if err != nil {
			return nil, err
		}
		out.ServiceBinding = &ServiceBindingSchema{Create: create}
	}
	if out.ServiceInstance == nil && out.ServiceBinding == nil {
		return nil, nil
	}
	return &out, nil
}

func inputParameters(params []spec.Parameter, update bool, where string) (*InputParameters, error) {
	return sized(ParametersSchema(params, update), where)
}

// givenSchema is a schema a plan gives whole, nil for none.
func givenSchema(doc map[string]any, where string) (*InputParameters, error) {
	if len(doc) == 0 {
		return nil, nil
	}
	return sized(spec.WithDraft(doc), where)
}

func sized(schema map[string]any, where string) (*InputParameters, error) {
	// Encoding here, once per schema, is what enforces OSB's size limit; it
	// also catches a value JSON cannot carry before it breaks the catalog.
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("%s parameters schema does not encode: %w", where, err)
	}
	if len(b) > MaxSchemaBytes {
		return nil, fmt.Errorf("%s parameters schema is %d bytes, OSB allows at most %d", where, len(b), MaxSchemaBytes)
	}
	return &InputParameters{Parameters: schema}, nil
}
