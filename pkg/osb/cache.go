package osb

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/store"
)

// Cache holds the rendered catalog of a warm instance. It re-reads the
// catalog revision at most once per Window; only a new revision costs the
// query of the active specs and a render.
type Cache struct {
	Store  *store.Store
	Window time.Duration
	Logger *slog.Logger
	Now    func() time.Time

	mu  sync.Mutex
	cur *Rendered
}

// Rendered is the catalog at one revision, ready to serve.
type Rendered struct {
	Revision int64
	Body     []byte
	ETag     string
	checked  time.Time
}

// Get returns the current catalog and how many Firestore documents this
// call read (0 when served from memory inside the window).
func (c *Cache) Get(ctx context.Context) (*Rendered, int64, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	c.mu.Lock()
	defer c.mu.Unlock() // one refresh at a time; the others wait and reuse it
	if c.cur != nil && now().Sub(c.cur.checked) < c.Window {
		return c.cur, 0, nil
	}
	ops := &store.Ops{}
	st := c.Store.WithOps(ops)
	rev, err := st.Revision(ctx)
	if err != nil {
		return nil, ops.Snapshot().Reads, err
	}
	if c.cur != nil && c.cur.Revision == rev {
		c.cur.checked = now()
		return c.cur, ops.Snapshot().Reads, nil
	}
	r, err := c.render(ctx, st, rev)
	if err != nil {
		return nil, ops.Snapshot().Reads, err
	}
	r.checked = now()
	c.cur = r
	return r, ops.Snapshot().Reads, nil
}

func (c *Cache) render(ctx context.Context, st *store.Store, rev int64) (*Rendered, error) {
	recs, err := st.ActiveSpecs(ctx)
	if err != nil {
		return nil, err
	}
	// Oldest first: when two specs claim one name, Render keeps the first,
	// and the established service must keep it, not a newcomer.
	sort.SliceStable(recs, func(i, j int) bool {
		if !recs[i].CreatedAt.Equal(recs[j].CreatedAt) {
			return recs[i].CreatedAt.Before(recs[j].CreatedAt)
		}
		return recs[i].ID < recs[j].ID
	})
	offs := make([]catalog.Offering, 0, len(recs))
	for i := range recs {
		s, err := recs[i].Spec()
		if err != nil {
			c.logger().Error("stored spec does not decode; left out of the catalog", "spec", recs[i].ID, "error", err)
			continue
		}
		offs = append(offs, catalog.Offering{Spec: s, Generation: recs[i].Generation})
	}
	cat, err := catalog.RenderOfferings(offs)
	var drop *catalog.DropError
	if errors.As(err, &drop) {
		// One bad spec must not take the catalog down: serve the rest, say
		// which were left out.
		for _, p := range drop.Problems {
			c.logger().Warn("spec left out of the catalog", "spec", p.SpecID, "name", p.Name, "reason", p.Reason)
		}
	} else if err != nil {
		return nil, err
	}
	body, err := json.Marshal(cat)
	if err != nil {
		return nil, err
	}
	// The body's hash is part of the tag: the specs are read after the
	// revision, so while a run writes, instances can render different
	// bodies at one revision; each must have its own tag.
	return &Rendered{Revision: rev, Body: body, ETag: catalog.ETag(rev, string(body))}, nil
}

func (c *Cache) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}
