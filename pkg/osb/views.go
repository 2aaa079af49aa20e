package osb

// Catalog views: one broker, several platforms, each with its own broker
// credential and its own part of the catalog. OSB's /v2/catalog carries
// no platform context, so the credential is what tells platforms apart:
// the view is chosen by who authenticated, and everything that platform
// does goes through it:
//
//   - GET /v2/catalog serves the view's services, filtered from the one
//     render the cache holds (no read of its own, whatever the number of
//     views), with the catalog's revision and an ETag of its own;
//   - the change feed carries only the changes of the view's services;
//   - a provision, update or bind of a service outside the view is
//     refused exactly as one of a service the catalog does not hold.
//
// The default view (no Match) holds everything: one credential from the
// broker's own settings, the zero-configuration deployment.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/feed"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// DefaultViewName names the view of the broker's own credential
// (Config.Username and its password) when no views are configured.
const DefaultViewName = "default"

// View is one broker credential and the services a platform that uses it
// sees.
type View struct {
	// Name identifies the view in logs, on the status page and in its
	// catalog's ETag.
	Name string
	// Username and Password are the platform's basic-auth credential;
	// Password checks a presented password (web.MatchPlain, web.MatchSHA256,
	// web.MatchFile: a file is re-read, so a rotation needs no restart).
	Username string
	Password func(string) bool
	// Match decides which services are in the view; nil: every one.
	Match func(ServiceFacts) bool
	// Tag is part of the view's catalog ETag (a digest of its rules), so
	// that new rules at one revision are a new representation.
	Tag string
	// Rules describes the rules for the status page (never a secret).
	Rules []string
}

// ServiceFacts is what a view's rules look at: the registry a service
// comes from, its name and its tags.
type ServiceFacts struct {
	Registry, Name string
	Tags           []string
	// AnyTags says the tags are unknown (a change that takes a service out
	// of the catalog carries no spec): the tag rules are not applied.
	AnyTags bool
}

func (v *View) all() bool { return v == nil || v.Match == nil }

type viewKey struct{}

// viewOf is the view the request authenticated as (nil: every service,
// for handlers reached without the broker's auth, as in tests).
func viewOf(r *http.Request) *View {
	v, _ := r.Context().Value(viewKey{}).(*View)
	return v
}

// views is the broker's views: Config.Views, or the default view.
func (c Config) views() []*View {
	if len(c.Views) == 0 {
		return []*View{{Name: DefaultViewName, Username: c.Username, Password: c.passwordCheck()}}
	}
	out := make([]*View, len(c.Views))
	for i := range c.Views {
		v := c.Views[i]
		if v.Password == nil {
			v.Password = func(string) bool { return false }
		}
		out[i] = &v
	}
	return out
}

// ViewAuth guards the broker API with the views' credentials: the request
// goes on with the view whose user name and password it presents. Every
// view's user and password are checked whatever matched before, so the
// time taken tells neither which user names exist nor which check failed.
func ViewAuth(views []*View, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, cred, err := web.Authorization(r)
		if err != nil {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
			return
		}
		u, p, ok := "", "", false
		if strings.EqualFold(scheme, "Basic") {
			u, p, ok = web.BasicCredentials(cred)
		}
		var chosen *View
		for _, v := range views {
			userOK, passOK := web.EqualSecret(u, v.Username), v.Password(p)
			if userOK && passOK && chosen == nil {
				chosen = v
			}
		}
		if !ok || chosen == nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="specsync", charset="UTF-8"`)
			web.WriteError(w, http.StatusUnauthorized, "Unauthorized", "valid broker credentials (HTTP basic auth) are required")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viewKey{}, chosen)))
	})
}

// servedService is one service of a rendered catalog: its id, what views
// look at, and its piece (its bytes, shared with the full body).
type servedService struct {
	id    string
	facts ServiceFacts
	piece *catalog.Piece
}

// servedServices lists the services the render kept from pieces (all but
// the dropped ones) in render order, with their facts from m.
func servedServices(m *mirror, pieces []*catalog.Piece, drop *catalog.DropError) []servedService {
	dropped := map[string]bool{}
	if drop != nil {
		for _, p := range drop.Problems {
			dropped[p.SpecID] = true
		}
	}
	out := make([]servedService, 0, len(pieces))
	for _, p := range pieces {
		if p == nil || dropped[p.SpecID()] {
			continue
		}
		e := m.specs[p.SpecID()]
		if e == nil {
			continue
		}
		out = append(out, servedService{id: p.SpecID(), facts: e.facts, piece: p})
	}
	return out
}

// viewCatalog is a view's catalog at one revision: filtered once from the
// full render the first time the view asks, then served from memory like
// the full one until the next revision replaces both.
type viewCatalog struct {
	r   *Rendered
	ids map[string]bool
}

// viewMemo holds what a Rendered knows of its views, by view name, and
// the facts of its services by id.
type viewMemo struct {
	mu sync.Mutex
	m  map[string]*viewEntry
	// byID is the served services' facts by id, made once per revision:
	// whether a view holds a service is answered from it, without the
	// view's catalog.
	factsOnce sync.Once
	byID      map[string]ServiceFacts
}

// viewEntry is one view's catalog and count at one revision. Each is
// made once, on its own: a view being encoded keeps no other waiting.
type viewEntry struct {
	catOnce   sync.Once
	cat       *viewCatalog
	countOnce sync.Once
	count     int
}

// entry is the view's entry in r's memo, new if need be.
func (r *Rendered) entry(v *View) *viewEntry {
	r.views.mu.Lock()
	defer r.views.mu.Unlock()
	e := r.views.m[v.Name]
	if e == nil {
		if r.views.m == nil {
			r.views.m = map[string]*viewEntry{}
		}
		e = &viewEntry{}
		r.views.m[v.Name] = e
	}
	return e
}

// forView is the catalog v sees at r's revision: r itself for a view of
// every service. A view's catalog goes through the same forms as the
// full one (encodeForms: gzip, the size limit), with the view's digest
// in both tags. Only the catalog's own requests need it: membership and
// counts come from the facts (holds, viewServices).
func (r *Rendered) forView(v *View) *viewCatalog {
	if v.all() {
		return &viewCatalog{r: r}
	}
	e := r.entry(v)
	e.catOnce.Do(func() { e.cat = r.filter(v) })
	return e.cat
}

// filter makes v's catalog from r: its services, body and forms.
func (r *Rendered) filter(v *View) *viewCatalog {
	var pieces []*catalog.Piece
	ids := map[string]bool{}
	for _, s := range r.served {
		if v.Match(s.facts) {
			pieces = append(pieces, s.piece)
			ids[s.id] = true
		}
	}
	// The full render kept every one of them, so no claim conflicts here:
	// the same services, in the same order, as in the full body.
	body, _ := catalog.AssembleBody(pieces)
	vr, err := encodeForms(r.Revision, body, r.Limit)
	if err != nil {
		// Compressing into memory does not fail; if it did, the view is
		// served in its identity form only (gzip counted as over the limit).
		vr = &Rendered{Revision: r.Revision, body: body, ETag: body.ETag(r.Revision), Services: body.Services(), Limit: r.Limit, GzipBytes: r.Limit + 1}
	}
	vr.Epoch = r.Epoch
	vr.ETag = viewETag(vr.ETag, v)
	if vr.GzipETag != "" {
		vr.GzipETag = strings.TrimSuffix(vr.ETag, `"`) + gzipSuffix + `"`
	}
	return &viewCatalog{r: vr, ids: ids}
}

// holds reports whether v's catalog at r's revision lists the service.
// A provision asks this: it looks at one service's facts, and never
// pays for encoding the view's catalog.
func (r *Rendered) holds(v *View, id string) bool {
	if v.all() {
		return true
	}
	r.views.factsOnce.Do(func() {
		r.views.byID = make(map[string]ServiceFacts, len(r.served))
		for _, s := range r.served {
			r.views.byID[s.id] = s.facts
		}
	})
	f, ok := r.views.byID[id]
	return ok && v.Match(f)
}

// viewServices is how many services v's catalog at r's revision lists,
// counted once per revision without encoding it (for the status page
// and /admin/views).
func (r *Rendered) viewServices(v *View) int {
	if v.all() {
		return r.Services
	}
	e := r.entry(v)
	e.countOnce.Do(func() {
		for _, s := range r.served {
			if v.Match(s.facts) {
				e.count++
			}
		}
	})
	return e.count
}

// viewETag is the body's tag with the view's name and rules digest in
// it: two views never share a tag, and new rules are a new tag.
func viewETag(bodyTag string, v *View) string {
	sum := sha256.Sum256([]byte(v.Name + "\x00" + v.Tag))
	return strings.TrimSuffix(bodyTag, `"`) + "-v" + hex.EncodeToString(sum[:6]) + `"`
}

// errNotInView is the refusal of a service outside the view: word for
// word the store's for a service it does not hold, so a platform cannot
// tell a service it may not see from one that does not exist.
func errNotInView(serviceID string) error {
	return failure.New(failure.NotFound, "service %s is not in the catalog", serviceID)
}

// inView reports whether the request's view holds serviceID, from the
// cached catalog (no read inside the refresh window). A service the
// cached view lacks is looked for once more at the newest revision (a
// service just published), so a refusal is never older than the request.
// When it is not in the view, refuse writes the answer with
// errNotInView; a cache failure is written as such.
func (b *Broker) inView(w http.ResponseWriter, r *http.Request, serviceID string, refuse func(error)) bool {
	v := viewOf(r)
	if v.all() {
		return true
	}
	for _, get := range []func(context.Context) (*Rendered, int64, error){b.Cache.Get, b.Cache.GetFresh} {
		cat, _, err := get(r.Context())
		if err != nil {
			b.fail(w, err)
			return false
		}
		if cat.holds(v, serviceID) {
			return true
		}
	}
	refuse(errNotInView(serviceID))
	return false
}

// feedChange is a committed change as the view's feed carries it, and
// whether it carries it at all. A change of a service whose registry or
// name the view leaves out is not the view's. One whose service is
// outside the view only by its tags comes without its service (a
// removal for the view's watcher, which is what happened to its catalog
// if the service was in it before), unless it created the service. A
// change carries the service's state after it, not before, so the feed
// cannot tell whether such a service was in the view: a view with tag
// rules may see removals of services it never held (applying one is a
// no-op), never a service it does not hold.
func (v *View) feedChange(c store.Change) (api.Change, bool) {
	it := feed.FromChange(c)
	if v.all() {
		return it, true
	}
	if !v.Match(ServiceFacts{Registry: c.Registry, Name: c.Name, AnyTags: true}) {
		return api.Change{}, false
	}
	if it.Service != nil && !v.Match(ServiceFacts{Registry: c.Registry, Name: it.Service.Name, Tags: it.Service.Tags}) {
		if c.Kind == api.ChangeCreated {
			return api.Change{}, false // new to the catalog: never in the view
		}
		it.Service, it.HeldBack, it.Problem = nil, nil, ""
	}
	return it, true
}

// viewInfos lists the views with the services each holds in cat.
func (b *Broker) viewInfos(cat *Rendered) []api.ViewInfo {
	out := make([]api.ViewInfo, len(b.views))
	for i, v := range b.views {
		out[i] = api.ViewInfo{Name: v.Name, Username: v.Username, Rules: append([]string{}, v.Rules...), Services: cat.viewServices(v)}
	}
	return out
}

// adminViews serves GET /admin/views: every view, its rules and how many
// services it holds now (from the cached catalog: no read inside the
// refresh window).
func (b *Broker) adminViews(w http.ResponseWriter, r *http.Request) {
	cat, _, err := b.Cache.Get(r.Context())
	if err != nil {
		b.fail(w, err)
		return
	}
	web.WriteJSON(w, http.StatusOK, api.ViewList{Revision: cat.Revision, Views: b.viewInfos(cat)})
}

// adminViewCatalog serves GET /admin/views/{name}/catalog: the catalog
// exactly as a platform with that view's credential gets it (body, ETag,
// revision, and the same caching headers and If-None-Match), for an
// operator who holds the admin credential and not the platform's
// (`specsync catalog --view NAME`).
func (b *Broker) adminViewCatalog(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	for _, v := range b.views {
		if v.Name == name {
			b.getCatalog(w, r.WithContext(context.WithValue(r.Context(), viewKey{}, v)))
			return
		}
	}
	names := make([]string, len(b.views))
	for i, v := range b.views {
		names[i] = v.Name
	}
	web.WriteError(w, http.StatusNotFound, "NotFound", "no view %s (the views are %s)", web.Quote(name), strings.Join(names, ", "))
}
