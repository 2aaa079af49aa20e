package store

import "github.com/specsync/specsync/pkg/api"

// The registries/{name} document's types (registries.go) have the shapes
// of pkg/api's RegistryStatus and its parts, field for field, and the
// status is served as the api type. Until registries.go declares them as
// those types, APIRegistryStatus converts one into the other, in this one
// place.

// APIRegistryStatus is st as GET /registries answers it.
func APIRegistryStatus(st RegistryStatus) api.RegistryStatus {
	r := st.LastRun
	return api.RegistryStatus{
		Name: st.Name, ListingDigest: st.ListingDigest, ETag: st.ETag, LastSuccessAt: st.LastSuccessAt, Marked: st.Marked,
		LastRun: api.Run{
			ID: r.ID, Result: api.RunResult(r.Result), Error: r.Error, Guard: r.Guard,
			StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, DurationMS: r.DurationMS,
			Counts: api.RunCounts(r.Counts), Ops: r.Ops,
			Errors: convertAll(r.Errors, func(e EntryError) api.EntryError { return api.EntryError(e) }), ErrorsTotal: r.ErrorsTotal,
			Kept:      convertAll(r.Kept, func(k KeptSpec) api.KeptSpec { return api.KeptSpec(k) }),
			Conflicts: convertAll(r.Conflicts, func(c SpecConflict) api.SpecConflict { return api.SpecConflict(c) }),
			HeldBack:  convertAll(r.HeldBack, func(h HeldBackSpec) api.HeldBackSpec { return api.HeldBackSpec(h) }),
			Planned:   r.Planned,
		},
		ContestedBy: st.ContestedBy,
		Lease:       (*api.Lease)(st.Lease),
	}
}

// convertAll converts every element of in (nil stays nil).
func convertAll[From, To any](in []From, f func(From) To) []To {
	if in == nil {
		return nil
	}
	out := make([]To, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
