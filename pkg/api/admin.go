package api

import "time"

// The catalog function's admin listings: GET /admin/specs,
// /admin/instances and /admin/operations.

// SpecList is the body of GET /admin/specs, in id order.
type SpecList struct {
	Specs []SpecView `json:"specs"`
}

// SpecView is a stored spec as the admin listing shows it.
type SpecView struct {
	ID                string           `json:"id"`
	Name              string           `json:"name"`
	Registry          string           `json:"registry"`
	Entry             string           `json:"entry"`
	Ref               string           `json:"ref,omitempty"`
	State             SpecState        `json:"state"`
	Digest            string           `json:"digest"`
	Generation        int64            `json:"generation"`
	Platforms         []string         `json:"platforms,omitempty"`
	Plans             []PlanView       `json:"plans"`
	Instances         int64            `json:"instances"`
	PlanInstances     map[string]int64 `json:"plan_instances,omitempty"`
	PlatformInstances map[string]int64 `json:"platform_instances,omitempty"`
	CreatedAt         time.Time        `json:"created_at"`
	UpdatedAt         time.Time        `json:"updated_at"`
	MarkedAt          *time.Time       `json:"marked_at,omitempty"`
	MarkedRun         string           `json:"marked_run,omitempty"`
	EntryError        string           `json:"entry_error,omitempty"`
	// HeldBack is a newer version not adopted, and why.
	HeldBack *HeldBackSpec `json:"held_back,omitempty"`
}

// PlanView is a plan of a listed spec.
type PlanView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// InstanceList is the body of GET /admin/instances.
type InstanceList struct {
	Instances []InstanceView `json:"instances"`
}

// InstanceView is a service instance with the spec it pins.
type InstanceView struct {
	ID           string         `json:"id"`
	ServiceID    string         `json:"service_id"`
	ServiceName  string         `json:"service_name"`
	ServiceState SpecState      `json:"service_state"`
	Registry     string         `json:"registry"`
	PlanID       string         `json:"plan_id"`
	PlanName     string         `json:"plan_name,omitempty"`
	Platform     string         `json:"platform,omitempty"`
	Context      map[string]any `json:"context,omitempty"`
	// OrganizationGUID and SpaceGUID are the provision's (absent on
	// records from before they were kept).
	OrganizationGUID string `json:"organization_guid,omitempty"`
	SpaceGUID        string `json:"space_guid,omitempty"`
	// MaintenanceVersion is the maintenance_info version of the spec
	// version the instance is on (absent on records from before it was
	// kept).
	MaintenanceVersion string    `json:"maintenance_version,omitempty"`
	CreatedAt          time.Time `json:"created_at"`
	// UpdatedAt is when a PATCH last changed the instance (absent: never).
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// PreviousPlanID is the plan before its last plan change.
	PreviousPlanID string `json:"previous_plan_id,omitempty"`
	// Bindings is how many bindings the instance has (GET
	// /admin/instances counts them; the status page does not).
	Bindings int64 `json:"bindings"`
}

// OperationList is the body of GET /admin/operations, newest first.
type OperationList struct {
	Operations []OperationView `json:"operations"`
}

// OperationView is a bootstrap operation with its total Firestore cost.
type OperationView struct {
	Operation
	Total Counts `json:"firestore_total"`
}
