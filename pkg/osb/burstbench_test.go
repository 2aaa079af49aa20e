package osb_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// BenchmarkProvisionBurst is provisions a second of one plan of one spec,
// c provisions at once (distinct instance ids), over real HTTP to one
// broker on the Firestore emulator: each op is one burst of c, and the
// figures are of all the bursts together. It reports what was created
// (provisions/s counts 201s only), what contention refused (422/op) and
// the slowest answer of a burst. Only meaningful with -benchtime=1x and
// on a quiet machine; run it on the commit before the change and after
// in the same session (docs/BENCHMARKS.md says how), since the emulator's
// speed varies from run to run.
//
// It uses only the HTTP surface and burst_test.go's helpers, so it runs
// unchanged on a checkout from before provisions stopped writing their
// spec document: that is the "before".
func BenchmarkProvisionBurst(b *testing.B) {
	for _, c := range []int{1, 10, 50, 100} {
		b.Run(fmt.Sprintf("concurrent=%d", c), func(b *testing.B) {
			e := newEnv(b, time.Minute)
			db := parseSpec(b, specYAML("db"))
			e.seed(db)
			small := db.Plans[0].ID
			var created, refused, other int
			var slowest time.Duration
			var elapsed time.Duration
			b.ResetTimer()
			for op := 0; op < b.N; op++ {
				began := time.Now()
				rs := e.burst(c, func(i int) *http.Request {
					return e.request(http.MethodPut, fmt.Sprintf("/v2/service_instances/b%d-%d", op, i), burstBody(db.ID, small, "apps"))
				})
				took := time.Since(began)
				elapsed += took
				slowest = max(slowest, took)
				for _, r := range rs {
					switch r.status {
					case http.StatusCreated:
						created++
					case http.StatusUnprocessableEntity:
						refused++
					default:
						other++
					}
				}
			}
			b.StopTimer()
			if other > 0 {
				b.Fatalf("%d answers were neither 201 nor 422", other)
			}
			b.ReportMetric(float64(created)/elapsed.Seconds(), "provisions/s")
			b.ReportMetric(float64(refused)/float64(b.N), "422/op")
			b.ReportMetric(slowest.Seconds(), "slowest-burst-s")
		})
	}
}
