package registry

import "time"

// FastRetry shortens go-containerregistry's retry backoff so that fault
// tests (which retry every 5xx and 429) stay fast.
func FastRetry(o *OCI) *OCI {
	o.backoff.Duration = time.Millisecond
	o.backoff.Jitter = 0
	return o
}

// CacheSize reports how many manifests the source remembers.
func CacheSize(o *OCI) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.cache)
}
