package osb

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/store"
)

// Cache holds the rendered catalog of a warm instance, and the specs
// behind it. It re-reads the catalog revision at most once per Window
// (every time for GetFresh); a new revision R+k costs the k changes after
// the revision R it holds, applied to its specs, and only a cold instance,
// changes it can no longer read, or more changes than specs cost the
// query of every active spec and a full render.
//
// # What the cache holds at revision R
//
// A full render reads the revision R and the active specs as of the same
// snapshot (the revision read's time T): every change up to R, and the
// spec writes of changes still pending at T, which will get revisions
// after R. Each spec the cache holds, in the catalog or not, is its state
// as of a commit time: T for what the full render read, the write time of
// the change that last moved it otherwise. A change is applied only if it
// was written after the state the cache holds for its spec, so:
//
//   - a change the full render already saw (pending then, committed
//     since) is not applied again, and a spec never goes back to an older
//     state than one already served;
//   - changes of one spec numbered out of write order (registry A deletes
//     it, registry B creates it again and commits first) end in the state
//     written last, as the specs themselves do.
//
// Each change carries the whole state of its service, so once every
// change written is committed and applied, the cache holds exactly the
// specs a full render reads, and renders them the same way: all of them
// in created_at order through catalog.Assemble, so the oldest claimant of
// a name keeps it and the next one appears when it leaves.
type Cache struct {
	Store  *store.Store
	Window time.Duration
	Logger *slog.Logger
	Now    func() time.Time
	// MaxBytes is the largest catalog body served, in either form
	// (DefaultMaxCatalogBytes when 0): a form over it is refused at
	// render time, never cut (catalogforms.go).
	MaxBytes int64

	once sync.Once
	// sem lets one refresh run at a time; the others wait for it (or for
	// their request to end) and reuse what it read.
	sem chan struct{}
	// cur is what requests are served: replaced whole, never modified, so
	// a request inside the window reads it without waiting for a refresh.
	cur atomic.Pointer[current]
	// checks counts the revision reads started.
	checks atomic.Int64
	// waiting counts the callers waiting for sem (for tests and logs).
	waiting atomic.Int64
	// specs is what cur was rendered from; only the refresh that holds
	// sem touches it.
	specs *mirror
}

// Rendered is the catalog at one revision, ready to serve in either
// form (catalogforms.go). It is never modified once served.
type Rendered struct {
	Revision int64
	// body is the JSON as rendered (the identity form), made once: the
	// cache's pieces' own bytes, written a piece at a time and never
	// copied into one buffer (catalog.Body); the gzip form is made from
	// it.
	body *catalog.Body
	ETag string
	// Gzip is the body gzip-compressed, GzipETag its tag (ETag with
	// "-gz"); both empty when that form is over Limit. GzipBytes is its
	// size either way.
	Gzip      []byte
	GzipETag  string
	GzipBytes int64
	// Services is how many services the body lists.
	Services int
	// Limit is the largest body served; a form over it is refused.
	Limit int64

	// Epoch is the store's (api.EpochHeader): a revision means something
	// only with it.
	Epoch string
}

// Body is the identity form in one new buffer, for tests and tools: the
// handler writes it from the pieces.
func (r *Rendered) Body() []byte { return r.body.Bytes() }

// Size is the identity form's length in bytes.
func (r *Rendered) Size() int { return r.body.Len() }

// current is the served catalog and when its revision was last read.
type current struct {
	r *Rendered
	// checked is when the last revision read that confirmed r started.
	checked time.Time
	// check numbers that read (Cache.checks).
	check int64
	// how is what that read cost: "unchanged", "changes", or "full"
	// with the reason ("full: cold", "full: bound", "full: gone",
	// "full: old change", "full: behind").
	how string
}

// changePage is how many changes one query of a refresh reads: the
// feed's page, so a refresh after many changes never holds one huge
// answer.
const changePage = 500

// Get returns the current catalog and how many Firestore documents this
// call read (0 when served from memory inside the window).
func (c *Cache) Get(ctx context.Context) (*Rendered, int64, error) {
	if cur := c.cur.Load(); cur != nil && c.now().Sub(cur.checked) < c.Window {
		return cur.r, 0, nil
	}
	return c.refresh(ctx, false)
}

// GetFresh is Get for a caller that must see every revision committed
// before it asked (a request with Cache-Control: no-cache): it reads the
// revision whatever the window, then takes the usual path. Callers that
// arrive together share one read that started after all of them.
func (c *Cache) GetFresh(ctx context.Context) (*Rendered, int64, error) {
	return c.refresh(ctx, true)
}

func (c *Cache) refresh(ctx context.Context, fresh bool) (*Rendered, int64, error) {
	arrived := c.checks.Load()
	c.once.Do(func() { c.sem = make(chan struct{}, 1) })
	c.waiting.Add(1)
	select {
	case c.sem <- struct{}{}:
		c.waiting.Add(-1)
	case <-ctx.Done():
		c.waiting.Add(-1)
		return nil, 0, ctx.Err()
	}
	defer func() { <-c.sem }()
	// A read that started after this caller arrived is as fresh as its
	// own would be; inside the window any read will do.
	if cur := c.cur.Load(); cur != nil && (cur.check > arrived || !fresh && c.now().Sub(cur.checked) < c.Window) {
		return cur.r, 0, nil
	}
	check, started := c.checks.Add(1), c.now()
	ops := &store.Ops{}
	r, how, err := c.load(ctx, c.Store.WithOps(ops))
	reads := ops.Snapshot().Reads
	if err != nil {
		return nil, reads, err
	}
	c.cur.Store(&current{r: r, checked: started, check: check, how: how})
	c.logger().Debug("catalog refreshed", "revision", r.Revision, "how", how, "reads", reads, "fresh", fresh)
	return r, reads, nil
}

// load reads the revision and brings the catalog to it: nothing to do
// when it has not moved, the changes since when they can be read, a full
// render otherwise.
func (c *Cache) load(ctx context.Context, st *store.Store) (*Rendered, string, error) {
	meta, at, err := st.CatalogMetaAt(ctx)
	if err != nil {
		return nil, "", err
	}
	rev, epoch := meta.Revision, meta.Epoch
	cur := c.cur.Load()
	if cur != nil && cur.r.Revision == rev && c.specs != nil && c.specs.rev == rev && c.specs.epoch == epoch {
		return cur.r, "unchanged", nil
	}
	how := "full: cold"
	if m := c.specs; m != nil && m.epoch != epoch {
		// Another store (recreated, restored): its revisions are not
		// this mirror's, whatever their numbers.
		how = "full: epoch"
	} else if m != nil && rev > m.rev {
		why, err := c.catchUp(ctx, st, m, rev)
		if err != nil {
			return nil, "", err
		}
		if why == "" {
			r, err := c.render(m)
			return r, "changes", err
		}
		how = "full: " + why
	} else if m != nil {
		how = "full: behind" // the revision went back: another database
	}
	recs, err := st.ActiveSpecsAt(ctx, at)
	if err != nil {
		return nil, "", err
	}
	m := &mirror{rev: rev, epoch: epoch, specs: make(map[string]*mirrored, len(recs))}
	for i := range recs {
		s, err := recs[i].Spec()
		if err != nil {
			c.logger().Error("stored spec does not decode; left out of the catalog", "spec", recs[i].ID, "error", err)
			m.specs[recs[i].ID] = &mirrored{asOf: at}
			continue
		}
		m.specs[recs[i].ID] = &mirrored{asOf: at, createdAt: recs[i].CreatedAt,
			piece: catalog.NewPiece(catalog.Offering{Spec: s, Generation: recs[i].Generation})}
		// The stored spec is in the piece now: let it go as the loop goes,
		// so the records and the pieces (each about the catalog's size)
		// are never both held whole.
		recs[i] = store.SpecRecord{}
	}
	m.base = at
	c.specs = m
	r, err := c.render(m)
	return r, how, err
}

// catchUp applies the changes after m.rev up to rev to m. It returns
// why not, with m untouched, when they cannot be applied: more of them
// than specs m holds ("bound": a full render reads each spec once,
// however often it changed, and this keeps a refresh's reads and memory
// under a full render's: the import of a registry, or most of the catalog
// replaced), some no longer retained ("gone", the feed's 410), or a
// change that puts a spec in the catalog written by code that did not
// record its created_at ("old change").
func (c *Cache) catchUp(ctx context.Context, st *store.Store, m *mirror, rev int64) (string, error) {
	k := rev - m.rev
	if k > int64(m.held()) {
		return "bound", nil
	}
	changes := make([]store.Change, 0, k)
	for next := m.rev; next < rev; {
		n := min(rev-next, changePage)
		cs, err := st.ChangesAfter(ctx, next, int(n))
		if err != nil {
			return "", err
		}
		if int64(len(cs)) < n {
			return "gone", nil // committed (the revision says so) and no longer there
		}
		for _, ch := range cs {
			if ch.Revision != next+1 {
				return "gone", nil
			}
			if ch.InCatalog() && ch.SpecCreatedAt.IsZero() {
				return "old change", nil
			}
			next++
		}
		changes = append(changes, cs...)
	}
	for i := range changes {
		m.apply(&changes[i], c.logger())
	}
	m.rev = rev
	return "", nil
}

// render assembles m into the catalog to serve.
func (c *Cache) render(m *mirror) (*Rendered, error) {
	r, err := c.renderPieces(m.rev, m.ordered())
	if err != nil {
		return nil, err
	}
	r.Epoch = m.epoch
	return r, nil
}

// renderPieces is render → bytes → forms for any list of pieces in
// render order (the whole catalog's, or a filtered list of them): one
// AssembleBody (which leaves the pieces as they are, so several lists
// of one mirror's pieces can be rendered), then encodeForms. A form over
// the limit is logged here, once per render, not per request. The body's
// hash is part of its tag: a full render reads the specs as of the
// revision read, which includes spec writes whose changes are still
// pending, so instances can serve different bodies at one revision; each
// must have its own tag.
func (c *Cache) renderPieces(rev int64, pieces []*catalog.Piece) (*Rendered, error) {
	body, err := catalog.AssembleBody(pieces)
	var drop *catalog.DropError
	if errors.As(err, &drop) {
		// One bad spec must not take the catalog down: serve the rest, say
		// which were left out.
		for _, p := range drop.Problems {
			c.logger().Warn("spec left out of the catalog", "spec", p.SpecID, "name", p.Name, "reason", p.Reason)
		}
	}
	r, err := encodeForms(rev, body, c.MaxBytes)
	if err != nil {
		return nil, err
	}
	r.logSize(c.logger())
	return r, nil
}

// mirror is the specs behind a rendered catalog.
type mirror struct {
	rev   int64
	epoch string // the store's (Rendered.Epoch)
	// base is the snapshot time of the full render it started from.
	base time.Time
	// specs holds every spec the full render read and every spec a change
	// touched since, in the catalog or not, by id.
	specs map[string]*mirrored
}

// mirrored is one spec as the cache knows it.
type mirrored struct {
	// asOf is the commit time of this state: the full render's snapshot,
	// or the write of the change applied last.
	asOf      time.Time
	createdAt time.Time
	// piece is the rendered service; nil when the spec is not in the
	// catalog (it left, or its stored spec does not decode).
	piece *catalog.Piece
}

// apply puts the state a change carries, unless the state held is as new.
func (m *mirror) apply(ch *store.Change, log *slog.Logger) {
	e := m.specs[ch.SpecID]
	if e != nil && !ch.WrittenAt.After(e.asOf) || e == nil && !ch.WrittenAt.After(m.base) {
		return // already in what the cache holds
	}
	if e == nil {
		e = &mirrored{}
		m.specs[ch.SpecID] = e
	}
	e.asOf, e.piece = ch.WrittenAt, nil
	if !ch.InCatalog() {
		return
	}
	s, err := ch.Spec()
	if err != nil {
		log.Error("stored spec does not decode; left out of the catalog", "spec", ch.SpecID, "revision", ch.Revision, "error", err)
		return
	}
	e.createdAt = ch.SpecCreatedAt
	e.piece = catalog.NewPiece(catalog.Offering{Spec: s, Generation: ch.Generation})
}

// held is how many specs m holds in the catalog (those a conflict leaves
// out too): the bound on the changes a refresh applies.
func (m *mirror) held() int {
	n := 0
	for _, e := range m.specs {
		if e.piece != nil {
			n++
		}
	}
	return n
}

// ordered is the pieces in render order: oldest first, so when two specs
// claim one name the established one keeps it, not a newcomer.
func (m *mirror) ordered() []*catalog.Piece {
	type entry struct {
		id        string
		createdAt time.Time
		piece     *catalog.Piece
	}
	es := make([]entry, 0, len(m.specs))
	for id, e := range m.specs {
		if e.piece != nil {
			es = append(es, entry{id, e.createdAt, e.piece})
		}
	}
	slices.SortFunc(es, func(a, b entry) int {
		if c := a.createdAt.Compare(b.createdAt); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]*catalog.Piece, len(es))
	for i := range es {
		out[i] = es[i].piece
	}
	return out
}

func (c *Cache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Cache) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// wantsFresh reports whether a request asks not to be served from a
// cache without revalidating (RFC 9111: Cache-Control no-cache or
// max-age=0; Pragma: no-cache, which HTTP/1.0 clients send, only when
// there is no Cache-Control).
func wantsFresh(h http.Header) bool {
	if cc := h.Values("Cache-Control"); len(cc) > 0 {
		for _, v := range cc {
			for _, d := range strings.Split(v, ",") {
				name, arg, _ := strings.Cut(strings.TrimSpace(d), "=")
				switch strings.ToLower(strings.TrimSpace(name)) {
				case "no-cache":
					return true
				case "max-age":
					if age, err := strconv.Atoi(strings.Trim(strings.TrimSpace(arg), `"`)); err == nil && age <= 0 {
						return true
					}
				}
			}
		}
		return false
	}
	for _, v := range h.Values("Pragma") {
		for _, d := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(d), "no-cache") {
				return true
			}
		}
	}
	return false
}
