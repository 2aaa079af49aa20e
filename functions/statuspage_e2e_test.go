package functions_test

// The status page, loaded in headless Chromium against the local stack.

import (
	"bytes"
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
	t.Fatal("no chromium on PATH: install Debian's chromium package (.ci/run does) or set SPECSYNC_CHROMIUM")
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

func runChromium(t *testing.T, args ...string) []byte {
	t.Helper()
	profile := t.TempDir()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--hide-scrollbars", "--user-data-dir=" + profile, "--window-size=1280,1600", "--virtual-time-budget=3000"}
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

// The status page, loaded in headless Chromium after a bootstrap with one
// failing registry, shows that registry as failing (and the other as ok),
// and a screenshot is kept.
func TestE2EStatusPageInChromium(t *testing.T) {
	t.Parallel()
	_, urlA := newIndex(t, "alpha", "beta")
	b, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))
	s.bootstrap()
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
	s.do(http.MethodGet, "/admin/operations?limit=1", "admin", nil).json(t, &opsBody)
	if len(opsBody.Operations) != 1 || opsBody.Operations[0].State != api.Failed || opsBody.Operations[0].Total.Reads == 0 {
		t.Errorf("the newest operation: %+v", opsBody)
	}

	u, _ := url.Parse(s.url + "/status")
	u.User = url.UserPassword("admin", adminToken) // the browser's basic auth
	dom := string(runChromium(t, "--dump-dom", u.String()))
	row := func(name string) string {
		m := regexp.MustCompile(`(?s)<tr id="registry-` + name + `"[^>]*>.*?</tr>`).FindString(dom)
		if m == "" {
			t.Fatalf("the rendered page has no row for %s:\n%s", name, dom)
		}
		return m
	}
	failing := row("team-b")
	if !strings.Contains(failing, `data-health="failing"`) || !regexp.MustCompile(`class="health failing">failing<`).MatchString(failing) || !strings.Contains(failing, "502") {
		t.Errorf("team-b is not shown as failing with its error:\n%s", failing)
	}
	if ok := row("team-a"); !strings.Contains(ok, `data-health="ok"`) {
		t.Errorf("team-a is not shown as ok:\n%s", ok)
	}
	if !strings.Contains(dom, `id="failing-count" class="err">1 failing<`) {
		t.Errorf("the summary does not count one failing registry")
	}
	if !strings.Contains(dom, `<svg id="ops-chart"`) || strings.Count(dom, `<g class="bar`) != 2 {
		t.Errorf("the chart does not show the two bootstraps")
	}
	if !regexp.MustCompile(`data-state="failed"`).MatchString(dom) {
		t.Errorf("the failed bootstrap is not listed")
	}

	shot := filepath.Join(artifactsDir(t), "status-page.png")
	_ = os.Remove(shot)
	runChromium(t, "--screenshot="+shot, u.String())
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if len(png) < 10_000 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot %s is not a real PNG page (%d bytes)", shot, len(png))
	}
	t.Logf("screenshot of the status page: %s (%d bytes)", shot, len(png))
}
