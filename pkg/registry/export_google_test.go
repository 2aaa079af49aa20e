package registry

import "testing"

// SetGoogleListPageSize sets the n of Google tags/list requests until the
// test ends, so that a few children page. Tests that call it must not run
// in parallel.
func SetGoogleListPageSize(t testing.TB, n int) {
	old := googleListPageSize
	googleListPageSize = n
	t.Cleanup(func() { googleListPageSize = old })
}
