package osb

import (
	"math"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
)

func TestHealth(t *testing.T) {
	for _, c := range []struct {
		last      api.RunResult
		bootstrap api.OperationState
		want      string
	}{
		{api.ResultSucceeded, api.Succeeded, HealthOK},
		{api.ResultSucceeded, "", HealthOK},
		{api.ResultFetchFailed, api.Failed, HealthFailing},
		{api.ResultError, "", HealthFailing},
		// A recovery through an unchanged run is not recorded on the
		// registry; a failed newest bootstrap still counts.
		{api.ResultSucceeded, api.Failed, HealthFailing},
		{api.ResultGuarded, api.Succeeded, HealthGuarded},
		{"", "", HealthUnknown},
		{"", api.Failed, HealthFailing},
	} {
		st := api.RegistryStatus{LastRun: api.Run{Result: c.last}}
		if got := health(st, c.bootstrap); got != c.want {
			t.Errorf("health(last run %q, bootstrap %q) = %s, want %s", c.last, c.bootstrap, got, c.want)
		}
	}
}

func TestOpsChart(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	op := func(at time.Duration, reads, writes, deletes int64, dry bool) api.Operation {
		return api.Operation{CreatedAt: t0.Add(at), DryRun: dry, State: api.Succeeded,
			Results: map[string]api.RegistryResult{"a": {Firestore: api.Counts{Reads: reads, Writes: writes, Deletes: deletes}}}}
	}
	// Newest first, as RecentOperations returns them; one without results.
	c := opsChart([]api.Operation{op(2*time.Hour, 1, 0, 0, true), {CreatedAt: t0.Add(time.Hour)}, op(0, 10, 6, 4, false)})
	if c.Empty || len(c.Bars) != 2 || c.Max != 20 {
		t.Fatalf("chart %+v", c)
	}
	first, last := c.Bars[0], c.Bars[1]
	if first.DryRun || !last.DryRun || first.X >= last.X {
		t.Errorf("bars not oldest first: %+v", c.Bars)
	}
	full := float64(chartH - chartBottom - chartTop)
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.01 }
	if !near(first.Reads.H+first.Writes.H+first.Deletes.H, full) || !near(first.Reads.H, full/2) || !near(last.Reads.H, full/20) {
		t.Errorf("heights not proportional: %+v %+v", first, last)
	}
	// Stacked: writes sit on reads, deletes on writes.
	if !near(first.Writes.Y+first.Writes.H, first.Reads.Y) || !near(first.Deletes.Y+first.Deletes.H, first.Writes.Y) {
		t.Errorf("not stacked: %+v", first)
	}
	if empty := opsChart(nil); !empty.Empty {
		t.Errorf("no operation must be an empty chart")
	}
}
