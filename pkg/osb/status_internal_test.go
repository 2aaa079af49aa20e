package osb

import (
	"bytes"
	"math"
	"regexp"
	"strings"
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
	// Entries that do not parse or validate: degraded, unless the
	// registry is failing or guarded, which say more.
	for _, c := range []struct {
		last      api.RunResult
		bootstrap api.OperationState
		want      string
	}{
		{api.ResultSucceeded, api.Succeeded, HealthDegraded},
		{api.ResultSucceeded, "", HealthDegraded},
		{api.ResultSucceeded, api.Failed, HealthFailing},
		{api.ResultGuarded, api.Succeeded, HealthGuarded},
	} {
		st := api.RegistryStatus{LastRun: api.Run{Result: c.last, ErrorsTotal: 1, Errors: []api.EntryError{{Entry: "x", Message: "invalid"}}}}
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
	// The numbers are written on the chart: each total above its bar,
	// and a part's count inside it when it fits (the first bar's reads,
	// 10 of 20, are half the plot; the last bar's one read is too small).
	if first.Total != 20 || last.Total != 1 || first.TotalY >= first.Deletes.Y || first.CX != first.X+first.W/2 {
		t.Errorf("totals: %+v %+v", first, last)
	}
	if first.Reads.Label != "10" || first.Writes.Label != "6" || last.Reads.Label != "" {
		t.Errorf("part labels: %+v %+v", first, last)
	}
	if empty := opsChart(nil); !empty.Empty {
		t.Errorf("no operation must be an empty chart")
	}
}

// An entry error keeps its last good version only when it names a spec
// id, the catalog serves that id, and the id is not another registry's
// (a conflict): every other one never reached the catalog.
func TestEntryErrorRows(t *testing.T) {
	run := api.Run{
		Errors: []api.EntryError{
			{Entry: "broken-now", SpecID: "s-1", Message: "invalid"},
			{Entry: "never-valid", Message: "invalid"},
			{Entry: "taken", SpecID: "s-2", Message: "owned elsewhere"},
			{Entry: "gone-from-catalog", SpecID: "s-3", Message: "invalid"},
		},
		Conflicts: []api.SpecConflict{{SpecID: "s-2", Entry: "taken", Owner: "team-z"}},
	}
	rows, never := entryErrorRows(run, map[string]bool{"s-1": true, "s-2": true})
	if never != 3 || len(rows) != 4 {
		t.Fatalf("%d never reached of %d rows, want 3 of 4: %+v", never, len(rows), rows)
	}
	if !rows[0].InCatalog || rows[1].InCatalog || rows[2].InCatalog || rows[2].Owner != "team-z" || rows[3].InCatalog {
		t.Errorf("rows %+v", rows)
	}
}

func TestDurationMS(t *testing.T) {
	for ms, want := range map[int64]string{0: "0 ms", 850: "850 ms", 2400: "2.4 s", 185_000: "3m05s"} {
		if got := durationMS(ms); got != want {
			t.Errorf("durationMS(%d) = %q, want %q", ms, got, want)
		}
	}
}

// The template renders what the Chromium test's stack does not bring
// about: a registry that records no source yet and no duration, an entry
// whose id another registry owns, a held-back version and a catalog
// section cut at maxServices; every anchor leads to an element.
func TestStatusTemplateRendersEveryKindOfRow(t *testing.T) {
	d := statusData{
		Registries: []registryRow{
			{Name: "old", Health: HealthOK, Result: api.ResultSucceeded},
			{Name: "team-a", Health: HealthDegraded, Source: &api.Source{Type: "oci", Location: "europe-docker.pkg.dev/p/specs", Auth: "google"},
				HasDuration: true, LastDuration: 0, NeverReached: 1, ErrorsTotal: 1,
				EntryErrors: []entryErrorRow{{EntryError: api.EntryError{Entry: "taken", SpecID: "s-2", Message: "owned elsewhere"}, Owner: "team-z"}}},
			{Name: "team-z", Health: HealthOK},
		},
		HeldBack:      []heldRow{{Registry: "team-z", Spec: api.HeldBackSpec{SpecID: "s-2", Name: "redis", Digest: "sha256:x", Blockers: []string{"plan small: 1 instance"}}}},
		Services:      []serviceRow{{ID: "s-2", Name: "redis", HeldBack: true, Plans: []planRow{{ID: "p-1", Name: "small", Free: true}}}},
		ServicesTotal: 501,
		CatalogRead:   true,
		// A bootstrap of a registry with no row yet (its first, pending)
		// and one of the others.
		Operations: []opRow{{ID: "op-1", State: api.InProgress, Pending: []string{"new"},
			Results: []opResultRow{{Registry: "team-a", State: api.Succeeded, Result: api.ResultSucceeded}}}},
		HasRow: map[string]bool{"old": true, "team-a": true, "team-z": true},
	}
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, d); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`<td class="source" data-label="Source"><span class="muted">not recorded yet</span>`,
		`<td class="duration" data-label="Duration"><span class="muted">—</span>`,
		`<td class="duration" data-label="Duration">0 ms</td>`,
		`never reached the catalog: its id belongs to <a href="#registry-team-z">team-z</a>`,
		`<a href="#held-s-2">a newer version is held back</a>`,
		`the first 1 of 501`,
		`<li class="state-in-progress"><strong>new</strong>: pending</li>`,
		`data-registry="team-a"><a href="#registry-team-a">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not have %q", want)
		}
	}
	for _, m := range regexp.MustCompile(`href="#([^"]+)"`).FindAllStringSubmatch(page, -1) {
		if !strings.Contains(page, `id="`+m[1]+`"`) {
			t.Errorf("anchor #%s leads nowhere", m[1])
		}
	}
}
