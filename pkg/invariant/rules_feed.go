package invariant

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

func (c *checker) feed() {
	if len(c.s.Changes) == 0 {
		if c.opts.Feed && c.s.Catalog.Revision > 0 {
			c.add("feed-dense", "meta/catalog", "revision %d but no change record", c.s.Catalog.Revision)
		}
		return
	}
	byRev := map[int64]string{}
	var revs []int64
	var pending []ChangeDoc
	for _, ch := range c.s.Changes {
		doc := store.ChangesCollection + "/" + ch.DocID
		if ch.Pending() {
			if ch.PendingAt.IsZero() && ch.LegacyPendingRegistry == "" {
				c.add("feed-pending", doc, "pending without pending_at: no commit would ever number it")
			}
			pending = append(pending, ch)
			continue
		}
		if !ch.PendingAt.IsZero() || ch.LegacyPendingRegistry != "" {
			c.add("feed-pending", doc, "numbered %d yet still marked pending (pending_at %v, pending_registry %q)", ch.Revision, ch.PendingAt, ch.LegacyPendingRegistry)
		}
		if prev, dup := byRev[ch.Revision]; dup {
			c.add("feed-dense", doc, "revision %d is also that of changes/%s", ch.Revision, prev)
			continue
		}
		byRev[ch.Revision] = ch.DocID
		revs = append(revs, ch.Revision)
	}
	if c.opts.Settled {
		for _, ch := range pending {
			c.add("feed-pending", store.ChangesCollection+"/"+ch.DocID, "change %s of spec %s (registry %s) still pending, written %v", ch.Kind, ch.SpecID, ch.Registry, ch.At)
		}
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	top := c.s.Catalog.Revision
	if len(revs) == 0 {
		if top > 0 && c.opts.Settled {
			c.add("feed-dense", "meta/catalog", "revision %d but no committed change", top)
		}
		return
	}
	lo, hi := revs[0], revs[len(revs)-1]
	if lo < 1 {
		c.add("feed-dense", "", "revision %d is below 1", lo)
	}
	if hi != top {
		c.add("feed-dense", "meta/catalog", "revision %d, highest committed change %d", top, hi)
	}
	if n := int64(len(revs)); hi-lo+1 != n {
		var gaps []string
		for i := 1; i < len(revs) && len(gaps) < 10; i++ {
			if revs[i] != revs[i-1]+1 {
				gaps = append(gaps, fmt.Sprintf("%d..%d", revs[i-1]+1, revs[i]-1))
			}
		}
		c.add("feed-dense", "", "revisions %d..%d hold %d changes; missing %s", lo, hi, n, strings.Join(gaps, ", "))
	}
	if c.s.Catalog.Published > top {
		c.add("feed-dense", "meta/catalog", "published %d is beyond revision %d", c.s.Catalog.Published, top)
	}
	if c.opts.Settled {
		c.feedTruth()
	}
}

// feedTruth: the last committed change of each spec says what the store
// holds, so a subscriber that applied the feed sees the stored catalog.
func (c *checker) feedTruth() {
	last := map[string]store.Change{}
	for _, ch := range c.s.Changes {
		if ch.Revision == 0 || ch.Kind == api.ChangeHeldBack {
			continue
		}
		if cur, ok := last[ch.SpecID]; !ok || ch.Revision > cur.Revision {
			last[ch.SpecID] = ch.Change
		}
	}
	for _, id := range sortedKeys(last) {
		ch := last[id]
		doc := fmt.Sprintf("%s (revision %d)", store.SpecsCollection+"/"+id, ch.Revision)
		r, stored := c.s.Specs[id]
		switch {
		case ch.Kind == api.ChangeDeleted:
			if stored {
				c.add("feed-truth", doc, "the feed says deleted, the spec is stored (%s)", r.State)
			}
		case !ch.InCatalog():
			if !stored || r.State != api.SpecMarked {
				c.add("feed-truth", doc, "the feed says %s (out of the catalog), the store has %s", ch.Kind, describe(r, stored))
			}
		default:
			if !stored || r.State != api.SpecActive {
				c.add("feed-truth", doc, "the feed says %s (in the catalog), the store has %s", ch.Kind, describe(r, stored))
			} else if !sameJSON(ch.SpecJSON, r.SpecJSON) {
				c.add("feed-truth", doc, "the feed's spec is not the stored one")
			} else if ch.Generation != 0 && ch.Generation != r.Generation {
				c.add("feed-truth", doc, "the feed says generation %d, the store has %d", ch.Generation, r.Generation)
			}
		}
	}
	// A spec in the catalog must have been announced, unless its change
	// expired: only then can the oldest retained revision be above 1.
	lowest := int64(0)
	for _, ch := range c.s.Changes {
		if ch.Revision > 0 && (lowest == 0 || ch.Revision < lowest) {
			lowest = ch.Revision
		}
	}
	if lowest == 1 {
		for _, id := range sortedKeys(c.s.Specs) {
			if _, ok := last[id]; !ok && c.s.Specs[id].State == api.SpecActive {
				c.add("feed-truth", store.SpecsCollection+"/"+id, "in the catalog but never announced by a change")
			}
		}
	}
}

func describe(r store.SpecRecord, stored bool) string {
	if !stored {
		return "no such spec"
	}
	return "it " + string(r.State)
}

func sameJSON(a, b string) bool {
	if a == b {
		return true
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
