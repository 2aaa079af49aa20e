package osb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// Credentials of the test broker. The admin token is long enough for the
// settings' own minimum, so the tests use what production would accept.
const (
	brokerUser  = "platform"
	brokerPass  = "broker-password-for-tests"
	adminToken  = "admin-token-for-tests-0123456789"
	testReg     = "local"
	testMaxBody = 4 << 10
	apiVersion  = "2.17"
)

// clock is a settable time source for Cache.Now: the refresh window is
// crossed by advancing it, never by sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a broker on its own emulator project behind an httptest server.
// Every test (not benchmark) built on it ends with the invariant checker
// (end), settled: nothing here runs in the background, and seed, mark
// and the tests commit what they write.
type env struct {
	t      testing.TB
	ctx    context.Context
	client *firestore.Client
	st     *store.Store
	broker *osb.Broker
	srv    *httptest.Server
	clock  *clock
	window time.Duration
	end    *invariant.AtEnd
}

func newEnv(t testing.TB, window time.Duration) *env {
	t.Helper()
	return newEnvOn(t, emulatortest.Firestore(t), window)
}

// newEnvOn is newEnv on a client the test made (through an interceptor,
// to see or break its calls).
func newEnvOn(t testing.TB, client *firestore.Client, window time.Duration) *env {
	t.Helper()
	st := store.New(client)
	b := osb.NewBroker(st, osb.Config{
		Username: brokerUser, Password: brokerPass,
		VerifyAdmin:   web.StaticToken(adminToken),
		MaxBodyBytes:  testMaxBody,
		RefreshWindow: window,
	})
	c := newClock()
	b.Cache.Now = c.Now
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	e := &env{t: t, ctx: context.Background(), client: client, st: st, broker: b, srv: srv, clock: c, window: window,
		end: &invariant.AtEnd{}}
	// A benchmark measures; reading back its thousands of specs after
	// every run of it would measure nothing and take minutes.
	if _, bench := t.(*testing.B); !bench {
		e.end = invariant.CheckAtEnd(t, client, invariant.Options{Settled: true, Canaries: []string{brokerPass, adminToken}})
	}
	return e
}

// storeEnv is an env without a broker, on a project the test opened
// itself (to reach it through a client of its own as well): the store
// helpers only, and the same end check as newEnv's.
func storeEnv(t *testing.T, client *firestore.Client) *env {
	t.Helper()
	return &env{t: t, ctx: context.Background(), client: client, st: store.New(client), clock: newClock(),
		end: invariant.CheckAtEnd(t, client, invariant.Options{Settled: true})}
}

// newDBEnv is a broker whose catalog holds one spec, db (specYAML).
func newDBEnv(t *testing.T) (*env, *spec.Spec) {
	t.Helper()
	e := newEnv(t, time.Minute)
	db := parseSpec(t, specYAML("db"))
	e.seed(db)
	return e, db
}

// specYAML is a spec in the APB format a registry label carries. Its
// first plan has provision, update and bind parameters (so every schema
// the catalog can render is there), its second none.
func specYAML(name string) string {
	return fmt.Sprintf(`version: "1.0"
name: %[1]s
description: The %[1]s service
bindable: true
async: optional
tags: [test, %[1]s]
metadata:
  displayName: %[1]s (test)
  providerDisplayName: Tests
plans:
  - name: small
    description: One small node
    free: true
    updates_to: [large]
    parameters:
      - name: password
        title: Password
        type: string
        display_type: password
        required: true
        min_length: 12
      - name: size_gb
        type: int
        default: 1
        minimum: 1
        maximum: 64
        updatable: true
      - name: flavour
        type: enum
        enum: [plain, fancy]
        default: plain
    bind_parameters:
      - name: role
        type: enum
        enum: [readonly, readwrite]
        required: true
  - name: large
    description: Three large nodes
    free: false
`, name)
}

// parseSpec parses YAML as a registry entry would be and assigns ids for
// testReg, exactly as the reconcile candidates are built.
func parseSpec(t testing.TB, yaml string) *spec.Spec {
	t.Helper()
	s, err := spec.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("parse spec: %v", err)
	}
	spec.AssignIDs(s, testReg)
	return s
}

// seed upserts the specs the way a reconcile run does: each write leaves
// a pending change, and committing them moves the catalog revision.
func (e *env) seed(specs ...*spec.Spec) {
	e.t.Helper()
	for _, s := range specs {
		res, err := e.st.UpsertSpec(e.ctx, store.Offer{
			Registry: testReg, Entry: s.Name, Ref: "registry.test/" + s.Name + ":latest",
			Spec: s, Digest: spec.Digest(s), Run: "seed",
		})
		if err != nil {
			e.t.Fatalf("upsert %s: %v", s.Name, err)
		}
		if res.Outcome != store.Created {
			e.t.Fatalf("upsert %s: outcome %s, want created", s.Name, res.Outcome)
		}
	}
	e.commit()
}

// commit gives the pending changes their revisions and returns the
// catalog revision.
func (e *env) commit() int64 {
	e.t.Helper()
	if _, err := e.st.CommitPending(e.ctx, time.Hour); err != nil {
		e.t.Fatalf("commit changes: %v", err)
	}
	rev, err := e.st.Revision(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

// mark marks a spec the way step 5 of a run does and commits the change.
func (e *env) mark(id, runID string) {
	e.t.Helper()
	ok, err := e.st.MarkSpec(e.ctx, testReg, id, runID)
	if err != nil || !ok {
		e.t.Fatalf("mark %s: %v %v", id, ok, err)
	}
	e.commit()
}

// request builds a broker request with valid credentials and API version;
// tests take away or change what they are about.
func (e *env) request(method, path, body string) *http.Request {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	req.SetBasicAuth(brokerUser, brokerPass)
	req.Header.Set("X-Broker-API-Version", apiVersion)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (e *env) send(req *http.Request) response {
	e.t.Helper()
	r, err := e.try(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// try is send for goroutines other than the test's, which must not call
// t.Fatal.
func (e *env) try(req *http.Request) (response, error) {
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: read body: %w", req.Method, req.URL.Path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func (e *env) do(method, path, body string) response {
	e.t.Helper()
	return e.send(e.request(method, path, body))
}

// wantOSBError checks an OSB error body: JSON with a description, and the
// error code when want is not "".
func wantOSBError(t testing.TB, r response, status int, code string) api.ErrorBody {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var eb api.ErrorBody
	dec := json.NewDecoder(strings.NewReader(string(r.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil {
		t.Fatalf("error body is not OSB-shaped: %v: %s", err, r.body)
	}
	if eb.Description == "" {
		t.Errorf("error body without description: %s", r.body)
	}
	if code != "" && eb.Error != code {
		t.Errorf("error code %q, want %q (%s)", eb.Error, code, eb.Description)
	}
	return eb
}

// wantEmptyObject checks a `{}` body, what OSB asks for on 200/201/410 of
// the instance endpoints.
func wantEmptyObject(t testing.TB, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil || m == nil || len(m) != 0 {
		t.Fatalf("body %s, want {}", r.body)
	}
}

// provision provisions instance id of the service on the plan; it must be
// new (201).
func (e *env) provision(id, serviceID, planID string) {
	e.t.Helper()
	wantEmptyObject(e.t, e.do(http.MethodPut, "/v2/service_instances/"+id, provisionBody(serviceID, planID)), http.StatusCreated)
}

// guids are OSB's required organization_guid and space_guid, for a
// provision body's fields.
const guids = `"organization_guid":"org-1","space_guid":"space-1"`

func provisionBody(serviceID, planID string) string {
	return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,%s,"context":{"platform":"kubernetes","namespace":"apps"},"parameters":{"password":"correct horse battery"}}`, serviceID, planID, guids)
}

// dbState is every document of the project, subcollections included (an
// instance's bindings), with its update time: two equal states mean
// nothing was created, changed or deleted in between.
func (e *env) dbState() map[string]time.Time {
	e.t.Helper()
	out := map[string]time.Time{}
	cols, err := e.client.Collections(e.ctx).GetAll()
	if err != nil {
		e.t.Fatalf("list collections: %v", err)
	}
	for len(cols) > 0 {
		col := cols[0]
		cols = cols[1:]
		snaps, err := col.Documents(e.ctx).GetAll()
		if err != nil {
			e.t.Fatalf("list %s: %v", col.Path, err)
		}
		for _, s := range snaps {
			out[s.Ref.Path] = s.UpdateTime
		}
		refs, err := col.DocumentRefs(e.ctx).GetAll()
		if err != nil {
			e.t.Fatalf("list %s: %v", col.Path, err)
		}
		for _, ref := range refs {
			subs, err := ref.Collections(e.ctx).GetAll()
			if err != nil {
				e.t.Fatalf("list subcollections of %s: %v", ref.Path, err)
			}
			cols = append(cols, subs...)
		}
	}
	return out
}

// instanceDocs returns every instances/{id} document, by id.
func (e *env) instanceDocs() map[string]store.Instance {
	e.t.Helper()
	snaps, err := e.client.Collection(store.InstancesCollection).Documents(e.ctx).GetAll()
	if err != nil {
		e.t.Fatalf("list instances: %v", err)
	}
	out := map[string]store.Instance{}
	for _, s := range snaps {
		var inst store.Instance
		if err := s.DataTo(&inst); err != nil {
			e.t.Fatal(err)
		}
		if err := inst.DecodeContext(); err != nil {
			e.t.Fatal(err)
		}
		out[s.Ref.ID] = inst
	}
	return out
}

func (e *env) instanceCount(specID string) int64 {
	e.t.Helper()
	rec, err := e.st.GetSpec(e.ctx, specID)
	if err != nil {
		e.t.Fatalf("get spec %s: %v", specID, err)
	}
	return rec.Instances
}

func (e *env) catalog() (catalog.Catalog, response) {
	e.t.Helper()
	r := e.do(http.MethodGet, "/v2/catalog", "")
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /v2/catalog: %d %s", r.status, r.body)
	}
	var c catalog.Catalog
	if err := json.Unmarshal(r.body, &c); err != nil {
		e.t.Fatalf("catalog body: %v", err)
	}
	return c, r
}

func serviceNames(c catalog.Catalog) []string {
	var out []string
	for _, s := range c.Services {
		out = append(out, s.Name)
	}
	return out
}
