package api

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

func TestRunResultOKAndFailed(t *testing.T) {
	for _, c := range []struct {
		r          RunResult
		ok, failed bool
	}{
		{ResultSucceeded, true, false},
		{ResultUnchanged, true, false},
		{ResultDryRun, true, false},
		{ResultFetchFailed, false, true},
		{ResultError, false, true},
		{ResultGuarded, false, false},
		{ResultBusy, false, false},
		{ResultUnknownRegistry, false, false},
		{"", false, false},
	} {
		if c.r.OK() != c.ok || c.r.Failed() != c.failed {
			t.Errorf("%q: OK %v, Failed %v; want %v, %v", c.r, c.r.OK(), c.r.Failed(), c.ok, c.failed)
		}
	}
}

func TestOperationReadings(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	op := Operation{State: InProgress, Registries: []string{"a", "b", "c"}, ExpiresAt: t0,
		Results: map[string]RegistryResult{
			"b": {Firestore: Counts{Reads: 3, Writes: 2}},
			"c": {Firestore: Counts{Reads: 1, Deletes: 1}},
		}}
	if got := op.Pending(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("pending %v, want [a]", got)
	}
	if got := op.Firestore(); got != (Counts{Reads: 4, Writes: 2, Deletes: 1}) {
		t.Errorf("firestore %+v", got)
	}
	if op.Expired(t0.Add(time.Hour)) {
		t.Error("an operation in progress never expires")
	}
	if op.AwaitsCommit() {
		t.Error("waits for a commit without one requested")
	}
	op.Commit = &OperationCommit{Changes: 1}
	if !op.AwaitsCommit() {
		t.Error("does not wait for its requested commit")
	}
	op.Commit.CommittedAt = t0
	op.State = Succeeded
	if op.AwaitsCommit() || op.Expired(t0) || !op.Expired(t0.Add(time.Nanosecond)) {
		t.Error("a finished operation expires after its ExpiresAt, not at it")
	}
	op.ExpiresAt = time.Time{}
	if op.Expired(t0.Add(time.Hour)) {
		t.Error("an operation without a retention expired")
	}
}

// The operation's JSON is what GET /admin/operations lists: its id under
// "operation", and no expires_at (a store field).
func TestOperationJSON(t *testing.T) {
	b, err := json.Marshal(OperationView{Operation: Operation{ID: "op", State: InProgress, ExpiresAt: time.Now()}, Total: Counts{Reads: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["operation"] != "op" || m["state"] != "in progress" || m["firestore_total"] == nil {
		t.Errorf("operation JSON %s", b)
	}
	for _, absent := range []string{"id", "expires_at", "ExpiresAt", "commit", "catalog_revision"} {
		if _, ok := m[absent]; ok {
			t.Errorf("operation JSON has %q: %s", absent, b)
		}
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		12 * time.Second:            "12s ago",
		3 * time.Minute:             "3m ago",
		3*time.Hour + 5*time.Minute: "3h05m ago",
		4 * 24 * time.Hour:          "4d ago",
	} {
		if got := Age(now, now.Add(-d)); got != want {
			t.Errorf("Age(%s) = %q, want %q", d, got, want)
		}
	}
	if got := Age(now, time.Time{}); got != "never" {
		t.Errorf("Age(zero) = %q", got)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 registries", 1: "1 registry", 2: "2 registries"} {
		if got := Count(n, "registry", "registries"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
