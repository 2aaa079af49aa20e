package osb

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// The instance endpoints. Every operation is synchronous: it is complete
// when it answers (201/200), so accepts_incomplete is accepted and
// ignored, no operation id is ever returned, and last_operation reports
// the operation that already finished.

var ociPlatform = regexp.MustCompile(`^[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?$`)

// pathID reads the path value name (what: "instance", "binding"), writing
// a 400 when it is not a valid id (web.CheckID).
func pathID(w http.ResponseWriter, r *http.Request, name, what string) (string, bool) {
	id := r.PathValue(name)
	if err := web.CheckID(what+" id", id); err != nil {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", failure.Describe(err)) // the edge's own refusal: no store text
		return "", false
	}
	return id, true
}

func validInstanceID(w http.ResponseWriter, r *http.Request) (string, bool) {
	return pathID(w, r, "id", "instance")
}

// maintenanceInfo is OSB's maintenance_info as a request carries it: only
// the version counts.
type maintenanceInfo struct {
	Version string `json:"version"`
}

// version is the version a request asked for ("" when it named none),
// writing a 400 for a maintenance_info without one.
func (m *maintenanceInfo) version(w http.ResponseWriter) (string, bool) {
	if m == nil {
		return "", true
	}
	if m.Version == "" {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "maintenance_info.version is required when maintenance_info is given")
		return "", false
	}
	if !checkText(w, text{"maintenance_info.version", m.Version, MaxTextBytes}) {
		return "", false
	}
	return m.Version, true
}

// present reports whether a raw JSON field was given a value.
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// decodeObject decodes a field that must be a JSON object (OSB's context,
// parameters) within the input contract's limits (jsonObject), writing a
// 400 otherwise; an absent or null field is nil.
func decodeObject(w http.ResponseWriter, raw json.RawMessage, field string) (map[string]any, bool) {
	m, err := jsonObject(raw, field)
	if err != nil {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", failure.Describe(err)) // the edge's own refusal: no store text
		return nil, false
	}
	return m, true
}

// decodeContext decodes OSB's context and specsync's extension
// context.oci_platform. OSB's context.platform names the platform kind
// (kubernetes, cloudfoundry); the OCI platform an instance runs on is
// os/arch[/variant]. Any JSON object is a context (the store keeps it as
// JSON text, so Firestore's own rules on maps never refuse one), within
// MaxContextBytes as stored.
func decodeContext(w http.ResponseWriter, raw json.RawMessage) (map[string]any, string, bool) {
	ctx, ok := contextObject(w, raw)
	if !ok {
		return nil, "", false
	}
	platform, _ := ctx["oci_platform"].(string)
	if platform != "" && !ociPlatform.MatchString(platform) {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "context.oci_platform %s is not os/arch[/variant]", web.Quote(platform))
		return nil, "", false
	}
	return ctx, platform, true
}

// contextObject decodes a context (of an instance or a binding): any JSON
// object within the contract's depth and MaxContextBytes as stored.
func contextObject(w http.ResponseWriter, raw json.RawMessage) (map[string]any, bool) {
	ctx, ok := decodeObject(w, raw, "context")
	if !ok {
		return nil, false
	}
	if n := store.ContextSize(ctx); n > MaxContextBytes {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "context is %d bytes as JSON; at most %d are allowed", n, MaxContextBytes)
		return nil, false
	}
	return ctx, true
}

// provisionRequest is the part of OSB's provision body specsync records.
type provisionRequest struct {
	ServiceID  string          `json:"service_id"`
	PlanID     string          `json:"plan_id"`
	Context    json.RawMessage `json:"context,omitempty"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// The plan's maintenance_info the platform saw in the catalog.
	MaintenanceInfo *maintenanceInfo `json:"maintenance_info,omitempty"`
	// OSB v2.17 marks both deprecated in favour of context, yet required:
	// each "MUST be a non-empty string". Recorded and compared: a
	// platform that sends no context says where an instance belongs only
	// with them.
	OrganizationGUID string `json:"organization_guid,omitempty"`
	SpaceGUID        string `json:"space_guid,omitempty"`
}

// putInstance, patchInstance and deleteInstance are the routes' handlers:
// each write is logged (logWrite) with who asked for it.
func (b *Broker) putInstance(w http.ResponseWriter, r *http.Request) {
	b.logWrite(w, r, "provision", b.provision)
}

func (b *Broker) patchInstance(w http.ResponseWriter, r *http.Request) {
	b.logWrite(w, r, "update", b.update)
}

func (b *Broker) deleteInstance(w http.ResponseWriter, r *http.Request) {
	b.logWrite(w, r, "deprovision", b.deprovision)
}

// provision is OSB's provision: 201 {} recorded, 200 {} the same again.
func (b *Broker) provision(w http.ResponseWriter, r *http.Request) {
	id, ok := validInstanceID(w, r)
	if !ok {
		return
	}
	var req provisionRequest
	if !web.DecodeBody(w, r, b.cfg.MaxBodyBytes, &req) {
		return
	}
	if req.ServiceID == "" || req.PlanID == "" {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "service_id and plan_id are required")
		return
	}
	if !checkIDs(w, "service_id", req.ServiceID, "plan_id", req.PlanID) {
		return
	}
	// Strict clients and the OSB checkers send both and test that a
	// broker refuses a provision without them; a lenient 201 would let a
	// platform that forgot them believe it speaks OSB.
	if req.OrganizationGUID == "" || req.SpaceGUID == "" {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "organization_guid and space_guid are required, each a non-empty string (OSB v2.17; a platform without organizations or spaces sends a placeholder, and the context says where the instance belongs)")
		return
	}
	if !checkText(w, text{"organization_guid", req.OrganizationGUID, MaxTextBytes}, text{"space_guid", req.SpaceGUID, MaxTextBytes}) {
		return
	}
	ctxMap, platform, ok := decodeContext(w, req.Context)
	if !ok {
		return
	}
	// Parameters are checked to be an object and never recorded: they may
	// hold secrets (display_type password), and this broker provisions
	// nothing that would use them. The store keeps a salted slow digest,
	// to tell a provision again with other parameters (409) from a retry.
	if _, ok := decodeObject(w, req.Parameters, "parameters"); !ok {
		return
	}
	version, ok := req.MaintenanceInfo.version(w)
	if !ok {
		return
	}
	if !b.inView(w, r, req.ServiceID, func(err error) { web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", b.describe(err)) }) {
		return
	}
	inst := store.Instance{ID: id, SpecID: req.ServiceID, PlanID: req.PlanID, Platform: platform, Context: ctxMap, MaintenanceVersion: version, Parameters: req.Parameters,
		OrganizationGUID: req.OrganizationGUID, SpaceGUID: req.SpaceGUID}
	res, err := b.store.CreateInstance(r.Context(), inst)
	switch {
	case errors.Is(err, store.ErrMaintenanceInfo):
		web.WriteError(w, http.StatusUnprocessableEntity, "MaintenanceInfoConflict", "%s; read the catalog again", b.describe(err))
	case err == nil && res.Existed:
		web.WriteJSON(w, http.StatusOK, struct{}{})
	case err == nil:
		web.WriteJSON(w, http.StatusCreated, struct{}{})
	case failure.Is(err, failure.NotFound), failure.Is(err, failure.Invalid):
		// OSB: a service or plan the catalog does not offer (unknown, or
		// marked for deletion) is a bad request. Contention (Precondition)
		// falls through to a retryable 422.
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", b.describe(err))
	default:
		b.fail(w, err)
	}
}

// instanceResponse is OSB's fetched instance.
type instanceResponse struct {
	ServiceID string `json:"service_id"`
	PlanID    string `json:"plan_id"`
	// The maintenance_info version of the spec version the instance is on
	// (absent on records from before it was kept).
	MaintenanceInfo *maintenanceInfo `json:"maintenance_info,omitempty"`
}

func (b *Broker) getInstance(w http.ResponseWriter, r *http.Request) {
	id, ok := validInstanceID(w, r)
	if !ok {
		return
	}
	inst, err := b.store.GetInstance(r.Context(), id)
	if err != nil {
		b.fail(w, err)
		return
	}
	resp := instanceResponse{ServiceID: inst.SpecID, PlanID: inst.PlanID}
	if inst.MaintenanceVersion != "" {
		resp.MaintenanceInfo = &maintenanceInfo{Version: inst.MaintenanceVersion}
	}
	web.WriteJSON(w, http.StatusOK, resp)
}

// updateRequest is OSB's update (PATCH) body.
type updateRequest struct {
	ServiceID string `json:"service_id"`
	// PlanID, when present, is the plan to move to.
	PlanID          string           `json:"plan_id,omitempty"`
	Context         json.RawMessage  `json:"context,omitempty"`
	Parameters      json.RawMessage  `json:"parameters,omitempty"`
	MaintenanceInfo *maintenanceInfo `json:"maintenance_info,omitempty"`
	PreviousValues  *struct {
		ServiceID string `json:"service_id,omitempty"`
		PlanID    string `json:"plan_id,omitempty"`
		// organization_id, space_id and maintenance_info are informative
		// (deprecated or the platform's own record): ignored.
	} `json:"previous_values,omitempty"`
}

// updateError is an OSB error of a failed update of an instance that
// exists: it stays usable (a refused update changes nothing), and
// repeatable says whether the same request may succeed later.
func (b *Broker) updateError(w http.ResponseWriter, status int, code string, repeatable bool, err error) {
	usable := true
	web.WriteJSON(w, status, api.ErrorBody{Error: code, Description: b.describe(err), InstanceUsable: &usable, UpdateRepeatable: &repeatable})
}

// update is OSB's update: a plan change, new parameters, a
// maintenance upgrade, a context update, any of them together. It answers
// 200 {} when the changes were applied or had no effect.
func (b *Broker) update(w http.ResponseWriter, r *http.Request) {
	id, ok := validInstanceID(w, r)
	if !ok {
		return
	}
	var req updateRequest
	if !web.DecodeBody(w, r, b.cfg.MaxBodyBytes, &req) {
		return
	}
	if req.ServiceID == "" {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "service_id is required")
		return
	}
	if !checkIDs(w, "service_id", req.ServiceID, "plan_id", req.PlanID) {
		return
	}
	u := store.InstanceUpdate{ID: id, ServiceID: req.ServiceID, PlanID: req.PlanID}
	if pv := req.PreviousValues; pv != nil {
		if !checkIDs(w, "previous_values.service_id", pv.ServiceID, "previous_values.plan_id", pv.PlanID) {
			return
		}
		if pv.ServiceID != "" && pv.ServiceID != req.ServiceID {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "previous_values.service_id %s is not service_id %s: an instance never changes service", pv.ServiceID, req.ServiceID)
			return
		}
		u.PreviousPlanID = pv.PlanID
	}
	if u.Context, u.Platform, ok = decodeContext(w, req.Context); !ok {
		return
	}
	// Parameters are not recorded (see provision): a parameters-only
	// update has no effect on the bookkeeping, and answers 200.
	if _, ok := decodeObject(w, req.Parameters, "parameters"); !ok {
		return
	}
	if u.MaintenanceVersion, ok = req.MaintenanceInfo.version(w); !ok {
		return
	}
	if !b.inView(w, r, req.ServiceID, func(err error) { b.updateError(w, http.StatusBadRequest, "BadRequest", false, err) }) {
		return
	}
	res, err := b.store.UpdateInstance(r.Context(), u)
	switch {
	case err == nil:
		if res.Changed {
			b.cfg.Logger.Info("instance updated", "instance", id, "service", res.Instance.SpecID, "plan", res.Instance.PlanID,
				"previous_plan", res.Instance.PreviousPlanID, "maintenance_version", res.Instance.MaintenanceVersion)
		}
		web.WriteJSON(w, http.StatusOK, struct{}{})
	case errors.Is(err, store.ErrNoInstance):
		// OSB defines no 404 for an update: the route's instance_id "MUST
		// be the ID of a previously provisioned Service Instance". There
		// is no instance for instance_usable to describe, so it is left
		// out; update_repeatable still says a repeat fails alike.
		repeatable := false
		web.WriteJSON(w, http.StatusBadRequest, api.ErrorBody{Error: "InstanceNotFound", Description: b.describe(err), UpdateRepeatable: &repeatable})
	case errors.Is(err, store.ErrMaintenanceInfo):
		b.updateError(w, http.StatusUnprocessableEntity, "MaintenanceInfoConflict", false, err)
	case errors.Is(err, store.ErrPlanNotUpdateable):
		// The catalog says the plan is not plan_updateable, but a client
		// that drops the plan-level field reads the service-level true
		// and asks anyway: OSB's update table gives 422 for "the
		// requested change is not supported", whichever way it was missed.
		b.updateError(w, http.StatusUnprocessableEntity, "PlanChangeNotSupported", false, err)
	case errors.Is(err, store.ErrPlanChange):
		// A plan updates_to does not list. The OSB catalog has no field
		// for updates_to, so the platform could not know: OSB's 422 for a
		// requested change that is not supported.
		b.updateError(w, http.StatusUnprocessableEntity, "PlanChangeNotSupported", false,
			fmt.Errorf("%w (OSB's catalog has no field for the plans a plan moves to, so it could not say so): ask for one of those", err))
	case failure.Is(err, failure.NotFound), failure.Is(err, failure.Invalid):
		b.updateError(w, http.StatusBadRequest, "BadRequest", false, err)
	case failure.Is(err, failure.Precondition):
		b.updateError(w, http.StatusUnprocessableEntity, "ConcurrencyError", true, err)
	default:
		b.fail(w, err)
	}
}

// deprovision is OSB's deprovision: 200 {} deleted with its bindings,
// 410 {} no such instance.
func (b *Broker) deprovision(w http.ResponseWriter, r *http.Request) {
	id, ok := validInstanceID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	serviceID, planID := q.Get("service_id"), q.Get("plan_id")
	if serviceID == "" || planID == "" {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "service_id and plan_id query parameters are required")
		return
	}
	if !checkIDs(w, "service_id", serviceID, "plan_id", planID) {
		return
	}
	// The ids are checked in the deprovision's transaction, so a plan
	// change cannot slip in between the check and the delete.
	inst, err := b.store.Deprovision(r.Context(), store.Deprovision{ID: id, ServiceID: serviceID, PlanID: planID})
	switch {
	case failure.Is(err, failure.NotFound):
		web.WriteJSON(w, http.StatusGone, struct{}{})
	case failure.Is(err, failure.Invalid):
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", b.describe(err))
	case err != nil:
		b.fail(w, err)
	default:
		if inst.Bindings > 0 {
			// OSB has platforms unbind first; one that did not lost nothing
			// here, but an operator may want to know which platform does.
			b.cfg.Logger.Warn("deprovisioned an instance that still had bindings; they were deleted with it", "instance", id, "bindings", inst.Bindings)
		}
		web.WriteJSON(w, http.StatusOK, struct{}{})
	}
}

// noOperation writes a 400 when the request names an operation: this
// broker never returns one, so whatever the platform holds is not ours.
func noOperation(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := r.URL.Query()["operation"]; ok {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "unknown operation %s: this broker completes every request before it answers and never returns an operation; poll without one", web.Quote(r.URL.Query().Get("operation")))
		return true
	}
	return false
}

// deleted answers a last_operation poll of an instance or binding that does
// not exist: 410 when a tombstone says it was deleted (OSB: a polled
// delete has succeeded), 404 when it never existed (or its tombstone
// expired).
func (b *Broker) deleted(w http.ResponseWriter, r *http.Request, instanceID, bindingID, what string) {
	t, err := b.store.Gone(r.Context(), instanceID, bindingID)
	if err != nil {
		b.fail(w, err)
		return
	}
	if t == nil {
		web.WriteError(w, http.StatusNotFound, "NotFound", "%s does not exist", what)
		return
	}
	cause := "deprovisioned"
	if t.Kind == store.TombstoneBinding {
		cause = "unbound"
	}
	web.WriteError(w, http.StatusGone, "Gone", "%s was %s at %s", what, cause, t.DeletedAt.Format(time.RFC3339))
}

// instanceLastOperation answers a platform that polls an instance: its
// last operation (provision or update) finished before it was answered.
// service_id, when given, must be the instance's; plan_id its plan or, as
// OSB has platforms poll after a plan change, the plan before it.
func (b *Broker) instanceLastOperation(w http.ResponseWriter, r *http.Request) {
	id, ok := validInstanceID(w, r)
	if !ok || noOperation(w, r) {
		return
	}
	q := r.URL.Query()
	if !checkIDs(w, "service_id", q.Get("service_id"), "plan_id", q.Get("plan_id")) {
		return
	}
	inst, err := b.store.GetInstance(r.Context(), id)
	if failure.Is(err, failure.NotFound) {
		b.deleted(w, r, id, "", "instance "+id)
		return
	}
	if err != nil {
		b.fail(w, err)
		return
	}
	if s := q.Get("service_id"); s != "" && s != inst.SpecID {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "instance %s is of service %s, not %s", id, inst.SpecID, s)
		return
	}
	if p := q.Get("plan_id"); p != "" && p != inst.PlanID && p != inst.PreviousPlanID {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "instance %s is on plan %s, not %s", id, inst.PlanID, p)
		return
	}
	desc := "instance " + id + " was provisioned at " + inst.CreatedAt.UTC().Format(time.RFC3339)
	if !inst.UpdatedAt.IsZero() {
		desc = "instance " + id + " was updated at " + inst.UpdatedAt.UTC().Format(time.RFC3339)
	}
	web.WriteJSON(w, http.StatusOK, api.OSBLastOperation{State: api.Succeeded, Description: desc})
}
