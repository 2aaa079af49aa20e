package osb_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// BenchmarkBindBurst is BenchmarkProvisionBurst's figure for binds: each
// op is one burst of c identical binds of one new binding id of one
// instance, all at once over real HTTP to one broker on the Firestore
// emulator. It reports the answers a second (answered/s: the burst's
// requests over its time), what contention refused (422/op) and the
// slowest burst. Only meaningful with -benchtime=1x on a quiet machine,
// before and after in one session (docs/BENCHMARKS.md says how); it uses
// only the HTTP surface and the helpers of burst_test.go and
// bindings_test.go, so it runs unchanged on the code before binds
// stopped reading their id in the transaction.
func BenchmarkBindBurst(b *testing.B) {
	for _, c := range []int{1, 10, 50, 100} {
		b.Run(fmt.Sprintf("concurrent=%d", c), func(b *testing.B) {
			e := newEnv(b, time.Minute)
			db := parseSpec(b, specYAML("db"))
			e.seed(db)
			small := db.Plans[0].ID
			e.provision("bound", db.ID, small)
			var answered, refused, other int
			var slowest, elapsed time.Duration
			b.ResetTimer()
			for op := 0; op < b.N; op++ {
				began := time.Now()
				rs := e.burst(c, func(int) *http.Request {
					return e.request(http.MethodPut, bindingURL("bound", fmt.Sprintf("b%d", op)), bindBody(db.ID, small, `"bind_resource":{"app_guid":"app-1"}`))
				})
				took := time.Since(began)
				elapsed += took
				slowest = max(slowest, took)
				for _, r := range rs {
					switch r.status {
					case http.StatusCreated, http.StatusOK:
						answered++
					case http.StatusUnprocessableEntity:
						refused++
					default:
						other++
					}
				}
			}
			b.StopTimer()
			if other > 0 {
				b.Fatalf("%d answers were neither 201, 200 nor 422", other)
			}
			b.ReportMetric(float64(answered)/elapsed.Seconds(), "answered/s")
			b.ReportMetric(float64(refused)/float64(b.N), "422/op")
			b.ReportMetric(slowest.Seconds(), "slowest-burst-s")
		})
	}
}
