// Package osb is the Open Service Broker HTTP surface specsync serves:
// GET /v2/catalog and its change feed, the bookkeeping of instances and
// bindings under /v2/service_instances (provision, fetch, update,
// deprovision, bind, unbind, last_operation), and the admin view of
// registry status. Handlers decode, call the store or the catalog cache,
// and encode; every error body is OSB-shaped.
package osb

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// Config configures the broker surface.
type Config struct {
	Username, Password string // broker basic auth
	// VerifyPassword, when set, checks the broker password instead of
	// Password (e.g. web.MatchSHA256: the function holds only a digest).
	VerifyPassword func(password string) bool
	// Views, when set, are the broker's credentials, each with the part
	// of the catalog its platform sees (views.go); Username and the
	// password are then unused. Unset: one view of everything with them.
	Views []View
	// VerifyAdmin accepts admin bearer tokens (GET /registries).
	VerifyAdmin func(r *http.Request, token string) bool
	// MaxBodyBytes bounds request bodies (413 beyond; a Content-Length
	// over it is refused unread).
	MaxBodyBytes int64
	// RefreshWindow is how long a warm instance serves the catalog without
	// re-reading the revision.
	RefreshWindow time.Duration
	// MaxWait bounds a change feed long-poll (default 50s).
	MaxWait time.Duration
	// MaxCatalogBytes is the largest catalog body served, in either form
	// (default DefaultMaxCatalogBytes, Cloud Run's response limit).
	MaxCatalogBytes int64
	Logger          *slog.Logger
	// DashboardURL, when set, is the deployment's monitoring dashboard:
	// the status page links to it.
	DashboardURL string
}

// Broker serves the OSB endpoints.
type Broker struct {
	store *store.Store
	cfg   Config
	views []*View
	Cache *Cache
	// listen tells waiting long polls of a new revision (listen.go).
	listen *revisionListener
}

// NewBroker returns the broker on st.
func NewBroker(st *store.Store, cfg Config) *Broker {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = web.DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Broker{store: st, cfg: cfg, views: cfg.views(), Cache: &Cache{Store: st, Window: cfg.RefreshWindow, Logger: cfg.Logger, MaxBytes: cfg.MaxCatalogBytes},
		listen: newRevisionListener(st, cfg.Logger)}
}

// Handler routes the broker's endpoints; anything else is an OSB 404.
func (b *Broker) Handler() http.Handler {
	mux := http.NewServeMux()
	broker := func(h http.Handler) http.Handler {
		return ViewAuth(b.views, Version(h))
	}
	mux.Handle("/v2/catalog", broker(web.Methods(map[string]http.HandlerFunc{http.MethodGet: b.getCatalog})))
	mux.Handle("/v2/catalog/changes", broker(web.Methods(map[string]http.HandlerFunc{http.MethodGet: b.getChanges})))
	// Instances and their bindings (instances.go, bindings.go). Every
	// operation completes before it answers, so accepts_incomplete is
	// accepted and ignored, and last_operation answers for the operation
	// that already finished.
	mux.Handle("/v2/service_instances/{id}", broker(web.Methods(map[string]http.HandlerFunc{
		http.MethodPut: b.putInstance, http.MethodGet: b.getInstance, http.MethodPatch: b.patchInstance, http.MethodDelete: b.deleteInstance,
	})))
	mux.Handle("/v2/service_instances/{id}/last_operation", broker(web.Methods(map[string]http.HandlerFunc{http.MethodGet: b.instanceLastOperation})))
	mux.Handle("/v2/service_instances/{id}/service_bindings/{binding_id}", broker(web.Methods(map[string]http.HandlerFunc{
		http.MethodPut: b.putBinding, http.MethodGet: b.getBinding, http.MethodDelete: b.deleteBinding,
	})))
	mux.Handle("/v2/service_instances/{id}/service_bindings/{binding_id}/last_operation", broker(web.Methods(map[string]http.HandlerFunc{http.MethodGet: b.bindingLastOperation})))
	verify := b.cfg.VerifyAdmin
	if verify == nil {
		verify = func(*http.Request, string) bool { return false }
	}
	mux.Handle("/registries", web.AdminAuth(verify, web.Methods(map[string]http.HandlerFunc{http.MethodGet: b.getRegistries})))
	b.adminRoutes(mux, verify) // admin.go: /admin/*, /status
	mux.HandleFunc("/", web.NotFound)
	// The request identity outside everything, so that every answer
	// echoes it: a 413 of web.LimitBody's too.
	return web.RequestIdentity(web.LimitBody(b.cfg.MaxBodyBytes, mux))
}

func (b *Broker) getCatalog(w http.ResponseWriter, r *http.Request) {
	get := b.Cache.Get
	if wantsFresh(r.Header) {
		get = b.Cache.GetFresh // read-your-writes: no answer older than the request
	}
	full, reads, err := get(r.Context())
	if err != nil {
		b.cfg.Logger.ErrorContext(r.Context(), "catalog unavailable", "error", err)
		b.fail(w, err)
		return
	}
	cat := full.forView(viewOf(r)).r // views.go
	// The store's epoch on every answer (serveCatalog sets the tag and
	// the revision of the form it serves).
	if cat.Epoch != "" {
		w.Header().Set(api.EpochHeader, cat.Epoch)
	}
	w.Header().Set("X-Specsync-Firestore-Reads", strconv.FormatInt(reads, 10))
	serveCatalog(w, r, cat) // catalogforms.go: gzip or identity, 304, or too large
}

// etagMatch implements If-None-Match's list and "*" (weak comparison, as
// RFC 9110 asks for If-None-Match).
func etagMatch(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "*" || trimWeak(part) == trimWeak(etag) {
			return true
		}
	}
	return false
}

func trimWeak(t string) string {
	if len(t) > 2 && t[:2] == "W/" {
		return t[2:]
	}
	return t
}

func (b *Broker) getRegistries(w http.ResponseWriter, r *http.Request) {
	statuses, err := b.store.RegistryStatuses(r.Context())
	if err != nil {
		b.fail(w, err)
		return
	}
	if statuses == nil {
		statuses = []api.RegistryStatus{}
	}
	web.WriteJSON(w, http.StatusOK, api.RegistryList{Registries: statuses})
}

// describe and fail are web.Describe and web.WriteFailure logging to the
// broker's logger: the whole text of a store error goes where the
// broker's other lines go (and where its tests look for secrets).
func (b *Broker) describe(err error) string { return web.DescribeTo(b.cfg.Logger, err) }

func (b *Broker) fail(w http.ResponseWriter, err error) { web.WriteFailureTo(w, b.cfg.Logger, err) }
