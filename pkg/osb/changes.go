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
	q, ok := b.parseChanges(w, r)
	if !ok {
		return
	}
	b.waitChanges(w, r, q)
}

// changesQuery is a change feed request, parsed: the changes after since,
// of the store epoch names ("": any), at most limit of them, waiting up
// to wait for one.
type changesQuery struct {
	since int64
	epoch string
	wait  time.Duration
	limit int
}

// parseChanges reads the change feed's query (400 for anything else than
// since, epoch, wait and limit, or any of them out of its range); ok says
// the request may go on.
func (b *Broker) parseChanges(w http.ResponseWriter, r *http.Request) (q changesQuery, ok bool) {
	v := r.URL.Query()
	for k := range v {
		if k != "since" && k != "wait" && k != "limit" && k != "epoch" {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "unknown query parameter %q (since, epoch, wait and limit are known)", k)
			return q, false
		}
	}
	q.epoch = v.Get("epoch")
	if len(q.epoch) > maxEpochLen {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "epoch must be the %s header of /v2/catalog (at most %d characters)", api.EpochHeader, maxEpochLen)
		return q, false
	}
	var err error
	q.since, err = strconv.ParseInt(v.Get("since"), 10, 64)
	if err != nil || q.since < 0 {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "since must be a catalog revision (an integer >= 0, from the %s header of /v2/catalog), not %q", api.RevisionHeader, v.Get("since"))
		return q, false
	}
	maxWait := b.cfg.MaxWait
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	if s := v.Get("wait"); s != "" {
		q.wait, err = time.ParseDuration(s)
		if err != nil || q.wait < 0 || q.wait > maxWait {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "wait must be a duration from 0s to %s, such as 30s, not %q", maxWait, s)
			return q, false
		}
	}
	q.limit = defaultChangeLimit
	if s := v.Get("limit"); s != "" {
		q.limit, err = strconv.Atoi(s)
		if err != nil || q.limit < 1 || q.limit > maxChangeLimit {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "limit must be an integer from 1 to %d, not %q", maxChangeLimit, s)
			return q, false
		}
	}
	return q, true
}

// waitChanges answers q: with the changes after q.since as soon as there
// are any (answerChanges), or with none once q.wait is over
// (answerNoChanges), or 410 when q.since or q.epoch is not the store's
// (position).
func (b *Broker) waitChanges(w http.ResponseWriter, r *http.Request, q changesQuery) {
	ctx := r.Context()
	deadline := time.Now().Add(q.wait)
	poll := b.listen.pollEvery(b.cfg.RefreshWindow)
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
		cur, known, ok := b.position(w, r, q, h)
		if !ok {
			return
		}
		if q.since < cur {
			next, done := b.answerChanges(w, r, q, cur, known, deadline)
			if done {
				return
			}
			q.since = next
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			if b.answerNoChanges(w, r, q, cur, known) {
				return
			}
			continue // committed meanwhile: answer with it
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

// position is where the store is for q: cur, the newest revision known,
// and known, the store's epoch as the freshest read says. It answers 410
// when q.epoch is another store's or q.since is ahead of the catalog (and
// a failure when the store cannot say); ok says the request may go on.
func (b *Broker) position(w http.ResponseWriter, r *http.Request, q changesQuery, h heard) (cur int64, known string, ok bool) {
	ctx := r.Context()
	// The cached revision: a warm instance reads meta/catalog at most
	// once per refresh window however many watchers wait on it.
	cat, _, err := b.Cache.Get(ctx)
	if err != nil {
		b.fail(w, err)
		return 0, "", false
	}
	known = cat.Epoch
	if q.epoch != "" && known != q.epoch {
		// The cache may lag a store this watcher listed elsewhere:
		// ask Firestore before calling the watcher's store gone (one
		// read shared with the watchers asking with it, and the cache
		// is fresh after it).
		fresh, ok := b.confirmEpoch(w, r, q.epoch)
		if !ok {
			return 0, "", false
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
	if q.since > latest && q.since >= cur {
		// The cache may lag a watcher that listed elsewhere: ask
		// Firestore before calling the watcher's revision bogus.
		meta, _, err := b.store.CatalogMetaAt(ctx)
		if err != nil {
			b.fail(w, err)
			return 0, "", false
		}
		cur, known = meta.Revision, meta.Epoch
		if q.epoch != "" && known != q.epoch {
			b.goneEpoch(w, cur, known, q.epoch)
			return 0, "", false
		}
		if q.since > cur {
			b.gone(w, cur, known, "revision %d is ahead of the catalog (revision %d): re-read /v2/catalog and resume from its %s", q.since, cur, api.RevisionHeader)
			return 0, "", false
		}
	}
	return cur, known, true
}

// answerChanges answers with the changes after q.since (q.since < cur),
// those of the request's view, or 410 when they are no longer retained;
// done says the request is answered. When none of them is the view's and
// the wait is not over, it answers nothing: the caller waits on from
// next, the last one read, as if the view's catalog had not moved.
func (b *Broker) answerChanges(w http.ResponseWriter, r *http.Request, q changesQuery, cur int64, known string, deadline time.Time) (next int64, done bool) {
	cs, err := b.store.ChangesAfter(r.Context(), q.since, q.limit)
	if err != nil {
		b.fail(w, err)
		return 0, true
	}
	if q.epoch != "" {
		// The changes come straight from Firestore, the epoch
		// from a cache that may be a refresh window old: read it
		// after them, so that changes of a store recreated
		// meanwhile are never handed out as the watcher's
		// store's.
		fresh, ok := b.confirmEpoch(w, r, q.epoch)
		if !ok {
			return 0, true
		}
		known, cur = fresh.Epoch, max(cur, fresh.Revision)
	}
	if len(cs) == 0 || cs[0].Revision != q.since+1 {
		b.gone(w, cur, known, "the changes after revision %d are no longer retained: re-read /v2/catalog (revision %d) and resume from its %s", q.since, cur, api.RevisionHeader)
		return 0, true
	}
	// Firestore's TTL deletes expired changes in no set order: a page
	// stops before the first revision gone, so the watcher's next poll
	// starts there and gets 410, never a page that skipped it.
	for i := range cs {
		if cs[i].Revision != q.since+1+int64(i) {
			cs = cs[:i]
			break
		}
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
		return out.Next, false
	}
	w.Header().Set(api.RevisionHeader, strconv.FormatInt(out.Revision, 10))
	setEpoch(w, known)
	web.WriteJSON(w, http.StatusOK, out)
	return out.Next, true
}

// answerNoChanges answers a wait that is over with no change after
// q.since; done is false when, asked afresh, the watcher's store has
// committed one meanwhile (the caller answers with it).
func (b *Broker) answerNoChanges(w http.ResponseWriter, r *http.Request, q changesQuery, cur int64, known string) (done bool) {
	if q.epoch != "" {
		// "Nothing new" is an answer about the watcher's store
		// too: not from a cache that may predate its recreation.
		fresh, ok := b.confirmEpoch(w, r, q.epoch)
		if !ok {
			return true
		}
		if fresh.Revision > q.since {
			return false
		}
		known, cur = fresh.Epoch, max(cur, fresh.Revision)
	}
	w.Header().Set(api.RevisionHeader, strconv.FormatInt(cur, 10))
	setEpoch(w, known)
	web.WriteJSON(w, http.StatusOK, api.ChangePage{Changes: []api.Change{}, Next: q.since, Revision: cur, Epoch: known})
	return true
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
		b.fail(w, err)
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
