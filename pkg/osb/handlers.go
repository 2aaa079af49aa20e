package osb

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/feed"
	"github.com/specsync/specsync/pkg/store"
)

// Config configures the broker surface.
type Config struct {
	Username, Password string // broker basic auth
	// VerifyPassword, when set, checks the broker password instead of
	// Password (e.g. osb.MatchSHA256: the function holds only a digest).
	VerifyPassword func(password string) bool
	// VerifyAdmin accepts admin bearer tokens (GET /registries).
	VerifyAdmin func(r *http.Request, token string) bool
	// MaxBodyBytes bounds request bodies (413 beyond).
	MaxBodyBytes int64
	// RefreshWindow is how long a warm instance serves the catalog without
	// re-reading the revision.
	RefreshWindow time.Duration
	// MaxWait bounds a change feed long-poll (default 50s).
	MaxWait time.Duration
	Logger  *slog.Logger
}

// Broker serves the OSB endpoints.
type Broker struct {
	store *store.Store
	cfg   Config
	Cache *Cache
}

// NewBroker returns the broker on st.
func NewBroker(st *store.Store, cfg Config) *Broker {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Broker{store: st, cfg: cfg, Cache: &Cache{Store: st, Window: cfg.RefreshWindow, Logger: cfg.Logger}}
}

// Handler routes the broker's endpoints; anything else is an OSB 404.
func (b *Broker) Handler() http.Handler {
	mux := http.NewServeMux()
	broker := func(h http.Handler) http.Handler {
		return RequestIdentity(BasicAuthFunc(b.cfg.Username, b.cfg.passwordCheck(), Version(h)))
	}
	mux.Handle("/v2/catalog", broker(Methods(map[string]http.HandlerFunc{http.MethodGet: b.getCatalog})))
	mux.Handle("/v2/catalog/changes", broker(Methods(map[string]http.HandlerFunc{http.MethodGet: b.getChanges})))
	mux.Handle("/v2/service_instances/{id}", broker(Methods(map[string]http.HandlerFunc{
		http.MethodPut: b.putInstance, http.MethodGet: b.getInstance, http.MethodDelete: b.deleteInstance,
	})))
	verify := b.cfg.VerifyAdmin
	if verify == nil {
		verify = func(*http.Request, string) bool { return false }
	}
	mux.Handle("/registries", BearerAuth(verify, Methods(map[string]http.HandlerFunc{http.MethodGet: b.getRegistries})))
	b.adminRoutes(mux, verify) // admin.go: /admin/*, /status
	mux.HandleFunc("/", NotFound)
	return mux
}

func (b *Broker) getCatalog(w http.ResponseWriter, r *http.Request) {
	get := b.Cache.Get
	if wantsFresh(r.Header) {
		get = b.Cache.GetFresh // read-your-writes: no answer older than the request
	}
	cat, reads, err := get(r.Context())
	if err != nil {
		b.cfg.Logger.Error("catalog unavailable", "error", err)
		WriteFailure(w, err)
		return
	}
	w.Header().Set("ETag", cat.ETag)
	w.Header().Set(feed.RevisionHeader, strconv.FormatInt(cat.Revision, 10))
	w.Header().Set("X-Specsync-Firestore-Reads", strconv.FormatInt(reads, 10))
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, cat.ETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(cat.Body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(cat.Body)
	}
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

var ociPlatform = regexp.MustCompile(`^[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?$`)

var instanceID = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,255}$`)

func validInstanceID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !instanceID.MatchString(id) {
		WriteError(w, http.StatusBadRequest, "BadRequest", "instance id %q must be 1-255 letters, digits or . _ ~ -", id)
		return "", false
	}
	return id, true
}

// provisionRequest is the part of OSB's provision body specsync records.
type provisionRequest struct {
	ServiceID  string          `json:"service_id"`
	PlanID     string          `json:"plan_id"`
	Context    json.RawMessage `json:"context,omitempty"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// The plan's maintenance_info the platform saw in the catalog.
	MaintenanceInfo *struct {
		Version string `json:"version"`
	} `json:"maintenance_info,omitempty"`
	// Deprecated OSB fields, accepted and ignored.
	OrganizationGUID string `json:"organization_guid,omitempty"`
	SpaceGUID        string `json:"space_guid,omitempty"`
}

func (b *Broker) putInstance(w http.ResponseWriter, r *http.Request) {
	id, ok := validInstanceID(w, r)
	if !ok {
		return
	}
	var req provisionRequest
	if !DecodeBody(w, r, b.cfg.MaxBodyBytes, &req) {
		return
	}
	if req.ServiceID == "" || req.PlanID == "" {
		WriteError(w, http.StatusBadRequest, "BadRequest", "service_id and plan_id are required")
		return
	}
	var ctxMap map[string]any
	if len(req.Context) > 0 && string(req.Context) != "null" {
		if err := json.Unmarshal(req.Context, &ctxMap); err != nil {
			WriteError(w, http.StatusBadRequest, "BadRequest", "context must be a JSON object")
			return
		}
	}
	if len(req.Parameters) > 0 && string(req.Parameters) != "null" {
		var params map[string]any
		if err := json.Unmarshal(req.Parameters, &params); err != nil {
			WriteError(w, http.StatusBadRequest, "BadRequest", "parameters must be a JSON object")
			return
		}
	}
	// OSB's context.platform names the platform kind (kubernetes,
	// cloudfoundry); the OCI platform an instance runs on is specsync's
	// context.oci_platform extension (os/arch[/variant]).
	platform, _ := ctxMap["oci_platform"].(string)
	if platform != "" && !ociPlatform.MatchString(platform) {
		WriteError(w, http.StatusBadRequest, "BadRequest", "context.oci_platform %q is not os/arch[/variant]", platform)
		return
	}
	inst := store.Instance{ID: id, SpecID: req.ServiceID, PlanID: req.PlanID, Platform: platform, Context: ctxMap}
	if req.MaintenanceInfo != nil {
		if req.MaintenanceInfo.Version == "" {
			WriteError(w, http.StatusBadRequest, "BadRequest", "maintenance_info.version is required when maintenance_info is given")
			return
		}
		inst.MaintenanceVersion = req.MaintenanceInfo.Version
	}
	res, err := b.store.CreateInstance(r.Context(), inst)
	switch {
	case errors.Is(err, store.ErrMaintenanceInfo):
		WriteError(w, http.StatusUnprocessableEntity, "MaintenanceInfoConflict", "%s; read the catalog again", err)
	case err == nil && res.Existed:
		WriteJSON(w, http.StatusOK, struct{}{})
	case err == nil:
		WriteJSON(w, http.StatusCreated, struct{}{})
	case failure.Is(err, failure.NotFound), failure.Is(err, failure.Invalid):
		// OSB: a service or plan the catalog does not offer (unknown, or
		// marked for deletion) is a bad request. Contention (Precondition)
		// falls through to a retryable 422.
		WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
	default:
		WriteFailure(w, err)
	}
}

type instanceResponse struct {
	ServiceID string `json:"service_id"`
	PlanID    string `json:"plan_id"`
}

func (b *Broker) getInstance(w http.ResponseWriter, r *http.Request) {
	id, ok := validInstanceID(w, r)
	if !ok {
		return
	}
	inst, err := b.store.GetInstance(r.Context(), id)
	if err != nil {
		WriteFailure(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, instanceResponse{ServiceID: inst.SpecID, PlanID: inst.PlanID})
}

func (b *Broker) deleteInstance(w http.ResponseWriter, r *http.Request) {
	id, ok := validInstanceID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	serviceID, planID := q.Get("service_id"), q.Get("plan_id")
	if serviceID == "" || planID == "" {
		WriteError(w, http.StatusBadRequest, "BadRequest", "service_id and plan_id query parameters are required")
		return
	}
	inst, err := b.store.GetInstance(r.Context(), id)
	if failure.Is(err, failure.NotFound) {
		WriteJSON(w, http.StatusGone, struct{}{})
		return
	}
	if err != nil {
		WriteFailure(w, err)
		return
	}
	if inst.SpecID != serviceID || inst.PlanID != planID {
		WriteError(w, http.StatusBadRequest, "BadRequest", "instance %s is of service %s plan %s, not service %s plan %s", id, inst.SpecID, inst.PlanID, serviceID, planID)
		return
	}
	if _, err := b.store.DeleteInstance(r.Context(), id); err != nil {
		if failure.Is(err, failure.NotFound) {
			WriteJSON(w, http.StatusGone, struct{}{})
			return
		}
		WriteFailure(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, struct{}{})
}

func (b *Broker) getRegistries(w http.ResponseWriter, r *http.Request) {
	statuses, err := b.store.RegistryStatuses(r.Context())
	if err != nil {
		WriteFailure(w, err)
		return
	}
	if statuses == nil {
		statuses = []store.RegistryStatus{}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"registries": statuses})
}
