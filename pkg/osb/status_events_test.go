package osb_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// The status page shows each registry's last full run and its last
// event run side by side, read from the registry's status in Firestore:
// a registry whose full runs fail while its webhook runs succeed shows
// both, and one with no event run says so.
func TestStatusPageShowsFullAndEventRuns(t *testing.T) {
	client := emulatortest.Firestore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, st := range []api.RegistryStatus{
		{Name: "team",
			LastRun:      api.Run{ID: "full-1", Result: api.ResultFetchFailed, Error: "catalog: 503", StartedAt: now.Add(-2 * time.Hour), FinishedAt: now.Add(-2 * time.Hour)},
			LastTargeted: &api.Run{ID: "event-1", Result: api.ResultSucceeded, StartedAt: now.Add(-5 * time.Minute), FinishedAt: now.Add(-5 * time.Minute), Entries: []string{"a", "b"}}},
		{Name: "quiet", LastRun: api.Run{ID: "full-2", Result: api.ResultUnchanged, StartedAt: now.Add(-time.Hour), FinishedAt: now.Add(-time.Hour)}},
	} {
		if _, err := client.Collection(store.RegistriesCollection).Doc(st.Name).Set(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	b := osb.NewBroker(store.New(client), osb.Config{Username: brokerUser, Password: brokerPass, VerifyAdmin: web.StaticToken(adminToken)})
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/status", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status page: %d %s", resp.StatusCode, body)
	}
	row := func(name string) string {
		m := regexp.MustCompile(`(?s)<tr id="registry-` + name + `".*?</tr>`).FindString(string(body))
		if m == "" {
			t.Fatalf("no row for %s:\n%s", name, body)
		}
		return m
	}
	team := row("team")
	for _, want := range []string{`<td data-label="Last full run">fetch_failed`, `<td class="event-run" data-label="Last event run"><span class="event-result">succeeded</span>`, `2 entries`} {
		if !strings.Contains(team, want) {
			t.Errorf("team's row has no %q:\n%s", want, team)
		}
	}
	if quiet := row("quiet"); !strings.Contains(quiet, `data-label="Last event run"><span class="muted">none</span>`) {
		t.Errorf("quiet's row does not say it had no event run:\n%s", quiet)
	}
}
