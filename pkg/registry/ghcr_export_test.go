package registry

import "time"

// FastRetryGHCR shortens the retries of the API and of
// go-containerregistry, so that fault tests stay fast.
func FastRetryGHCR(g *GHCR) *GHCR {
	g.api.backoff = []time.Duration{time.Millisecond, time.Millisecond}
	FastRetry(g.oci)
	return g
}
