package osb

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// The binding endpoints. A binding is bookkeeping: specsync keeps the
// catalog and the records of what was provisioned and bound, and
// provisions nothing itself, so it has no credentials to give. Every
// binding answer is {} (no credentials, endpoints or volume mounts), and
// that is the truth: whatever runs the service hands out its credentials.

// bindingIDs reads the instance and binding ids of a binding's path,
// writing a 400 when either is not a valid id.
func bindingIDs(w http.ResponseWriter, r *http.Request) (instanceID, bindingID string, ok bool) {
	if instanceID, ok = validInstanceID(w, r); !ok {
		return "", "", false
	}
	bindingID, ok = pathID(w, r, "binding_id", "binding")
	return instanceID, bindingID, ok
}

// bindRequest is OSB's bind body.
type bindRequest struct {
	ServiceID string          `json:"service_id"`
	PlanID    string          `json:"plan_id"`
	Context   json.RawMessage `json:"context,omitempty"`
	// AppGUID is deprecated in favour of bind_resource.app_guid.
	AppGUID      string `json:"app_guid,omitempty"`
	BindResource *struct {
		AppGUID string `json:"app_guid,omitempty"`
		Route   string `json:"route,omitempty"`
	} `json:"bind_resource,omitempty"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// PredecessorBindingID asks for a rotation (OSB 2.17).
	PredecessorBindingID *string `json:"predecessor_binding_id,omitempty"`
}

// putBinding and deleteBinding are the routes' handlers: each write is
// logged (logWrite) with who asked for it.
func (b *Broker) putBinding(w http.ResponseWriter, r *http.Request) {
	b.logWrite(w, r, "bind", b.bind)
}

func (b *Broker) deleteBinding(w http.ResponseWriter, r *http.Request) {
	b.logWrite(w, r, "unbind", b.unbind)
}

// bind is OSB's bind: 201 {} recorded, 200 {} the same again.
func (b *Broker) bind(w http.ResponseWriter, r *http.Request) {
	instanceID, bindingID, ok := bindingIDs(w, r)
	if !ok {
		return
	}
	var req bindRequest
	if !web.DecodeBody(w, r, b.cfg.MaxBodyBytes, &req) {
		return
	}
	if req.PredecessorBindingID != nil {
		// The catalog says binding_rotatable false for every plan, and
		// OSB forbids the platform to rotate then.
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "binding rotation (predecessor_binding_id) is not supported: no plan is binding_rotatable; create a new binding and delete the old one")
		return
	}
	if req.ServiceID == "" || req.PlanID == "" {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "service_id and plan_id are required")
		return
	}
	if !checkIDs(w, "service_id", req.ServiceID, "plan_id", req.PlanID) {
		return
	}
	ctxMap, ok := contextObject(w, req.Context)
	if !ok {
		return
	}
	// Bind parameters are checked to be an object and never recorded (they
	// may hold secrets): the store keeps only a salted slow digest.
	if _, ok := decodeObject(w, req.Parameters, "parameters"); !ok {
		return
	}
	if !checkText(w, text{"app_guid", req.AppGUID, MaxTextBytes}) {
		return
	}
	bind := store.Binding{ID: bindingID, InstanceID: instanceID, SpecID: req.ServiceID, PlanID: req.PlanID, AppGUID: req.AppGUID, Context: ctxMap, Parameters: req.Parameters}
	if br := req.BindResource; br != nil {
		if !checkText(w, text{"bind_resource.app_guid", br.AppGUID, MaxTextBytes}, text{"bind_resource.route", br.Route, MaxRouteBytes}) {
			return
		}
		if br.AppGUID != "" && req.AppGUID != "" && br.AppGUID != req.AppGUID {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "app_guid %q and bind_resource.app_guid %q differ", req.AppGUID, br.AppGUID)
			return
		}
		if br.AppGUID != "" {
			bind.AppGUID = br.AppGUID
		}
		bind.Route = br.Route
	}
	if !b.inView(w, r, req.ServiceID, func(err error) { web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", b.describe(err)) }) {
		return
	}
	res, err := b.store.CreateBinding(r.Context(), bind)
	switch {
	case err == nil && res.Existed:
		web.WriteJSON(w, http.StatusOK, struct{}{})
	case err == nil:
		web.WriteJSON(w, http.StatusCreated, struct{}{})
	case errors.Is(err, store.ErrNoInstance):
		// OSB defines no 404 for a bind: instance_id "MUST be the ID of a
		// previously provisioned Service Instance".
		web.WriteError(w, http.StatusBadRequest, "InstanceNotFound", "%s", b.describe(err))
	case errors.Is(err, store.ErrNotBindable):
		web.WriteError(w, http.StatusBadRequest, "NotBindable", "%s", b.describe(err))
	case errors.Is(err, store.ErrBindingLimit):
		web.WriteError(w, http.StatusUnprocessableEntity, "BindingLimit", "%s; delete bindings it no longer needs", b.describe(err))
	case failure.Is(err, failure.NotFound), failure.Is(err, failure.Invalid):
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", b.describe(err))
	default:
		b.fail(w, err)
	}
}

// getBinding is OSB's fetch of a binding (bindings_retrievable): {}, the
// same nothing the bind answered.
func (b *Broker) getBinding(w http.ResponseWriter, r *http.Request) {
	instanceID, bindingID, ok := bindingIDs(w, r)
	if !ok {
		return
	}
	if _, err := b.store.GetBinding(r.Context(), instanceID, bindingID); err != nil {
		b.fail(w, err)
		return
	}
	web.WriteJSON(w, http.StatusOK, struct{}{})
}

// unbind is OSB's unbind: 200 {} deleted, 410 {} no such binding.
func (b *Broker) unbind(w http.ResponseWriter, r *http.Request) {
	instanceID, bindingID, ok := bindingIDs(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	u := store.Unbind{InstanceID: instanceID, BindingID: bindingID, ServiceID: q.Get("service_id"), PlanID: q.Get("plan_id")}
	if u.ServiceID == "" || u.PlanID == "" {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "service_id and plan_id query parameters are required")
		return
	}
	if !checkIDs(w, "service_id", u.ServiceID, "plan_id", u.PlanID) {
		return
	}
	_, err := b.store.DeleteBinding(r.Context(), u)
	switch {
	case err == nil:
		web.WriteJSON(w, http.StatusOK, struct{}{})
	case failure.Is(err, failure.NotFound):
		web.WriteJSON(w, http.StatusGone, struct{}{})
	case failure.Is(err, failure.Invalid):
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", b.describe(err))
	default:
		b.fail(w, err)
	}
}

// bindingLastOperation answers a platform that polls a binding: the bind
// finished before it was answered; an unbound binding (or one whose
// instance was deprovisioned) is 410, one that never existed 404.
func (b *Broker) bindingLastOperation(w http.ResponseWriter, r *http.Request) {
	instanceID, bindingID, ok := bindingIDs(w, r)
	if !ok || noOperation(w, r) {
		return
	}
	bind, err := b.store.GetBinding(r.Context(), instanceID, bindingID)
	if failure.Is(err, failure.NotFound) {
		b.deleted(w, r, instanceID, bindingID, "binding "+bindingID+" of instance "+instanceID)
		return
	}
	if err != nil {
		b.fail(w, err)
		return
	}
	web.WriteJSON(w, http.StatusOK, api.OSBLastOperation{State: api.Succeeded,
		Description: "binding " + bindingID + " of instance " + instanceID + " was created at " + bind.CreatedAt.UTC().Format(time.RFC3339)})
}
