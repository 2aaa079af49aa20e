package osb

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/web"
)

// Change feed limits.
const (
	DefaultMaxWait     = 50 * time.Second
	defaultChangeLimit = 500
	maxChangeLimit     = 1000
)

// getChanges serves GET /v2/catalog/changes?since=N[&epoch=E][&wait=D][&limit=L]:
// the committed changes after revision N, in order. With wait it holds the
// request until a change arrives or the wait is over (an empty answer):
// the instance's revision listener (listen.go) wakes it when Firestore
// has a new revision, and the cached revision is polled as well. A
// since the feed cannot continue from (its changes expired, or it is ahead
// of the catalog) is 410 Gone with the current revision: re-read
// /v2/catalog and resume from its X-Catalog-Revision.
//
// A revision is a revision of one store: epoch (the X-Catalog-Epoch of
// the watcher's listing, or of an earlier answer) names it, and a since
// of another store's epoch is 410 Gone too, whatever its number (the
// store was recreated or restored under the watcher). Without epoch the
// feed answers as it did before epochs.
func (b *Broker) getChanges(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "since" && k != "wait" && k != "limit" && k != "epoch" {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "unknown query parameter %q (since, epoch, wait and limit are known)", k)
			return
		}
	}
	epoch := q.Get("epoch")
	if len(epoch) > maxEpochLen {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "epoch must be the %s header of /v2/catalog (at most %d characters)", api.EpochHeader, maxEpochLen)
		return
	}
	since, err := strconv.ParseInt(q.Get("since"), 10, 64)
	if err != nil || since < 0 {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "since must be a catalog revision (an integer >= 0, from the %s header of /v2/catalog), not %q", api.RevisionHeader, q.Get("since"))
		return
	}
	maxWait := b.cfg.MaxWait
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		wait, err = time.ParseDuration(v)
		if err != nil || wait < 0 || wait > maxWait {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "wait must be a duration from 0s to %s, such as 30s, not %q", maxWait, v)
			return
		}
	}
	limit := defaultChangeLimit
	if v := q.Get("limit"); v != "" {
		limit, err = strconv.Atoi(v)
		if err != nil || limit < 1 || limit > maxChangeLimit {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "limit must be an integer from 1 to %d, not %q", maxChangeLimit, v)
			return
		}
	}

	ctx := r.Context()
	deadline := time.Now().Add(wait)
	poll := b.cfg.RefreshWindow
	if poll <= 0 || poll > time.Second {
		poll = time.Second
	}
	// A request that waits joins the instance's revision listener, which
	// wakes it when Firestore has a new revision; the cached revision,
	// polled as before, still counts, so a listener that fails, or is
	// deaf while the client library reopens its stream, costs latency
	// (the refresh window), never an answer.
	joined := false
	for {
		var h heard
		if joined {
			h = b.listen.now()
		}
		// The cached revision: a warm instance reads meta/catalog at most
		// once per refresh window however many watchers wait on it.
		cat, _, err := b.Cache.Get(ctx)
		if err != nil {
			web.WriteFailure(w, err)
			return
		}
		// known is the store's epoch as the freshest read says.
		known := cat.Epoch
		if epoch != "" && known != epoch {
			// The cache may lag a store this watcher listed elsewhere:
			// ask Firestore before calling the watcher's store gone (one
			// read shared with the watchers asking with it, and the cache
			// is fresh after it).
			fresh, ok := b.confirmEpoch(w, r, epoch)
			if !ok {
				return
			}
			known = fresh.Epoch
		}
		// cur is the newest revision known; latest is the word of the
		// freshest source (the listener's, while it is live, which may
		// be below the cache's when the revision went back), by which a
		// since beyond it is judged.
		cur, latest := cat.Revision, cat.Revision
		if h.live {
			cur, latest = max(cur, h.rev), h.rev
		}
		if since > latest && since >= cur {
			// The cache may lag a watcher that listed elsewhere: ask
			// Firestore before calling the watcher's revision bogus.
			meta, _, err := b.store.CatalogMetaAt(ctx)
			if err != nil {
				web.WriteFailure(w, err)
				return
			}
			cur, known = meta.Revision, meta.Epoch
			if epoch != "" && known != epoch {
				b.goneEpoch(w, cur, known, epoch)
				return
			}
			if since > cur {
				b.gone(w, cur, known, "revision %d is ahead of the catalog (revision %d): re-read /v2/catalog and resume from its %s", since, cur, api.RevisionHeader)
				return
			}
		}
		if since < cur {
			cs, err := b.store.ChangesAfter(ctx, since, limit)
			if err != nil {
				web.WriteFailure(w, err)
				return
			}
			if epoch != "" {
				// The changes come straight from Firestore, the epoch
				// from a cache that may be a refresh window old: read it
				// after them, so that changes of a store recreated
				// meanwhile are never handed out as the watcher's
				// store's.
				fresh, ok := b.confirmEpoch(w, r, epoch)
				if !ok {
					return
				}
				known, cur = fresh.Epoch, max(cur, fresh.Revision)
			}
			if len(cs) == 0 || cs[0].Revision != since+1 {
				b.gone(w, cur, known, "the changes after revision %d are no longer retained: re-read /v2/catalog (revision %d) and resume from its %s", since, cur, api.RevisionHeader)
				return
			}
			// A view's feed carries only its own changes (views.go).
			view := viewOf(r)
			out := api.ChangePage{Changes: make([]api.Change, 0, len(cs)), Revision: cur, Epoch: known}
			for _, c := range cs {
				if it, ok := view.feedChange(c); ok {
					out.Changes = append(out.Changes, it)
				}
			}
			out.Next = cs[len(cs)-1].Revision
			out.Revision = max(out.Revision, out.Next)
			if len(out.Changes) == 0 && out.Next >= cur && time.Until(deadline) > 0 {
				// None of them is the view's: wait on from the last one
				// read, as if the view's catalog had not moved.
				since = out.Next
				continue
			}
			w.Header().Set(api.RevisionHeader, strconv.FormatInt(out.Revision, 10))
			setEpoch(w, known)
			web.WriteJSON(w, http.StatusOK, out)
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			if epoch != "" {
				// "Nothing new" is an answer about the watcher's store
				// too: not from a cache that may predate its recreation.
				fresh, ok := b.confirmEpoch(w, r, epoch)
				if !ok {
					return
				}
				if fresh.Revision > since {
					continue // committed meanwhile: answer with it
				}
				known, cur = fresh.Epoch, max(cur, fresh.Revision)
			}
			w.Header().Set(api.RevisionHeader, strconv.FormatInt(cur, 10))
			setEpoch(w, known)
			web.WriteJSON(w, http.StatusOK, api.ChangePage{Changes: []api.Change{}, Next: since, Revision: cur, Epoch: known})
			return
		}
		if !joined {
			// Look again at once: a listener that outlived the last
			// waiter may already know a newer revision than the cache.
			b.listen.join()
			defer b.listen.leave()
			joined = true
			continue
		}
		t := time.NewTimer(min(poll, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-h.next:
			t.Stop()
		case <-t.C:
		}
	}
}

// maxEpochLen bounds the epoch parameter (an epoch is a UUID).
const maxEpochLen = 64

func (b *Broker) gone(w http.ResponseWriter, rev int64, epoch string, format string, args ...any) {
	w.Header().Set(api.RevisionHeader, strconv.FormatInt(rev, 10))
	setEpoch(w, epoch)
	web.WriteJSON(w, http.StatusGone, api.Gone{Error: "Gone", Description: fmt.Sprintf(format, args...), Revision: rev, Epoch: epoch})
}

// confirmEpoch reads the revision and epoch afresh (GetFresh: one read,
// shared by the requests that ask together, such as the watchers a
// commit wakes) and answers 410 when the store's epoch is not the
// watcher's; ok says the request may be answered.
func (b *Broker) confirmEpoch(w http.ResponseWriter, r *http.Request, epoch string) (*Rendered, bool) {
	fresh, _, err := b.Cache.GetFresh(r.Context())
	if err != nil {
		web.WriteFailure(w, err)
		return nil, false
	}
	if fresh.Epoch != epoch {
		b.goneEpoch(w, fresh.Revision, fresh.Epoch, epoch)
		return nil, false
	}
	return fresh, true
}

// goneEpoch answers a watcher whose revisions are of another store.
func (b *Broker) goneEpoch(w http.ResponseWriter, rev int64, known, epoch string) {
	now := known
	if now == "" {
		now = "none yet: it has committed nothing"
	}
	b.gone(w, rev, known, "epoch %q is not this catalog's (%s): the store was recreated or restored, and its revisions are not the ones you saw; re-read /v2/catalog and resume from its %s and %s", epoch, now, api.RevisionHeader, api.EpochHeader)
}

func setEpoch(w http.ResponseWriter, epoch string) {
	if epoch != "" {
		w.Header().Set(api.EpochHeader, epoch)
	}
}
