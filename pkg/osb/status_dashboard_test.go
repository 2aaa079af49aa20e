package osb_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// The status page links to the monitoring dashboard when the deployment
// has one (SPECSYNC_DASHBOARD_URL, set by terraform), and shows no link
// otherwise.
func TestStatusPageLinksTheDashboard(t *testing.T) {
	st := store.New(emulatortest.Firestore(t))
	const dashboard = "https://console.cloud.google.com/monitoring/dashboards/builder/abc?project=p&x=<y>"
	for _, url := range []string{dashboard, ""} {
		b := osb.NewBroker(st, osb.Config{Username: brokerUser, Password: brokerPass, VerifyAdmin: web.StaticToken(adminToken), DashboardURL: url})
		srv := httptest.NewServer(b.Handler())
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/status", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status page: %d %s", resp.StatusCode, body)
		}
		link := `<a id="dashboard" href="https://console.cloud.google.com/monitoring/dashboards/builder/abc?project=p&amp;x=%3cy%3e">`
		if got := strings.Contains(string(body), `id="dashboard"`); got != (url != "") {
			t.Errorf("dashboard %q: link shown %v", url, got)
		}
		if url != "" && !strings.Contains(string(body), link) {
			t.Errorf("the page does not link the dashboard, escaped, as %s:\n%s", link, body)
		}
	}
}
