package gcpauth

import (
	"testing"
	"time"
)

// SetEarlyRefresh shortens the early-refresh window of the token sources
// Find makes from now until the test ends, so that tokens that live
// seconds can show reuse and refresh. Tests that call it must not run in
// parallel.
func SetEarlyRefresh(t testing.TB, d time.Duration) {
	old := earlyRefresh
	earlyRefresh = d
	t.Cleanup(func() { earlyRefresh = old })
}
