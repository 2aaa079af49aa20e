package worker_test

import (
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/worker"
)

// The rules of event coalescing, from the status alone: covered by a
// finished run that started after the event (plus the skew) and read what
// it names; covered by the lease's holder on the same terms; busy when
// the lease is held otherwise; cooling down after a recent run; run
// otherwise.
func TestDecideEvent(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const cooldown, skew = time.Second, 500 * time.Millisecond
	ev := func(s float64, entries ...string) queue.Message {
		return queue.Message{Registry: "r", EventAt: at(s), Entries: entries}
	}
	full := func(s float64, result api.RunResult) api.Run {
		return api.Run{ID: "full", StartedAt: at(s), Result: result}
	}
	covered := func(s float64, entries ...string) []api.CoveredEntry {
		var out []api.CoveredEntry
		for _, e := range entries {
			out = append(out, api.CoveredEntry{Entry: e, At: at(s)})
		}
		return out
	}
	lease := func(start, until float64, entries ...string) *api.Lease {
		return &api.Lease{Holder: "holder", StartedAt: at(start), ExpiresAt: at(until), Entries: entries}
	}
	for _, c := range []struct {
		name string
		st   api.RegistryStatus
		m    queue.Message
		now  float64
		want worker.EventVerdict
	}{
		{"never run", api.RegistryStatus{}, ev(0, "a"), 10, worker.EventRun},
		{"a full run after the event", api.RegistryStatus{LastRun: full(1, api.ResultSucceeded)}, ev(0, "a"), 10, worker.EventCovered},
		{"a guarded full run after the event", api.RegistryStatus{LastRun: full(1, api.ResultGuarded)}, ev(0), 10, worker.EventCovered},
		{"a full run within the skew", api.RegistryStatus{LastRun: full(0.4, api.ResultSucceeded)}, ev(0, "a"), 10, worker.EventRun},
		{"a full run that failed", api.RegistryStatus{LastRun: full(1, api.ResultError)}, ev(0, "a"), 10, worker.EventRun},
		{"a full run that could not fetch", api.RegistryStatus{LastRun: full(1, api.ResultFetchFailed)}, ev(0), 10, worker.EventRun},
		{"a full run before the event", api.RegistryStatus{LastRun: full(0, api.ResultSucceeded)}, ev(1, "a"), 10, worker.EventRun},
		{"an unchanged check after the event", api.RegistryStatus{CheckedAt: at(1)}, ev(0), 10, worker.EventCovered},
		{"targeted runs of every entry", api.RegistryStatus{Covered: append(covered(1, "a"), covered(2, "b")...)}, ev(0, "a", "b"), 10, worker.EventCovered},
		{"targeted runs of some entries", api.RegistryStatus{Covered: covered(1, "a")}, ev(0, "a", "b"), 10, worker.EventRun},
		{"a targeted run before the event", api.RegistryStatus{Covered: covered(1, "a")}, ev(1, "a"), 10, worker.EventRun},
		{"targeted runs never cover the whole registry", api.RegistryStatus{Covered: covered(1, "a")}, ev(0), 10, worker.EventRun},
		{"the holder started after and reads the entry", api.RegistryStatus{Lease: lease(1, 100, "a", "b")}, ev(0, "a"), 10, worker.EventCovered},
		{"the holder started after and reads everything", api.RegistryStatus{Lease: lease(1, 100)}, ev(0), 10, worker.EventCovered},
		{"the holder reads other entries", api.RegistryStatus{Lease: lease(1, 100, "b")}, ev(0, "a"), 10, worker.EventBusy},
		{"the holder reads entries, the event is about all", api.RegistryStatus{Lease: lease(1, 100, "a")}, ev(0), 10, worker.EventBusy},
		{"the holder started before the event", api.RegistryStatus{Lease: lease(0, 100)}, ev(1, "a"), 10, worker.EventBusy},
		{"a lease left behind", api.RegistryStatus{Lease: lease(0, 5), LastRun: full(0, api.ResultError)}, ev(1, "a"), 10, worker.EventRun},
		{"a run started within the cooldown", api.RegistryStatus{LastRun: full(9.5, api.ResultFetchFailed)}, ev(9.8, "a"), 10, worker.EventCoolingDown},
		{"a targeted run within the cooldown", api.RegistryStatus{LastTargeted: &api.Run{StartedAt: at(9.5)}}, ev(9.8, "a"), 10, worker.EventCoolingDown},
		{"a check within the cooldown", api.RegistryStatus{CheckedAt: at(9.5)}, ev(9.8), 10, worker.EventCoolingDown},
		{"the cooldown past", api.RegistryStatus{LastTargeted: &api.Run{StartedAt: at(8.9)}}, ev(9.8, "a"), 10, worker.EventRun},
	} {
		c.st.Name = "r"
		if got := worker.DecideEvent(&c.st, c.m, at(c.now), cooldown, skew); got.Verdict != c.want {
			t.Errorf("%s: %v (%s), want %v", c.name, got.Verdict, got.Reason, c.want)
		}
	}
}
