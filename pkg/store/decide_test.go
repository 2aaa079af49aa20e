package store_test

import (
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

func TestDecideOffer(t *testing.T) {
	clean := store.OfferTarget{Entry: "db", Digest: "d1", State: api.SpecActive}
	with := func(f func(*store.OfferTarget)) *store.OfferTarget {
		s := clean
		f(&s)
		return &s
	}
	cases := []struct {
		name          string
		stored        *store.OfferTarget
		entry, digest string
		want          store.UpsertOutcome
	}{
		{"no spec", nil, "db", "d1", store.Created},
		{"same content, clean", &clean, "db", "d1", store.Unchanged},
		{"new content", &clean, "db", "d2", store.Updated},
		{"new content, marked", with(func(s *store.OfferTarget) { s.State = api.SpecMarked }), "db", "d2", store.Updated},
		{"new content, entry error and hold recorded", with(func(s *store.OfferTarget) { s.EntryError, s.HeldBack = true, true }), "db", "d2", store.Updated},
		{"new content, from another entry", &clean, "database", "d2", store.Updated},
		{"same content, marked", with(func(s *store.OfferTarget) { s.State = api.SpecMarked }), "db", "d1", store.Unmarked},
		{"same content, marked, entry error recorded", with(func(s *store.OfferTarget) { s.State, s.EntryError = api.SpecMarked, true }), "db", "d1", store.Unmarked},
		{"same content, entry error recorded", with(func(s *store.OfferTarget) { s.EntryError = true }), "db", "d1", store.Repaired},
		{"same content, hold recorded", with(func(s *store.OfferTarget) { s.HeldBack = true }), "db", "d1", store.Repaired},
		{"same content, from another entry", &clean, "database", "d1", store.Repaired},
	}
	for _, c := range cases {
		if got := store.DecideOffer(c.stored, c.entry, c.digest); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
