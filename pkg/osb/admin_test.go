package osb_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

func TestRegistriesEndpoint(t *testing.T) {
	e := newEnv(t, time.Minute)

	// Broker credentials are not admin credentials, nor is a wrong token.
	for name, auth := range map[string]func(*http.Request){
		"none":         func(r *http.Request) { r.Header.Del("Authorization") },
		"broker basic": func(*http.Request) {},
		"wrong token":  func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+adminToken+"x") },
		"empty token":  func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") },
		"no scheme":    func(r *http.Request) { r.Header.Set("Authorization", adminToken) },
	} {
		t.Run(name, func(t *testing.T) {
			req := e.request(http.MethodGet, "/registries", "")
			auth(req)
			r := e.send(req)
			wantOSBError(t, r, http.StatusUnauthorized, "Unauthorized")
			wantAdminChallenges(t, r)
		})
	}

	get := func() []api.RegistryStatus {
		t.Helper()
		req := e.request(http.MethodGet, "/registries", "")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		r := e.send(req)
		if r.status != http.StatusOK {
			t.Fatalf("GET /registries: %d %s", r.status, r.body)
		}
		// Decoded into a map first to see a null where a list belongs.
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &raw); err != nil {
			t.Fatal(err)
		}
		if string(raw["registries"]) == "null" || raw["registries"] == nil {
			t.Fatalf("registries is not a list: %s", r.body)
		}
		var out api.RegistryList
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Registries
	}
	if got := get(); len(got) != 0 {
		t.Fatalf("no runs yet, statuses %+v", got)
	}

	finished := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	runs := map[string]store.Run{
		"zeta": {ID: "run-z", Result: api.ResultFetchFailed, Error: "registry zeta: 503 Service Unavailable", FinishedAt: finished},
		"alpha": {ID: "run-a", Result: api.ResultSucceeded, FinishedAt: finished,
			Counts: store.RunCounts{Created: 2, Marked: 1, Kept: 1},
			Kept:   []store.KeptSpec{{SpecID: "s-kept", Name: "kept", Instances: 3}}},
	}
	// The runs are fixtures recorded straight into the statuses, with no
	// spec behind them (alpha says it marked one): the end check keeps
	// to the rules of every instant, not the settled counts.
	e.end.Unsettled("run records seeded without their specs")
	for name, run := range runs {
		if err := e.st.RecordRun(e.ctx, name, run, run.Result == api.ResultSucceeded, "sha256:abc", "", run.Counts.Marked); err != nil {
			t.Fatal(err)
		}
	}
	got := get()
	if len(got) != 2 || got[0].Name != "alpha" || got[1].Name != "zeta" {
		t.Fatalf("statuses %+v, want alpha and zeta in name order", got)
	}
	a, z := got[0], got[1]
	if a.LastRun.Result != api.ResultSucceeded || a.LastRun.Counts.Created != 2 || a.Marked != 1 || a.ListingDigest != "sha256:abc" {
		t.Errorf("alpha status %+v", a)
	}
	if len(a.LastRun.Kept) != 1 || a.LastRun.Kept[0] != (api.KeptSpec{SpecID: "s-kept", Name: "kept", Instances: 3}) {
		t.Errorf("alpha kept %+v, want the kept spec with its instance count", a.LastRun.Kept)
	}
	if z.LastRun.Result != api.ResultFetchFailed || z.LastRun.Error == "" || z.ListingDigest != "" {
		t.Errorf("zeta status %+v: a failed run must not set a baseline", z)
	}
}
