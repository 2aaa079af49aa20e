package functions_test

// End-to-end tests: each starts the local stack (`specsync-local run`) as its own
// process with its own project, so bootstrap publishes to the Pub/Sub
// emulator, the emulator pushes to the reconcile function through
// functions-framework-go, and the catalog reads the Firestore emulator —
// the production wiring, over real HTTP.

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
	t       *testing.T
	url     string
	project string
	admin   string
	client  *http.Client
	logsMu  *sync.Mutex
	logs    *bytes.Buffer
}

const (
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
	port := freePort(t)
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
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	logs := &bytes.Buffer{}
	var logMu sync.Mutex
	capture := writerFunc(func(p []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return logs.Write(p) })
	cmd.Stderr = capture
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
	s := &stack{t: t, url: fmt.Sprintf("http://127.0.0.1:%d", port), project: project, admin: adminToken,
		client: &http.Client{Timeout: 30 * time.Second}, logs: logs, logsMu: &logMu}
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
			t.Fatalf("stack exited before it was ready:\n%s", logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("stack not ready after 60s")
	}
	return s
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

// A bootstrap with a failing registry keeps that registry's specs in the
// catalog, and the operation says which registry failed.
func TestE2EFailingRegistryKeepsItsSpecs(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t, "alpha", "beta")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))

	op := s.bootstrap()
	if op.State != api.Succeeded {
		t.Fatalf("first bootstrap: %+v", op)
	}
	if c, _ := s.catalog(); names(c) != "alpha,beta,gamma" {
		t.Fatalf("catalog %s", names(c))
	}
	a.set(true)
	op = s.bootstrap()
	if op.State != api.Failed || !strings.Contains(op.Description, "team-a") || strings.Contains(op.Description, "team-b") {
		t.Fatalf("bootstrap with team-a down: %+v", op)
	}
	if r := op.result(t, "team-a"); r.Result != api.ResultFetchFailed || !strings.Contains(r.Error, "502") {
		t.Fatalf("team-a result %+v", r)
	}
	if c, _ := s.catalog(); names(c) != "alpha,beta,gamma" {
		t.Fatalf("after an outage the catalog is %s", names(c))
	}
}

// A spec removed upstream leaves the catalog at once, is deleted by a
// later bootstrap, but not while an instance of it exists.
func TestE2ERemovedSpecLifecycle(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t, "alpha", "beta", "delta")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))
	s.bootstrap()
	c, _ := s.catalog()
	var betaID, betaPlan string
	for _, svc := range c.Services {
		if svc.Name == "beta" {
			betaID, betaPlan = svc.ID, svc.Plans[0].ID
		}
	}
	put := s.do(http.MethodPut, "/v2/service_instances/inst-1", "broker",
		strings.NewReader(fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"context":{"platform":"kubernetes"}}`, betaID, betaPlan)))
	if put.status != http.StatusCreated {
		t.Fatalf("provision: %d %s", put.status, put.body)
	}

	a.set(false, "alpha", "delta")
	s.bootstrap()
	if c, _ := s.catalog(); names(c) != "alpha,delta,gamma" {
		t.Fatalf("a removed spec must leave the catalog at once: %s", names(c))
	}
	op := s.bootstrap()
	if r := op.result(t, "team-a"); r.Counts.Kept != 1 || r.Counts.Deleted != 0 {
		t.Fatalf("pinned spec: %+v", r)
	}
	regs := s.do(http.MethodGet, "/registries", "admin", nil)
	if regs.status != http.StatusOK || !strings.Contains(string(regs.body), `"instances":1`) {
		t.Fatalf("/registries does not show the kept spec and its instance: %d %s", regs.status, regs.body)
	}
	del := s.do(http.MethodDelete, "/v2/service_instances/inst-1?service_id="+betaID+"&plan_id="+betaPlan, "broker", nil)
	if del.status != http.StatusOK {
		t.Fatalf("deprovision: %d %s", del.status, del.body)
	}
	op = s.bootstrap()
	if r := op.result(t, "team-a"); r.Counts.Deleted != 1 {
		t.Fatalf("unpinned spec not deleted: %+v", r)
	}
}

// Concurrent bootstraps coalesce onto one operation; a bootstrap of an
// unchanged world writes nothing and keeps the catalog's ETag.
func TestE2ECoalesceAndETag(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t, "alpha")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))

	// Held, team-a keeps the operation in progress until every request has
	// been answered, so "concurrent" does not depend on the scheduler.
	release := a.hold()
	var wg sync.WaitGroup
	ids := make([]string, 3)
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := s.do(http.MethodPost, "/bootstrap", "admin", nil)
			var start struct{ Operation string }
			if r.status == http.StatusAccepted {
				_ = json.Unmarshal(r.body, &start)
			}
			ids[i] = start.Operation
		}(i)
	}
	wg.Wait()
	release()
	if ids[0] == "" || ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("concurrent bootstraps did not coalesce: %v", ids)
	}
	s.poll(ids[0])

	_, etag := s.catalog()
	if etag == "" {
		t.Fatal("catalog without ETag")
	}
	if r := s.do(http.MethodGet, "/v2/catalog", "broker", nil, "If-None-Match", etag); r.status != http.StatusNotModified {
		t.Fatalf("If-None-Match with the current ETag: %d", r.status)
	}
	op := s.bootstrap()
	if r := op.result(t, "team-a"); r.Result != api.ResultUnchanged {
		t.Fatalf("unchanged world: %+v", r)
	}
	if _, again := s.catalog(); again != etag {
		t.Fatalf("ETag moved without a change: %s -> %s", etag, again)
	}
	a.set(false, "alpha", "omega")
	// A dry run forecasts the change and changes nothing.
	dry := s.bootstrapAt("/bootstrap?dry_run=true")
	if r := dry.result(t, "team-a"); dry.State != api.Succeeded || r.Result != api.ResultDryRun || r.Counts.Created != 1 {
		t.Fatalf("dry run: %+v %+v", dry, r)
	}
	if c, again := s.catalog(); again != etag || strings.Contains(names(c), "omega") {
		t.Fatalf("a dry run changed the catalog: %s %s", again, names(c))
	}
	s.bootstrap()
	c, changed := s.catalog()
	if changed == etag || !strings.Contains(names(c), "omega") {
		t.Fatalf("ETag %s after a change (was %s), catalog %s", changed, etag, names(c))
	}
}

// Bad input: every status code the README promises, with OSB error bodies.
func TestE2EBadInput(t *testing.T) {
	t.Parallel()
	_, urlA := newIndex(t, "alpha")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))
	s.bootstrap()
	c, _ := s.catalog()
	svc := c.Services[0]
	good := fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, svc.ID, svc.Plans[0].ID)

	cases := []struct {
		name, method, path, auth, body string
		headers                        []string
		status                         int
	}{
		{"catalog without auth", "GET", "/v2/catalog", "", "", nil, 401},
		{"catalog wrong version", "GET", "/v2/catalog", "broker", "", []string{"X-Broker-API-Version", "1.0"}, 412},
		{"catalog wrong method", "POST", "/v2/catalog", "broker", "", nil, 405},
		{"unknown path", "GET", "/v2/nothing", "broker", "", nil, 404},
		{"bootstrap without token", "POST", "/bootstrap", "", "", nil, 401},
		{"bootstrap wrong token", "POST", "/bootstrap", "", "", []string{"Authorization", "Bearer nope"}, 401},
		{"bootstrap bad dry_run", "POST", "/bootstrap?dry_run=maybe", "admin", "", nil, 400},
		{"bootstrap unknown parameter", "POST", "/bootstrap?force=1", "admin", "", nil, 400},
		{"bootstrap wrong method", "GET", "/bootstrap", "admin", "", nil, 405},
		{"last_operation without id", "GET", "/bootstrap/last_operation", "admin", "", nil, 400},
		{"last_operation unknown", "GET", "/bootstrap/last_operation?operation=nope", "admin", "", nil, 404},
		{"registries without token", "GET", "/registries", "", "", nil, 401},
		{"provision malformed JSON", "PUT", "/v2/service_instances/i1", "broker", "{nope", nil, 400},
		{"provision too big", "PUT", "/v2/service_instances/i1", "broker", `{"x":"` + strings.Repeat("a", 70<<10) + `"}`, nil, 413},
		{"provision unknown service", "PUT", "/v2/service_instances/i1", "broker", `{"service_id":"nope","plan_id":"nope"}`, nil, 400},
		{"provision unknown plan", "PUT", "/v2/service_instances/i1", "broker", fmt.Sprintf(`{"service_id":%q,"plan_id":"nope"}`, svc.ID), nil, 400},
		{"provision missing ids", "PUT", "/v2/service_instances/i1", "broker", `{}`, nil, 400},
		{"get unknown instance", "GET", "/v2/service_instances/i1", "broker", "", nil, 404},
		{"delete unknown instance", "DELETE", "/v2/service_instances/i1?service_id=a&plan_id=b", "broker", "", nil, 410},
		{"delete without ids", "DELETE", "/v2/service_instances/i1", "broker", "", nil, 400},
		{"instance wrong method", "POST", "/v2/service_instances/i1", "broker", "", nil, 405},
		{"update unknown instance", "PATCH", "/v2/service_instances/i1", "broker", `{"service_id":"nope"}`, nil, 400},
		{"bind unknown instance", "PUT", "/v2/service_instances/i1/service_bindings/b1", "broker", `{"service_id":"a","plan_id":"b"}`, nil, 400},
		{"unbind unknown", "DELETE", "/v2/service_instances/i1/service_bindings/b1?service_id=a&plan_id=b", "broker", "", nil, 410},
		{"last_operation unknown instance", "GET", "/v2/service_instances/i1/last_operation", "broker", "", nil, 404},
		{"bootstrap too big", "POST", "/bootstrap", "admin", strings.Repeat("x", 70<<10), nil, 413},
	}
	for _, c := range cases {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		r := s.do(c.method, c.path, c.auth, body, c.headers...)
		if r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
			continue
		}
		if r.status >= 400 && r.status != 410 {
			var e struct{ Description string }
			if err := json.Unmarshal(r.body, &e); err != nil || e.Description == "" {
				t.Errorf("%s: body %q is not an OSB error", c.name, r.body)
			}
		}
		if c.status == 401 && r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", c.name)
		}
	}
	// Nothing was written by any of that: a real provision is still new.
	if r := s.do("PUT", "/v2/service_instances/i1", "broker", strings.NewReader(good)); r.status != 201 {
		t.Fatalf("provision after the bad requests: %d %s", r.status, r.body)
	}
	if r := s.do("PUT", "/v2/service_instances/i1", "broker", strings.NewReader(good)); r.status != 200 {
		t.Fatalf("identical provision: %d", r.status)
	}
	conflicting := fmt.Sprintf(`{"service_id":%q,"plan_id":"other-plan"}`, svc.ID)
	if r := s.do("PUT", "/v2/service_instances/i1", "broker", strings.NewReader(conflicting)); r.status != 409 {
		t.Fatalf("conflicting provision: %d %s", r.status, r.body)
	}
	if r := s.do("GET", "/v2/service_instances/i1", "broker", nil, "X-Broker-API-Request-Identity", "req-42"); r.status != 200 || r.header.Get("X-Broker-API-Request-Identity") != "req-42" {
		t.Fatalf("get instance: %d, identity %q", r.status, r.header.Get("X-Broker-API-Request-Identity"))
	}
}
