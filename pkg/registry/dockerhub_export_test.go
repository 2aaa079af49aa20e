package registry

import "time"

// FastRetryDockerHub shortens the retries of the API and of
// go-containerregistry, so that fault tests stay fast.
func FastRetryDockerHub(d *DockerHub) *DockerHub {
	d.api.backoff = []time.Duration{time.Millisecond, time.Millisecond}
	FastRetry(d.oci)
	return d
}
