package store

import "github.com/specsync/specsync/pkg/api"

// OfferTarget is what deciding an offer needs of the spec as stored. It
// is the offering registry's own spec: one another registry owns is a
// conflict, which the store finds before deciding (the planner only ever
// sees the registry's own specs).
type OfferTarget struct {
	Entry      string // the registry entry it came from
	Digest     string // of the content it serves
	State      api.SpecState
	EntryError bool // an entry error is recorded on it
	HeldBack   bool // a newer version is recorded as held back
}

// DecideOffer says what offering content (digest) from a registry entry
// does to the spec as stored (nil: there is none). It is the one rule the
// planner plans with and the store writes by:
//
//   - no spec: Created;
//   - other content: Updated (unmarked too, if it was marked);
//   - the same content, marked: Unmarked (back in the catalog);
//   - the same content, active, with an entry error or a hold recorded, or
//     from another entry of the registry: Repaired (the record is cleared,
//     the catalog does not see it);
//   - otherwise Unchanged: nothing to write.
//
// Whether a new version would strand instances (a hold-back instead of an
// update) is the planner's question, asked of an Updated.
func DecideOffer(stored *OfferTarget, entry, digest string) UpsertOutcome {
	switch {
	case stored == nil:
		return Created
	case stored.Digest != digest:
		return Updated
	case stored.State == api.SpecMarked:
		return Unmarked
	case stored.EntryError || stored.HeldBack || stored.Entry != entry:
		return Repaired
	}
	return Unchanged
}
