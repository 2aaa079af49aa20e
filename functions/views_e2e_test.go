package functions_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// Catalog views through the local stack and the specsync binary: the
// broker's credentials come from SPECSYNC_BROKER_VIEWS, each platform sees
// its own services, `specsync catalog --view NAME` shows an operator (with
// the admin credential) exactly what that platform gets, ETag included,
// and the broker's single credential is gone.
func TestE2ECatalogViews(t *testing.T) {
	t.Parallel()
	_, urlA := newIndex(t, "alpha", "beta")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB),
		"SPECSYNC_BROKER_USERNAME=", "SPECSYNC_BROKER_PASSWORD=",
		`SPECSYNC_BROKER_VIEWS={"views":[
			{"name":"team-a","username":"platform-a","password_env":"VIEW_A_PASSWORD","registries":{"allow":["team-a"]}},
			{"name":"gamma","username":"platform-g","password_env":"VIEW_G_PASSWORD","services":{"allow":["gamma|beta"]}},
			{"name":"none","username":"platform-n","password_env":"VIEW_N_PASSWORD","services":{"allow":["nothing"]}}]}`,
		"VIEW_A_PASSWORD=view-a-password", "VIEW_G_PASSWORD=view-g-password", "VIEW_N_PASSWORD=view-n-password")
	asPlatform := func(user, pass string) []string {
		return []string{"SPECSYNC_BROKER_USERNAME=" + user, "SPECSYNC_BROKER_PASSWORD=" + pass}
	}
	// bootstrap --wait reads the catalog at the end, as some platform.
	s.cli(asPlatform("platform-a", "view-a-password"), "bootstrap", "--wait", "--poll-interval=200ms").must(t, 0, "bootstrap --wait")
	services := regexp.MustCompile(`(?m)^(alpha|beta|gamma) `)
	for _, c := range []struct {
		view, user, pass string
		want             string
	}{
		{"team-a", "platform-a", "view-a-password", "alpha,beta"},
		{"gamma", "platform-g", "view-g-password", "beta,gamma"},
		{"none", "platform-n", "view-n-password", ""},
	} {
		op := s.cli(nil, "catalog", "--view", c.view).must(t, 0, "catalog --view "+c.view)
		pl := s.cli(asPlatform(c.user, c.pass), "catalog").must(t, 0, "catalog as "+c.user)
		for _, r := range []cliResult{op, pl} {
			var got []string
			for _, m := range services.FindAllStringSubmatch(r.stdout, -1) {
				got = append(got, m[1])
			}
			if strings.Join(got, ",") != c.want {
				t.Errorf("view %s: %v, want %s\n%s", c.view, got, c.want, r.stdout)
			}
		}
		op.contains(t, "catalog --view "+c.view, "view "+c.view+": catalog revision 3")
		// The operator sees what the platform gets, ETag and all.
		etag := regexp.MustCompile(`ETag ("[^"]+")`)
		if a, b := etag.FindStringSubmatch(op.stdout), etag.FindStringSubmatch(pl.stdout); a == nil || b == nil || a[1] != b[1] {
			t.Errorf("view %s: the operator's ETag %v, the platform's %v", c.view, a, b)
		}
	}
	s.cli(nil, "catalog", "--view", "no-such-view").must(t, 4, "catalog --view no-such-view").
		contains(t, "an unknown view", `no view "no-such-view" (the views are team-a, gamma, none)`)
	// No broker credential of its own any more, and one view's password
	// opens no other view's user.
	s.cli(asPlatform("specsync", "local-broker-password"), "catalog").must(t, 3, "the default credential")
	s.cli(asPlatform("platform-a", "view-g-password"), "catalog").must(t, 3, "another view's password")

	// GET /admin/views lists them, with what each holds.
	req, err := http.NewRequest(http.MethodGet, s.url+"/admin/views", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	body := string(raw)
	for _, want := range []string{`"name":"team-a","username":"platform-a","rules":["registries allow team-a"],"services":2`, `"name":"none","username":"platform-n","rules":["services allow nothing"],"services":0`} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET /admin/views: %d %s, want %s", resp.StatusCode, body, want)
		}
	}
	if strings.Contains(body, "password") {
		t.Errorf("GET /admin/views shows a password: %s", body)
	}
}
