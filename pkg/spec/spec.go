// Package spec is the service spec model: what a registry offers and what
// the catalog serves. It is compatible with Ansible Playbook Bundle (APB)
// specs, the format the classic service broker read from the image label
// com.redhat.apb.spec, and adds the OCI platforms a spec's image supports.
//
// The package knows nothing about registries or Firestore: it parses,
// validates, derives stable ids and computes a canonical content digest.
package spec

// LabelKey is the image config label that carries a spec (base64 YAML in
// the APB convention; plain YAML or JSON is accepted too).
const LabelKey = "com.redhat.apb.spec"

// A spec can also be an OCI artifact: a manifest of artifact type
// ArtifactType whose one layer is the spec document (pkg/registry).
const (
	ArtifactType      = "application/vnd.specsync.spec.v1"
	ArtifactLayerYAML = "application/vnd.specsync.spec.v1+yaml"
	ArtifactLayerJSON = "application/vnd.specsync.spec.v1+json"
)

// Spec is one service offering.
type Spec struct {
	Version     string         `json:"version,omitempty"`
	Name        string         `json:"name"`
	ID          string         `json:"id,omitempty"`
	Description string         `json:"description"`
	Bindable    bool           `json:"bindable"`
	Async       string         `json:"async,omitempty"`
	Tags        []string       `json:"tags,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	// PlanUpdateable is OSB's service-wide default for plan changes (the
	// spelling is OSB's): whether an instance may move to another plan of
	// the spec. Unset, a plan is updateable exactly when it lists
	// updates_to (the APB way). See PlanChange.
	PlanUpdateable *bool  `json:"plan_updateable,omitempty"`
	Plans          []Plan `json:"plans"`
	// Platforms are the OCI platforms the spec's image supports. For an OCI
	// registry they come from the image index, not from the label.
	Platforms []Platform `json:"platforms,omitempty"`
	// MaintenanceVersion, when set, is the OSB maintenance_info version of
	// every plan (a semantic version 2.0.0, such as a Helm chart's
	// version), in place of the one counted from the versions adopted
	// (see MaintenanceAt). Unset, it encodes (and digests) as a spec did
	// before the field existed.
	MaintenanceVersion string `json:"maintenance_version,omitempty"`
	// Provenance is who signed the manifest the spec was read from, set
	// by a registry with a verify block once the signature verified;
	// never by the spec itself (Parse refuses the key). Unset, it encodes
	// (and digests) as a spec did before the field existed.
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Provenance is a verified signature of the manifest a spec came from:
// the manifest digest, and the signer: a keyless certificate's identity
// and OIDC issuer, or the fingerprint of the public key.
type Provenance struct {
	Digest   string `json:"digest"`
	Identity string `json:"identity,omitempty"`
	Issuer   string `json:"issuer,omitempty"`
	Key      string `json:"key,omitempty"`
}

// Signer says who signed, in one line.
func (p *Provenance) Signer() string {
	if p.Key != "" {
		return "key " + p.Key
	}
	return p.Identity + " (issuer " + p.Issuer + ")"
}

// Plan is one service plan of a spec.
type Plan struct {
	Name           string         `json:"name"`
	ID             string         `json:"id,omitempty"`
	Description    string         `json:"description"`
	Free           *bool          `json:"free,omitempty"`
	Bindable       *bool          `json:"bindable,omitempty"`
	Metadata       map[string]any `json:"metadata,omitempty"`
	Parameters     []Parameter    `json:"parameters,omitempty"`
	BindParameters []Parameter    `json:"bind_parameters,omitempty"`
	UpdatesTo      []string       `json:"updates_to,omitempty"`
	// PlanUpdateable overrides the spec's plan_updateable for instances on
	// this plan (OSB: the plan's value takes precedence).
	PlanUpdateable *bool `json:"plan_updateable,omitempty"`
	// Schemas are the plan's instance parameter schemas given whole, for a
	// service whose parameters a schema of its own describes (a Helm
	// chart's values.schema.json). A plan describes its instance
	// parameters either so or by Parameters, not both. Unset, it encodes
	// (and digests) as a plan did before the field existed.
	Schemas Schemas `json:"schemas,omitzero"`
}

// Schemas are JSON Schema (draft-04, what OSB platforms must read)
// documents given whole. Each is validated as it stands (see Validate);
// the catalog serves it with the $schema key OSB requires added when it
// has none.
type Schemas struct {
	// Provision is the schema of a provision's parameters (OSB's
	// service_instance.create).
	Provision map[string]any `json:"provision,omitempty"`
	// Update is the schema of an update's parameters (OSB's
	// service_instance.update).
	Update map[string]any `json:"update,omitempty"`
}

// IsZero reports whether no schema is given (omitzero). An empty
// document counts as none (it is left out of the encoding, so the spec
// decodes to the same digest).
func (s Schemas) IsZero() bool { return len(s.Provision) == 0 && len(s.Update) == 0 }

// Parameter describes one provision or bind parameter of a plan.
type Parameter struct {
	Name         string   `json:"name"`
	Title        string   `json:"title,omitempty"`
	Description  string   `json:"description,omitempty"`
	Type         string   `json:"type"`
	Default      any      `json:"default,omitempty"`
	Required     bool     `json:"required,omitempty"`
	Updatable    bool     `json:"updatable,omitempty"`
	Enum         []any    `json:"enum,omitempty"`
	Pattern      string   `json:"pattern,omitempty"`
	MinLength    *int     `json:"min_length,omitempty"`
	MaxLength    *int     `json:"max_length,omitempty"`
	Minimum      *float64 `json:"minimum,omitempty"`
	Maximum      *float64 `json:"maximum,omitempty"`
	DisplayType  string   `json:"display_type,omitempty"`
	DisplayGroup string   `json:"display_group,omitempty"`
}

// Secret reports whether the parameter holds a secret value (APB marks
// them with display_type password). Secret parameters never carry a
// default into the catalog.
func (p Parameter) Secret() bool { return p.DisplayType == "password" }

// Platform is an OCI os/arch pair (with an optional variant).
type Platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
}

// String renders os/arch[/variant], the notation OCI tooling uses.
func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// PlanByName returns the plan with that name. No plan has the empty name.
func (s *Spec) PlanByName(name string) (Plan, bool) {
	if name == "" {
		return Plan{}, false
	}
	for _, p := range s.Plans {
		if p.Name == name {
			return p, true
		}
	}
	return Plan{}, false
}

// PlanByID returns the plan with that id. No plan has the empty id, not
// even one whose id is not assigned yet.
func (s *Spec) PlanByID(id string) (Plan, bool) {
	if id == "" {
		return Plan{}, false
	}
	for _, p := range s.Plans {
		if p.ID == id {
			return p, true
		}
	}
	return Plan{}, false
}

// SupportsPlatform reports whether the spec serves an instance on an OCI
// platform: "" is none said, and a spec that declares no platforms
// supports any.
func (s *Spec) SupportsPlatform(platform string) bool {
	if platform == "" || len(s.Platforms) == 0 {
		return true
	}
	for _, p := range s.Platforms {
		if p.String() == platform {
			return true
		}
	}
	return false
}

// Strands reports whether the spec, adopted as a new version, would
// strand an instance on planID and platform: it drops the plan, or does
// not support the platform.
func (s *Spec) Strands(planID, platform string) bool {
	_, ok := s.PlanByID(planID)
	return !ok || !s.SupportsPlatform(platform)
}

// PlanBindable reports whether instances of plan p can be bound: the
// plan's own bindable when it says, else the spec's (OSB's inheritance).
func (s *Spec) PlanBindable(p Plan) bool {
	if p.Bindable != nil {
		return *p.Bindable
	}
	return s.Bindable
}
