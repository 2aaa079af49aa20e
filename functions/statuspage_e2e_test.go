package functions_test

// The status page, loaded in headless Chromium against the local stack.

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
)

// chromium returns the headless browser the status page test drives.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("SPECSYNC_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: install Debian's chromium package (scripts/setup test does) or set SPECSYNC_CHROMIUM")
	return ""
}

// artifactsDir is where tests keep files for people to look at:
// $SPECSYNC_TEST_ARTIFACTS, default ./artifacts at the repository root
// (gitignored).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SPECSYNC_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// runChromium runs headless Chromium in a 1280 px wide window.
func runChromium(t *testing.T, args ...string) []byte {
	t.Helper()
	return runChromiumAt(t, 1280, 1600, args...)
}

// runChromiumAt runs headless Chromium in a window of width x height
// CSS pixels (a phone is some 390 wide).
func runChromiumAt(t *testing.T, width, height int, args ...string) []byte {
	t.Helper()
	profile := t.TempDir()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--hide-scrollbars", "--user-data-dir=" + profile, fmt.Sprintf("--window-size=%d,%d", width, height),
		"--force-device-scale-factor=1", "--virtual-time-budget=3000"}
	cmd := exec.Command(chromium(t), append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
		}
	case <-time.After(120 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("chromium %v did not finish in 120s\n%s", args, errb.String())
	}
	return out.Bytes()
}

// statusIndex is an index document: a valid spec per name in good, an
// invalid one (no plan) per name in broken.
func statusIndex(good, broken []string) string {
	var b strings.Builder
	for _, n := range good {
		fmt.Fprintf(&b, "- name: %s\n  description: the %s service\n  bindable: true\n  plans:\n    - name: default\n      description: the plan\n", n, n)
	}
	for _, n := range broken {
		fmt.Fprintf(&b, "- name: %s\n  description: the %s service\n  bindable: true\n  plans: []\n", n, n)
	}
	return b.String()
}

// The status page, loaded in headless Chromium after two bootstraps (the
// second with team-b down, and team-a offering a broken version of beta,
// a broken new entry delta, and no alpha, which an instance pins), shows
// and explains each thing an operator asks of it: every health (team-b
// failing, team-a degraded, with the entry that never reached the catalog
// told from the one that keeps its last good version), a legend for every
// count, each registry's source (no credential), last success and last
// duration, the catalog's services and plans as a platform sees them,
// anchors between registries, specs, instances and bootstraps that all
// lead somewhere, and the chart's numbers written on it. It does so
// without script, and screenshots are kept at 1280 px and at phone width.
func TestE2EStatusPageInChromium(t *testing.T) {
	t.Parallel()
	const secretUser, secretPass = "ann-reader-7q", "pw-never-shown-3x9"
	a, urlA := newIndex(t)
	a.setBody(statusIndex([]string{"alpha", "beta", "epsilon"}, nil))
	b, urlB := newIndex(t, "gamma")
	s := startStack(t, fmt.Sprintf(`registries:
  - name: team-a
    type: http
    http:
      url: %q
      timeout: 5s
      auth: {type: basic, username: %s, password_env: TEAM_A_PASSWORD}
  - name: team-b
    type: http
    http: {url: %q, timeout: 5s}
`, urlA, secretUser, urlB), "TEAM_A_PASSWORD="+secretPass)
	s.bootstrap()
	cat, _ := s.catalog()
	ids := map[string]string{}
	var alphaPlan string
	for _, svc := range cat.Services {
		ids[svc.Name] = svc.ID
		if svc.Name == "alpha" {
			alphaPlan = svc.Plans[0].ID
		}
	}
	if put := s.do(http.MethodPut, "/v2/service_instances/inst-status", "broker",
		strings.NewReader(fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org","space_guid":"space","context":{"platform":"kubernetes"}}`, ids["alpha"], alphaPlan))); put.status != http.StatusCreated {
		t.Fatalf("provision: %d %s", put.status, put.body)
	}
	a.setBody(statusIndex([]string{"epsilon"}, []string{"beta", "delta"}))
	b.set(true)
	if op := s.bootstrap(); op.State != api.Failed {
		t.Fatalf("bootstrap with team-b down: %+v", op)
	}

	// Without the credential: 401 with a Basic challenge, so a browser asks.
	if r := s.do(http.MethodGet, "/status", "", nil); r.status != http.StatusUnauthorized || !strings.Contains(strings.Join(r.header.Values("WWW-Authenticate"), ","), "Basic") {
		t.Fatalf("status page without credential: %d %v", r.status, r.header)
	}
	// The admin endpoints: bearer or basic (admin token as password), and
	// their parameters checked.
	for _, c := range []struct {
		path, auth string
		headers    []string
		status     int
	}{
		{"/status", "admin", nil, 200},
		{"/status?x=1", "admin", nil, 400},
		{"/admin/specs", "", nil, 401},
		{"/admin/specs", "", []string{"Authorization", "Basic " + basic("anyone", adminToken)}, 200},
		{"/admin/specs", "", []string{"Authorization", "Basic " + basic("anyone", "wrong")}, 401},
		{"/admin/specs", "broker", nil, 401},
		{"/admin/specs?state=bogus", "admin", nil, 400},
		{"/admin/specs?marked=maybe", "admin", nil, 400},
		{"/admin/specs?marked=true&state=active", "admin", nil, 400},
		{"/admin/specs?color=red", "admin", nil, 400},
		{"/admin/instances?service_id=nope", "admin", nil, 200},
		{"/admin/operations?limit=0", "admin", nil, 400},
		{"/admin/operations?limit=101", "admin", nil, 400},
		{"/admin/operations?limit=1", "admin", nil, 200},
	} {
		if r := s.do(http.MethodGet, c.path, c.auth, nil, c.headers...); r.status != c.status {
			t.Errorf("GET %s (%s): %d %s, want %d", c.path, c.auth, r.status, r.body, c.status)
		}
	}
	if r := s.do(http.MethodPost, "/admin/specs", "admin", nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /admin/specs: %d", r.status)
	}
	var opsBody api.OperationList
	s.do(http.MethodGet, "/admin/operations?limit=2", "admin", nil).json(t, &opsBody)
	if len(opsBody.Operations) != 2 || opsBody.Operations[0].State != api.Failed || opsBody.Operations[0].Total.Reads == 0 {
		t.Fatalf("the two operations, newest first: %+v", opsBody)
	}
	newest := opsBody.Operations[0].ID

	u, _ := url.Parse(s.url + "/status")
	u.User = url.UserPassword("admin", adminToken) // the browser's basic auth
	// Everything is checked on the page as Chromium renders it, and on
	// the HTML the server sends: it needs no script.
	raw := s.do(http.MethodGet, "/status", "admin", nil)
	if raw.status != http.StatusOK {
		t.Fatalf("GET /status: %d %s", raw.status, raw.body)
	}
	checkStatusPage(t, "chromium", string(runChromium(t, "--dump-dom", u.String())), urlA, ids, newest, opsBody)
	checkStatusPage(t, "server", string(raw.body), urlA, ids, newest, opsBody)
	for _, secret := range []string{secretPass, secretUser} {
		if strings.Contains(string(raw.body), secret) {
			t.Errorf("the status page shows team-a's credential %q", secret)
		}
	}

	// Screenshots, at a desktop's width and at a phone's.
	for _, shot := range []struct {
		name          string
		width, height int
	}{{"status-page.png", 1280, 2200}, {"status-page-phone.png", 390, 2400}} {
		path := filepath.Join(artifactsDir(t), shot.name)
		_ = os.Remove(path)
		runChromiumAt(t, shot.width, shot.height, "--screenshot="+path, u.String())
		png, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("no screenshot: %v", err)
		}
		if len(png) < 10_000 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("screenshot %s is not a real PNG page (%d bytes)", path, len(png))
		}
		if w := int(png[16])<<24 | int(png[17])<<16 | int(png[18])<<8 | int(png[19]); w != shot.width {
			t.Errorf("screenshot %s is %d px wide, want %d", path, w, shot.width)
		}
		t.Logf("screenshot of the status page at %d px: %s (%d bytes)", shot.width, path, len(png))
	}
}

// checkStatusPage checks the status page of TestE2EStatusPageInChromium
// (dom), as where (Chromium, the server) gives it.
func checkStatusPage(t *testing.T, where, dom, urlA string, ids map[string]string, newest string, opsBody api.OperationList) {
	t.Helper()
	errorf := func(format string, args ...any) { t.Helper(); t.Errorf(where+": "+format, args...) }
	row := func(name string) string {
		m := regexp.MustCompile(`(?s)<tr id="registry-` + name + `"[^>]*>.*?</tr>`).FindString(dom)
		if m == "" {
			t.Fatalf("%s: the page has no row for %s:\n%s", where, name, dom)
		}
		return m
	}
	cell := func(row, class string) string {
		return regexp.MustCompile(`(?s)<td class="` + class + `"[^>]*>(.*?)</td>`).FindStringSubmatch(row + `<td class="` + class + `"></td>`)[1]
	}

	// Health: team-b failing with its error, team-a degraded, and the
	// summary counts both.
	failing := row("team-b")
	if !strings.Contains(failing, `data-health="failing"`) || !regexp.MustCompile(`class="health failing"[^>]*>failing<`).MatchString(failing) || !strings.Contains(failing, "502") {
		errorf("team-b is not shown as failing with its error:\n%s", failing)
	}
	degraded := row("team-a")
	if !strings.Contains(degraded, `data-health="degraded"`) || !regexp.MustCompile(`class="health degraded"[^>]*>degraded<`).MatchString(degraded) {
		errorf("team-a, whose entries beta and delta do not validate, is not shown as degraded:\n%s", degraded)
	}
	if !strings.Contains(dom, `id="failing-count" class="err">1 failing<`) || !strings.Contains(dom, `id="degraded-count">1 degraded<`) {
		errorf("the summary does not count one failing and one degraded registry")
	}
	// Which entries never reached the catalog, and which keep their last
	// good version (linked to it in the catalog section).
	if !strings.Contains(degraded, `class="never-reached err">1 entry never reached the catalog<`) {
		errorf("team-a does not say that one entry never reached the catalog:\n%s", degraded)
	}
	entry := func(name string) string {
		return regexp.MustCompile(`(?s)<li class="entry-error" data-entry="` + name + `"[^>]*>.*?</li>`).FindString(degraded)
	}
	if e := entry("delta"); !strings.Contains(e, `data-in-catalog="false"`) || !strings.Contains(e, "never reached the catalog") || !strings.Contains(e, "at least one plan") {
		errorf("delta (never valid) is not shown as never reaching the catalog, with its reason: %q", e)
	}
	if e := entry("beta"); !strings.Contains(e, `data-in-catalog="true"`) || !strings.Contains(e, `href="#service-`+ids["beta"]+`"`) {
		errorf("beta (broken now, valid before) is not shown as keeping its last good version, linked: %q", e)
	}

	// Source, last success, last duration.
	if src := cell(degraded, "source"); !strings.Contains(src, `<span class="source-type">http</span>`) ||
		!strings.Contains(src, `<code class="source-location">`+urlA+`</code>`) || !strings.Contains(src, "auth: basic") {
		errorf("team-a's source (http, %s, basic auth) is not shown: %q", urlA, src)
	}
	for _, name := range []string{"team-a", "team-b"} {
		r := row(name)
		if ls := cell(r, "last-success"); !strings.Contains(ls, "<time datetime=") {
			errorf("%s: no last success (its first bootstrap succeeded): %q", name, ls)
		}
		if d := cell(r, "duration"); !regexp.MustCompile(`^\d+ ms$|^\d+\.\d s$`).MatchString(d) {
			errorf("%s: no last duration: %q", name, d)
		}
	}

	// A legend for every count and health.
	legend := regexp.MustCompile(`(?s)<dl class="legend">.*?</dl>`).FindString(dom)
	for _, want := range []string{"+N</dt><dd>created", "~N</dt><dd>updated", "=N</dt><dd>unchanged", "↺N</dt><dd>unmarked",
		"✕N</dt><dd>marked", "−N</dt><dd>deleted", "kept N</dt>", "held N</dt>", "Nr Nw Nd</dt><dd>Firestore",
		"ok</dt>", "degraded</dt>", "guarded</dt>", "failing</dt>", "unknown</dt>"} {
		if !strings.Contains(legend, "<dt>"+want) {
			errorf("the legend does not explain %q:\n%s", want, legend)
		}
	}

	// The catalog as a platform sees it: beta (its last good version),
	// epsilon and gamma (team-b is down: nothing changes), not alpha
	// (marked) nor delta (never valid).
	var services []string
	for _, m := range regexp.MustCompile(`(?s)<tr id="service-([^"]+)" class="service"[^>]*>(.*?)</tr>`).FindAllStringSubmatch(dom, -1) {
		name := regexp.MustCompile(`<strong>([^<]+)</strong>`).FindStringSubmatch(m[2])[1]
		if ids[name] != m[1] || !strings.Contains(m[2], `<strong>default</strong>`) {
			errorf("service row %s (%s) is not the catalog's, with its plan: %s", name, m[1], m[2])
		}
		services = append(services, name)
	}
	if got := strings.Join(services, ","); got != "beta,epsilon,gamma" {
		errorf("the catalog section lists %q, want beta,epsilon,gamma", got)
	}

	// Links: the marked spec to its registry and its pinning instance;
	// each registry to its newest bootstrap, each bootstrap result to its
	// registry; and every anchor on the page leads to an element.
	marked := regexp.MustCompile(`(?s)<tr id="spec-` + ids["alpha"] + `" class="marked".*?</tr>`).FindString(dom)
	if !strings.Contains(marked, `href="#registry-team-a"`) || !strings.Contains(marked, `id="instance-inst-status"`) {
		errorf("the marked spec alpha does not link its registry and instance:\n%s", marked)
	}
	for _, name := range []string{"team-a", "team-b"} {
		if !strings.Contains(row(name), `href="#bootstrap-`+newest+`"`) {
			errorf("%s does not link its newest bootstrap %s", name, newest)
		}
	}
	if !strings.Contains(dom, `id="bootstrap-`+newest+`"`) || !regexp.MustCompile(`data-registry="team-b"><a href="#registry-team-b">`).MatchString(dom) {
		errorf("the bootstraps do not link their registries")
	}
	hrefs := regexp.MustCompile(`href="#([^"]+)"`).FindAllStringSubmatch(dom, -1)
	if len(hrefs) < 15 {
		errorf("only %d anchors on the page", len(hrefs))
	}
	for _, h := range hrefs {
		target, _ := url.PathUnescape(h[1])
		if !strings.Contains(dom, `id="`+target+`"`) {
			errorf("anchor #%s leads nowhere", target)
		}
	}

	// The chart: two bars, each with its total written above it, oldest
	// first.
	if !strings.Contains(dom, `<svg id="ops-chart"`) || strings.Count(dom, `<g class="bar`) != 2 {
		errorf("the chart does not show the two bootstraps")
	}
	var totals []string
	for _, m := range regexp.MustCompile(`<text class="total"[^>]*>(\d+)</text>`).FindAllStringSubmatch(dom, -1) {
		totals = append(totals, m[1])
	}
	var want []string
	for i := len(opsBody.Operations) - 1; i >= 0; i-- {
		c := opsBody.Operations[i].Total
		want = append(want, fmt.Sprint(c.Reads+c.Writes+c.Deletes))
	}
	if strings.Join(totals, ",") != strings.Join(want, ",") {
		errorf("the chart's bars say %v, want the bootstraps' totals %v", totals, want)
	}
	if !regexp.MustCompile(`<text class="part"[^>]*>\d+</text>`).MatchString(dom) {
		errorf("no part of a bar has its count written in it")
	}
	if !regexp.MustCompile(`data-state="failed"`).MatchString(dom) {
		errorf("the failed bootstrap is not listed")
	}

}
