package osb

// Read-only admin endpoints of the catalog function, for the specsync CLI
// and the status page (status.go). They sit behind the admin credential
// (the same verifier as GET /registries) and only read.
//
//	GET /admin/specs?registry=R&state=active|marked
//	GET /admin/instances?registry=R&marked=true&service_id=ID
//	GET /admin/operations?limit=N
//	GET /admin/views, /admin/views/{name}/catalog      (views.go)
//	GET /status                                    (HTML)

import (
	"context"
	"net/http"
	"sort"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// Limits of the admin listings.
const (
	defaultOperations = 20
	maxOperations     = 100
	instancesPerSpec  = 500
)

// adminRoutes adds the admin endpoints to mux.
func (b *Broker) adminRoutes(mux *http.ServeMux, verify func(*http.Request, string) bool) {
	get := func(h http.HandlerFunc) http.Handler {
		return web.AdminAuth(verify, web.Methods(map[string]http.HandlerFunc{http.MethodGet: h}))
	}
	mux.Handle("/admin/specs", get(b.adminSpecs))
	mux.Handle("/admin/instances", get(b.adminInstances))
	mux.Handle("/admin/operations", get(b.adminOperations))
	mux.Handle("/admin/views", get(b.adminViews))
	mux.Handle("/admin/views/{name}/catalog", get(b.adminViewCatalog))
	mux.Handle("/status", get(b.statusPage))
}

// specView is a stored spec as the admin listing shows it.
func specView(r store.SpecRecord) api.SpecView {
	v := api.SpecView{
		ID: r.ID, Name: r.Name, Registry: r.Registry, Entry: r.Entry, Ref: r.Ref, State: r.State,
		Digest: r.Digest, Generation: r.Generation, Platforms: r.Platforms, Plans: []api.PlanView{},
		Instances: r.Instances, PlanInstances: r.PlanInstances, PlatformInstances: r.PlatformInstances,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, MarkedRun: r.MarkedRun, EntryError: r.EntryError, HeldBack: (*api.HeldBackSpec)(r.HeldBack),
	}
	if !r.MarkedAt.IsZero() {
		t := r.MarkedAt
		v.MarkedAt = &t
	}
	if s, err := r.Spec(); err == nil {
		for _, p := range s.Plans {
			v.Plans = append(v.Plans, api.PlanView{ID: p.ID, Name: p.Name})
		}
	}
	return v
}

// specFilter reads registry= and state= (or marked=true).
func specFilter(w http.ResponseWriter, r *http.Request, allowed ...string) (store.SpecFilter, bool) {
	q := r.URL.Query()
	known := map[string]bool{"registry": true, "state": true, "marked": true}
	for _, k := range allowed {
		known[k] = true
	}
	for k := range q {
		if !known[k] {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "unknown query parameter %s", web.Quote(k))
			return store.SpecFilter{}, false
		}
	}
	f := store.SpecFilter{Registry: q.Get("registry"), State: api.SpecState(q.Get("state"))}
	if f.Registry != "" {
		if err := web.CheckRegistryName("registry", f.Registry); err != nil {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
			return f, false
		}
	}
	if !checkIDs(w, "service_id", q.Get("service_id")) {
		return f, false
	}
	if f.State != "" && f.State != api.SpecActive && f.State != api.SpecMarked {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "state=%s is not active or marked", web.Quote(string(f.State)))
		return f, false
	}
	if m := q.Get("marked"); m != "" {
		marked, err := strconv.ParseBool(m)
		if err != nil {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "marked=%s is not true or false", web.Quote(m))
			return f, false
		}
		if marked {
			if f.State == api.SpecActive {
				web.WriteError(w, http.StatusBadRequest, "BadRequest", "marked=true contradicts state=active")
				return f, false
			}
			f.State = api.SpecMarked
		}
	}
	return f, true
}

func (b *Broker) adminSpecs(w http.ResponseWriter, r *http.Request) {
	f, ok := specFilter(w, r)
	if !ok {
		return
	}
	recs, err := b.store.ListSpecs(r.Context(), f)
	if err != nil {
		b.fail(w, err)
		return
	}
	out := api.SpecList{Specs: make([]api.SpecView, 0, len(recs))}
	for _, rec := range recs {
		out.Specs = append(out.Specs, specView(rec))
	}
	web.WriteJSON(w, http.StatusOK, out)
}

// instancesOf lists the instances of the selected specs. The store
// counted each spec's instances when it read the specs, so only specs
// with a count are queried.
func (b *Broker) instancesOf(ctx context.Context, specs []store.SpecRecord) ([]api.InstanceView, error) {
	out := []api.InstanceView{}
	for _, rec := range specs {
		if rec.Instances <= 0 {
			continue
		}
		insts, err := b.store.SpecInstances(ctx, rec.ID, instancesPerSpec)
		if err != nil {
			return nil, err
		}
		sort.Slice(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
		view := specView(rec)
		for _, in := range insts {
			iv := api.InstanceView{ID: in.ID, ServiceID: in.SpecID, ServiceName: rec.Name, ServiceState: rec.State, Registry: rec.Registry,
				PlanID: in.PlanID, Platform: in.Platform, Context: in.Context, OrganizationGUID: in.OrganizationGUID, SpaceGUID: in.SpaceGUID,
				MaintenanceVersion: in.MaintenanceVersion, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt, PreviousPlanID: in.PreviousPlanID}
			for _, p := range view.Plans {
				if p.ID == in.PlanID {
					iv.PlanName = p.Name
				}
			}
			out = append(out, iv)
		}
	}
	return out, nil
}

func (b *Broker) adminInstances(w http.ResponseWriter, r *http.Request) {
	f, ok := specFilter(w, r, "service_id")
	if !ok {
		return
	}
	var specs []store.SpecRecord
	if id := r.URL.Query().Get("service_id"); id != "" {
		rec, err := b.store.GetSpec(r.Context(), id)
		if failure.Is(err, failure.NotFound) {
			web.WriteJSON(w, http.StatusOK, api.InstanceList{Instances: []api.InstanceView{}})
			return
		}
		if err != nil {
			b.fail(w, err)
			return
		}
		if (f.Registry == "" || rec.Registry == f.Registry) && (f.State == "" || rec.State == f.State) {
			specs = []store.SpecRecord{*rec}
		}
	} else {
		var err error
		if specs, err = b.store.ListSpecs(r.Context(), f); err != nil {
			b.fail(w, err)
			return
		}
	}
	out, err := b.instancesOf(r.Context(), specs)
	if err != nil {
		b.fail(w, err)
		return
	}
	if err := b.countBindings(r.Context(), out); err != nil {
		b.fail(w, err)
		return
	}
	web.WriteJSON(w, http.StatusOK, api.InstanceList{Instances: out})
}

// countBindings fills in each instance's bindings: one count query an
// instance (a read per thousand bindings, at least one), a few at once.
// Only the listing pays it: the status page shows no bindings.
func (b *Broker) countBindings(ctx context.Context, insts []api.InstanceView) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range insts {
		g.Go(func() error {
			n, err := b.store.CountBindings(ctx, insts[i].ID)
			insts[i].Bindings = n
			return err
		})
	}
	return g.Wait()
}

func operationsLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	for k := range r.URL.Query() {
		if k != "limit" {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "unknown query parameter %s (only limit is known)", web.Quote(k))
			return 0, false
		}
	}
	n := defaultOperations
	if v := r.URL.Query().Get("limit"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > maxOperations {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "limit=%s is not a number from 1 to %d", web.Quote(v), maxOperations)
			return 0, false
		}
	}
	return n, true
}

func (b *Broker) adminOperations(w http.ResponseWriter, r *http.Request) {
	n, ok := operationsLimit(w, r)
	if !ok {
		return
	}
	ops, err := b.store.RecentOperations(r.Context(), n)
	if err != nil {
		b.fail(w, err)
		return
	}
	out := api.OperationList{Operations: make([]api.OperationView, 0, len(ops))}
	for _, op := range ops {
		if op.Results == nil {
			op.Results = map[string]api.RegistryResult{}
		}
		out.Operations = append(out.Operations, api.OperationView{Operation: op, Total: op.Firestore()})
	}
	web.WriteJSON(w, http.StatusOK, out)
}
