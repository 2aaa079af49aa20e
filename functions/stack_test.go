package functions_test

// The harness of the end-to-end tests: it builds the binaries, starts the
// local stack (`specsync-local run`) as a process of the test with its own
// project, talks to it over HTTP as a broker and an operator would, and
// serves HTTP index registries the tests edit and break.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binary builds cmd/specsync (the operator CLI) and cmd/specsync-local
// (the local stack) once per test binary and returns the path of name.
func binary(t *testing.T, name string) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "specsync-e2e-"); binErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "../cmd/specsync", "../cmd/specsync-local").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build specsync and specsync-local: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, name)
}

// specsyncBinary is the operator CLI.
func specsyncBinary(t *testing.T) string { return binary(t, "specsync") }

func requireEmulators(t *testing.T) {
	t.Helper()
	for _, v := range []string{"FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"} {
		if os.Getenv(v) == "" {
			t.Fatalf("%s is not set: run the end-to-end tests through `make test`", v)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// stack is a running `specsync-local run` process.
type stack struct {
	t   *testing.T
	url string
	// pushURL is the push endpoint's base (its own loopback port, the
	// token included): a push subscription delivers below it.
	pushURL string
	project string
	admin   string
	client  *http.Client
	logsMu  *sync.Mutex
	logs    *bytes.Buffer // stdout and stderr
	stderr  *bytes.Buffer // the log alone
}

const (
	pushToken  = "e2e-push-token-0123456789"
	adminToken = "e2e-admin-token-0123456789"
	brokerUser = "platform"
	brokerPass = "e2e-broker-password"
)

// startStack runs the local stack on registriesYAML (written to a file).
func startStack(t *testing.T, registriesYAML string, extraEnv ...string) *stack {
	t.Helper()
	requireEmulators(t)
	bin := binary(t, "specsync-local")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "registries.yaml")
	if err := os.WriteFile(cfg, []byte(registriesYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	project := emulatortest.ProjectID(t)
	// The ports are picked free here and bound by the stack a moment
	// later: another test may take one in between. A stack that could not
	// bind is started again on fresh ports (at most three times), never
	// counted as a failure of the test.
	for attempt := 1; ; attempt++ {
		if s, retry := launchStack(t, bin, cfg, project, attempt < 3, extraEnv); !retry {
			return s
		}
	}
}

// launchStack starts one stack process on fresh ports. It returns the
// stack once it is ready; or, with retry, reports (true) a stack that
// exited because a port was taken in the meantime.
func launchStack(t *testing.T, bin, cfg, project string, retry bool, extraEnv []string) (*stack, bool) {
	t.Helper()
	port := freePort(t)
	pushAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "run", "-log-level", "debug")
	cmd.Dir = ".." // the repository root, where examples/ lives
	cmd.Env = append(os.Environ(),
		"GOOGLE_CLOUD_PROJECT="+project,
		fmt.Sprintf("PORT=%d", port),
		"SPECSYNC_REGISTRIES="+cfg,
		"SPECSYNC_ADMIN_TOKEN="+adminToken,
		"SPECSYNC_BROKER_USERNAME="+brokerUser,
		"SPECSYNC_BROKER_PASSWORD="+brokerPass,
		"SPECSYNC_CATALOG_REFRESH=1ms",
		"SPECSYNC_TOPIC=reconcile-"+project,
		// A free port: tests run several stacks at once.
		"SPECSYNC_LOCAL_REGISTRY=127.0.0.1:0",
		"SPECSYNC_LOCAL_PUSH_ADDR="+pushAddr,
		"SPECSYNC_LOCAL_PUSH_TOKEN="+pushToken,
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	logs := &bytes.Buffer{}
	var logMu sync.Mutex
	stderr := &bytes.Buffer{}
	capture := writerFunc(func(p []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return logs.Write(p) })
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		stderr.Write(p)
		logMu.Unlock()
		return capture.Write(p)
	})
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = capture.Write([]byte(sc.Text() + "\n"))
			if strings.HasPrefix(sc.Text(), "ready") {
				ready <- true
			}
		}
		ready <- false
	}()
	s := &stack{t: t, url: fmt.Sprintf("http://127.0.0.1:%d", port), pushURL: "http://" + pushAddr + "/" + pushToken, project: project, admin: adminToken,
		client: &http.Client{Timeout: 30 * time.Second}, logs: logs, stderr: stderr, logsMu: &logMu}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			logMu.Lock()
			t.Logf("stack logs:\n%s", logs.String())
			logMu.Unlock()
		}
	})
	select {
	case ok := <-ready:
		if !ok {
			logMu.Lock()
			defer logMu.Unlock()
			if retry && strings.Contains(logs.String(), "address already in use") {
				t.Logf("the stack's port was taken before it bound it; starting it again on fresh ports")
				return nil, true
			}
			t.Fatalf("stack exited before it was ready:\n%s", logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("stack not ready after 60s")
	}
	return s, false
}

// registry is the stack's OCI registry address, as its banner says
// ("specsync local stack on URL (project P, OCI registry HOST)").
func (s *stack) registry() string {
	s.t.Helper()
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	m := regexp.MustCompile(`OCI registry ([^)\s]+)\)`).FindStringSubmatch(s.logs.String())
	if m == nil {
		s.t.Fatalf("the stack's banner names no OCI registry:\n%s", s.logs.String())
	}
	return m[1]
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response %d is not JSON: %v: %s", r.status, err, r.body)
	}
}

// do sends a request; auth is "admin", "broker" or "".
func (s *stack) do(method, path, auth string, body io.Reader, headers ...string) response {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	switch auth {
	case "admin":
		req.Header.Set("Authorization", "Bearer "+s.admin)
	case "broker":
		req.SetBasicAuth(brokerUser, brokerPass)
		req.Header.Set("X-Broker-API-Version", "2.17")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// lastOp is a bootstrap's last_operation answer, with the tests' helper.
type lastOp struct{ api.LastOperation }

// result is registry name's result; the test fails without one.
func (o lastOp) result(t *testing.T, name string) api.RegistryResult {
	t.Helper()
	r, ok := o.Registries[name]
	if !ok {
		t.Fatalf("operation has no result for %s: %+v", name, o)
	}
	return r
}

// bootstrap starts a bootstrap and polls it to the end.
func (s *stack) bootstrap() lastOp { s.t.Helper(); return s.bootstrapAt("/bootstrap") }

func (s *stack) bootstrapAt(path string) lastOp {
	s.t.Helper()
	r := s.do(http.MethodPost, path, "admin", nil)
	if r.status != http.StatusAccepted {
		s.t.Fatalf("POST /bootstrap: %d %s", r.status, r.body)
	}
	if r.header.Get("Location") == "" || r.header.Get("Retry-After") == "" {
		s.t.Fatalf("202 without Location/Retry-After: %v", r.header)
	}
	var start api.BootstrapAccepted
	r.json(s.t, &start)
	op := s.poll(start.Operation)
	// Read-your-writes: a finished real bootstrap names the catalog
	// revision its changes reached, and the catalog already serves it
	// (this stack's catalog re-checks the revision on every request,
	// SPECSYNC_CATALOG_REFRESH=1ms).
	switch {
	case op.DryRun && op.CatalogRevision != nil:
		s.t.Fatalf("a dry run names catalog revision %d", *op.CatalogRevision)
	case !op.DryRun && op.CatalogRevision == nil:
		s.t.Fatalf("bootstrap %s finished (%s: %s) without a catalog revision", start.Operation, op.State, op.Description)
	case !op.DryRun:
		cat := s.do(http.MethodGet, "/v2/catalog", "broker", nil)
		if got, err := strconv.ParseInt(cat.header.Get(api.RevisionHeader), 10, 64); err != nil || got < *op.CatalogRevision {
			s.t.Fatalf("bootstrap %s finished at catalog revision %d; the catalog then served %q", start.Operation, *op.CatalogRevision, cat.header.Get(api.RevisionHeader))
		}
	}
	return op
}

func (s *stack) poll(id string) lastOp {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := s.do(http.MethodGet, "/bootstrap/last_operation?operation="+id, "admin", nil)
		if r.status != http.StatusOK {
			s.t.Fatalf("last_operation: %d %s", r.status, r.body)
		}
		var op lastOp
		r.json(s.t, &op)
		if op.State != api.InProgress {
			if r.header.Get("Retry-After") != "" {
				s.t.Fatalf("finished operation still says Retry-After")
			}
			return op
		}
		if r.header.Get("Retry-After") == "" {
			s.t.Fatal("in-progress operation without Retry-After")
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("operation %s still in progress after 90s: %+v", id, op)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *stack) catalog() (catalog.Catalog, string) {
	s.t.Helper()
	r := s.do(http.MethodGet, "/v2/catalog", "broker", nil)
	if r.status != http.StatusOK {
		s.t.Fatalf("GET /v2/catalog: %d %s", r.status, r.body)
	}
	var c catalog.Catalog
	r.json(s.t, &c)
	return c, r.header.Get("ETag")
}

func names(c catalog.Catalog) string {
	var out []string
	for _, s := range c.Services {
		out = append(out, s.Name)
	}
	return strings.Join(out, ",")
}

// index is an HTTP index registry the test edits and breaks.
type index struct {
	mu   sync.Mutex
	body string
	down bool
	// gate, while set, holds every request until it is closed: it keeps an
	// operation in progress for as long as a test needs.
	gate chan struct{}
}

func (ix *index) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ix.mu.Lock()
	gate := ix.gate
	ix.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.down {
		http.Error(w, "index is down", http.StatusBadGateway)
		return
	}
	_, _ = io.WriteString(w, ix.body)
}

// setBody serves body as the index document.
func (ix *index) setBody(body string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.down, ix.body = false, body
}

// hold makes requests wait until the returned release is called.
func (ix *index) hold() (release func()) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	gate := make(chan struct{})
	ix.gate = gate
	return func() {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		ix.gate = nil
		close(gate)
	}
}

func (ix *index) set(down bool, specs ...string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.down = down
	if specs != nil {
		var b strings.Builder
		for _, n := range specs {
			fmt.Fprintf(&b, "- name: %s\n  description: the %s service\n  bindable: true\n  plans:\n    - name: default\n      description: the plan\n", n, n)
		}
		ix.body = b.String()
	}
}

func newIndex(t *testing.T, specs ...string) (*index, string) {
	ix := &index{}
	ix.set(false, specs...)
	srv := httptest.NewServer(ix)
	t.Cleanup(srv.Close)
	return ix, srv.URL + "/index.yaml"
}

func twoIndexes(urlA, urlB string) string {
	return fmt.Sprintf(`registries:
  - name: team-a
    type: http
    http: {url: %q, timeout: 5s}
  - name: team-b
    type: http
    http: {url: %q, timeout: 5s}
`, urlA, urlB)
}
