package registry

import "time"

// FastRetryQuay shortens the retries of the API and of
// go-containerregistry, so that fault tests stay fast.
func FastRetryQuay(q *Quay) *Quay {
	q.api.backoff = []time.Duration{time.Millisecond, time.Millisecond}
	FastRetry(q.oci)
	return q
}

// QuayPageLimit stops q's listings after n pages.
func QuayPageLimit(q *Quay, n int) *Quay {
	q.cfg.pageLimit = n
	return q
}
