package reconcile

import "github.com/specsync/specsync/pkg/api"

// Deprecated: a second spelling of api.ResultSucceeded and
// api.ResultFetchFailed, left only for the code that still says it (the
// pkg/osb tests); write the api constants.
const (
	ResultSucceeded   = api.ResultSucceeded
	ResultFetchFailed = api.ResultFetchFailed
)
