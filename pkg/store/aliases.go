package store

import "github.com/specsync/specsync/pkg/api"

// Deprecated: a second spelling of api.SpecActive and api.SpecMarked, left
// only for the code that still says it (pkg/invariant and the pkg/osb
// tests); write the api constants.
const (
	StateActive = api.SpecActive
	StateMarked = api.SpecMarked
)

// Deprecated: a second spelling of the api.Change kinds, left only for the
// code that still says it (pkg/invariant); write the api constants.
const (
	KindCreated  = api.ChangeCreated
	KindUnmarked = api.ChangeUnmarked
	KindMarked   = api.ChangeMarked
	KindDeleted  = api.ChangeDeleted
	KindHeldBack = api.ChangeHeldBack
)
