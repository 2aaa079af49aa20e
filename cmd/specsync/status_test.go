package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
)

// specsync status shows a registry's last full run and its last event
// run side by side: a registry whose full runs fail while its webhook
// runs succeed shows both, and the event run's error when it has one.
func TestStatusShowsFullAndEventRuns(t *testing.T) {
	now := time.Now()
	regs := []api.RegistryStatus{
		{Name: "team",
			LastRun:      api.Run{Result: api.ResultFetchFailed, FinishedAt: now.Add(-2 * time.Hour), Error: "catalog: 503"},
			LastTargeted: &api.Run{Result: api.ResultSucceeded, FinishedAt: now.Add(-5 * time.Minute), Entries: []string{"a", "b"}}},
		{Name: "quiet", LastRun: api.Run{Result: api.ResultUnchanged, FinishedAt: now.Add(-time.Hour)}},
		{Name: "pushed",
			LastRun:      api.Run{Result: api.ResultSucceeded, FinishedAt: now.Add(-time.Hour)},
			LastTargeted: &api.Run{Result: api.ResultFetchFailed, FinishedAt: now.Add(-time.Minute), Entries: []string{"x"}, Error: "manifest x: 500"}},
	}
	var out bytes.Buffer
	printStatus(&out, regs, nil)
	rows := map[string][]string{}
	var header []string
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Split(collapsePadding(l), "  ")
		if len(f) > 0 && f[0] == "REGISTRY" {
			header = f
		}
		if len(f) > 3 {
			rows[f[0]] = f
		}
	}
	if len(header) < 4 || header[1] != "FULL RUN" || header[3] != "EVENT RUN" {
		t.Fatalf("header %q, want REGISTRY, FULL RUN, FINISHED, EVENT RUN first:\n%s", header, out.String())
	}
	for name, want := range map[string][2]string{
		"team":   {"fetch_failed", "succeeded 5m ago (2 entries)"},
		"quiet":  {"unchanged", "-"},
		"pushed": {"succeeded", "fetch_failed 1m ago (1 entry)"},
	} {
		r := rows[name]
		if len(r) < 4 || r[1] != want[0] || r[3] != want[1] {
			t.Errorf("%s: %q, want full run %q and event run %q:\n%s", name, r, want[0], want[1], out.String())
		}
	}
	if !strings.Contains(out.String(), "event run error: manifest x: 500") {
		t.Errorf("the event run's error is not shown:\n%s", out.String())
	}
}

// collapsePadding turns a tabwriter row's padding (two spaces or more)
// into exactly two spaces, so cells split on "  ".
func collapsePadding(l string) string {
	for strings.Contains(l, "   ") {
		l = strings.ReplaceAll(l, "   ", "  ")
	}
	return strings.TrimSpace(l)
}
