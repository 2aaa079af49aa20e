package osb_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/osb/osbtest"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// viewsYAML are the test's views: alpha and beta are disjoint (one
// registry each), mixed overlaps both (by service name), dbs is chosen by
// tag, none matches nothing.
const viewsYAML = `views:
  - name: alpha
    username: alpha
    password_env: ALPHA
    registries: {allow: [data]}
  - name: beta
    username: beta
    password_env: BETA
    registries: {allow: [apps]}
  - name: mixed
    username: mixed
    password_env: MIXED
    services: {allow: [redis|web]}
  - name: dbs
    username: dbs
    password_env: DBS
    tags: {allow: [database], deny: [deprecated]}
  - name: none
    username: none
    password_env: NONE
    services: {allow: ["nothing-.*"]}
`

// viewsFromYAML builds the broker's views from a views file through
// pkg/config (the rules the functions use), each password its user name
// with "-pass" (or check, when given for that user).
func viewsFromYAML(t testing.TB, yaml string, check map[string]func(string) bool) []osb.View {
	t.Helper()
	f, err := config.ParseViews([]byte(yaml), "test")
	if err != nil {
		t.Fatal(err)
	}
	var out []osb.View
	for i := range f.Views {
		v := &f.Views[i]
		pw := check[v.Username]
		if pw == nil {
			pw = web.MatchPlain(v.Username + "-pass")
		}
		ov := osb.View{Name: v.Name, Username: v.Username, Password: pw, Tag: v.Digest(), Rules: v.Describe()}
		if !v.All() {
			ov.Match = func(s osb.ServiceFacts) bool { return v.Allows(s.Registry, s.Name, s.Tags, s.AnyTags) }
		}
		out = append(out, ov)
	}
	return out
}

// newViewsEnv is newEnv with the broker's credentials as views, and its
// log.
func newViewsEnv(t *testing.T, window time.Duration, views []osb.View) (*env, *syncBuffer) {
	t.Helper()
	client := emulatortest.Firestore(t)
	st := store.New(client)
	logs := &syncBuffer{}
	b := osb.NewBroker(st, osb.Config{Views: views, VerifyAdmin: web.StaticToken(adminToken), MaxBodyBytes: testMaxBody, RefreshWindow: window,
		Logger: logging.New(logs, "info")})
	c := newClock()
	b.Cache.Now = c.Now
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, ctx: t.Context(), client: client, st: st, broker: b, srv: srv, clock: c, window: window,
		end: invariant.CheckAtEnd(t, client, invariant.Options{Settled: true, Canaries: []string{"alpha-pass", "beta-pass", adminToken}})}, logs
}

// seedIn upserts specs of registry reg and commits them.
func (e *env) seedIn(reg string, yamls ...string) map[string]*spec.Spec {
	e.t.Helper()
	out := map[string]*spec.Spec{}
	for _, y := range yamls {
		s, err := spec.Parse([]byte(y))
		if err != nil {
			e.t.Fatal(err)
		}
		spec.AssignIDs(s, reg)
		if _, err := e.st.UpsertSpec(e.ctx, store.Offer{Registry: reg, Entry: s.Name, Ref: "registry.test/" + s.Name + ":latest",
			Spec: s, Digest: spec.Digest(s), Run: "seed"}); err != nil {
			e.t.Fatalf("upsert %s: %v", s.Name, err)
		}
		out[s.Name] = s
	}
	e.commit()
	return out
}

// as sends a request with user's credentials ("<user>-pass").
func (e *env) as(user, method, path, body string) response {
	e.t.Helper()
	req := e.request(method, path, body)
	req.SetBasicAuth(user, user+"-pass")
	return e.send(req)
}

func (e *env) catalogAs(user string) (catalog.Catalog, response) {
	e.t.Helper()
	r := e.as(user, http.MethodGet, "/v2/catalog", "")
	if r.status != http.StatusOK {
		e.t.Fatalf("%s: GET /v2/catalog: %d %s", user, r.status, r.body)
	}
	var c catalog.Catalog
	if err := json.Unmarshal(r.body, &c); err != nil {
		e.t.Fatalf("%s: catalog body: %v", user, err)
	}
	return c, r
}

func (e *env) feedAs(user, query string) api.ChangePage {
	e.t.Helper()
	r := e.as(user, http.MethodGet, "/v2/catalog/changes?"+query, "")
	var p api.ChangePage
	if r.status != http.StatusOK || json.Unmarshal(r.body, &p) != nil {
		e.t.Fatalf("%s: changes?%s: %d %s", user, query, r.status, r.body)
	}
	return p
}

func changeNames(p api.ChangePage) []string {
	var out []string
	for _, c := range p.Changes {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

// withTags is specYAML with other tags.
func withTags(name string, tags ...string) string {
	return strings.Replace(specYAML(name), "tags: [test, "+name+"]", "tags: ["+strings.Join(tags, ", ")+"]", 1)
}

func TestViewsEachPlatformSeesOnlyItsOwn(t *testing.T) {
	e, logs := newViewsEnv(t, time.Minute, viewsFromYAML(t, viewsYAML, nil))
	data := e.seedIn("data", withTags("pg", "database"), withTags("redis", "cache"))
	apps := e.seedIn("apps", withTags("web", "http"), withTags("mysql", "database", "deprecated"))

	want := map[string][]string{
		"alpha": {"pg", "redis"},
		"beta":  {"mysql", "web"},
		"mixed": {"redis", "web"},
		"dbs":   {"pg"},
		"none":  nil,
	}
	etags := map[string]string{}
	for user, names := range want {
		c, r := e.catalogAs(user)
		if got := serviceNames(c); !slices.Equal(got, names) {
			t.Errorf("%s sees %v, want %v", user, got, names)
		}
		if rev := r.header.Get(api.RevisionHeader); rev != "4" {
			t.Errorf("%s: X-Catalog-Revision %q, want the catalog's 4", user, rev)
		}
		if r.header.Get(api.EpochHeader) == "" {
			t.Errorf("%s's catalog has no %s: its feed could not be followed", user, api.EpochHeader)
		}
		if err := osbtest.Check(http.MethodGet, "/v2/catalog", r.status, r.body); err != nil {
			t.Errorf("%s's catalog is not OSB's: %v", user, err)
		}
		if user == "none" && string(r.body) != `{"services":[]}` {
			t.Errorf("a view that matches nothing: %s, want an empty catalog", r.body)
		}
		for other, tag := range etags {
			if tag == r.header.Get("ETag") {
				t.Errorf("%s and %s share the ETag %s", user, other, tag)
			}
		}
		etags[user] = r.header.Get("ETag")
		// The view is filtered from the one render: no read of its own.
		if reads := r.header.Get("X-Specsync-Firestore-Reads"); reads != "0" && len(etags) > 1 {
			t.Errorf("%s: %s Firestore reads, want 0 inside the window", user, reads)
		}
	}
	// Each view's ETag revalidates its own body, not another's.
	req := e.request(http.MethodGet, "/v2/catalog", "")
	req.SetBasicAuth("alpha", "alpha-pass")
	req.Header.Set("If-None-Match", etags["alpha"])
	if r := e.send(req); r.status != http.StatusNotModified {
		t.Errorf("alpha with its own ETag: %d, want 304", r.status)
	}
	req.SetBasicAuth("beta", "beta-pass")
	if r := e.send(req); r.status != http.StatusOK {
		t.Errorf("beta with alpha's ETag: %d, want 200", r.status)
	}

	// Each view's gzip form is its own too.
	gz := map[string]string{}
	for _, user := range []string{"alpha", "beta"} {
		req := e.request(http.MethodGet, "/v2/catalog", "")
		req.SetBasicAuth(user, user+"-pass")
		req.Header.Set("Accept-Encoding", "gzip") // set by hand: the client leaves the body compressed
		r := e.send(req)
		if r.status != http.StatusOK || r.header.Get("Content-Encoding") != "gzip" || !strings.HasSuffix(r.header.Get("ETag"), `-gz"`) {
			t.Fatalf("%s with gzip: %d %q ETag %s", user, r.status, r.header.Get("Content-Encoding"), r.header.Get("ETag"))
		}
		gz[user] = r.header.Get("ETag")
	}
	// (Go's client asked for gzip by itself above: the same tags.)
	if gz["alpha"] == gz["beta"] || gz["alpha"] != etags["alpha"] {
		t.Errorf("gzip ETags %v, want two, alpha's as before (%s)", gz, etags["alpha"])
	}

	// The feed: each view's changes only.
	for user, names := range want {
		p := e.feedAs(user, "since=0")
		if got := changeNames(p); !slices.Equal(got, names) {
			t.Errorf("%s's feed carries %v, want %v", user, got, names)
		}
		if p.Next != 4 || p.Revision != 4 {
			t.Errorf("%s's feed: next %d revision %d, want 4 and 4", user, p.Next, p.Revision)
		}
	}

	// Provisioning: inside the view as ever; outside it refused exactly
	// as a service that does not exist.
	pg, web := data["pg"], apps["web"]
	wantEmptyObject(t, e.as("alpha", http.MethodPut, "/v2/service_instances/i-pg", provisionBody(pg.ID, pg.Plans[0].ID)), http.StatusCreated)
	unknown := wantOSBError(t, e.as("alpha", http.MethodPut, "/v2/service_instances/i-x", provisionBody("no-such-service", "no-such-plan")), http.StatusBadRequest, "BadRequest")
	for _, user := range []string{"alpha", "none", "dbs"} {
		got := wantOSBError(t, e.as(user, http.MethodPut, "/v2/service_instances/i-web", provisionBody(web.ID, web.Plans[0].ID)), http.StatusBadRequest, "BadRequest")
		if got.Description != strings.ReplaceAll(unknown.Description, "no-such-service", web.ID) {
			t.Errorf("%s provisioning web: %q, want the unknown service's %q", user, got.Description, unknown.Description)
		}
	}
	if _, ok := e.instanceDocs()["i-web"]; ok {
		t.Fatal("an instance outside the view was recorded")
	}
	wantEmptyObject(t, e.as("mixed", http.MethodPut, "/v2/service_instances/i-web", provisionBody(web.ID, web.Plans[0].ID)), http.StatusCreated)
	// Each write's log line names the view that asked.
	var views []string
	for _, l := range logs.lines(t, "osb write") {
		if l["instance"] == "i-web" {
			views = append(views, fmt.Sprint(l["view"], " ", l["status"]))
		}
	}
	if got := strings.Join(views, ", "); got != "alpha 400, none 400, dbs 400, mixed 201" {
		t.Errorf("the writes of i-web were logged as %s", got)
	}

	// Update and bind outside the view: refused as unknown too.
	patch := fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, pg.ID, pg.Plans[1].ID)
	upd := wantOSBError(t, e.as("beta", http.MethodPatch, "/v2/service_instances/i-pg", patch), http.StatusBadRequest, "BadRequest")
	if want := "service " + pg.ID + " is not in the catalog"; upd.Description != want {
		t.Errorf("beta updating pg: %q, want %q", upd.Description, want)
	}
	bind := fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, pg.ID, pg.Plans[0].ID)
	bnd := wantOSBError(t, e.as("beta", http.MethodPut, "/v2/service_instances/i-pg/service_bindings/b1", bind), http.StatusBadRequest, "BadRequest")
	if want := "service " + pg.ID + " is not in the catalog"; bnd.Description != want {
		t.Errorf("beta binding pg: %q, want %q", bnd.Description, want)
	}
	wantEmptyObject(t, e.as("alpha", http.MethodPut, "/v2/service_instances/i-pg/service_bindings/b1", bind), http.StatusCreated)
	wantEmptyObject(t, e.as("alpha", http.MethodPatch, "/v2/service_instances/i-pg", patch), http.StatusOK)

	// A service that leaves a view by its tags reaches the view's feed as
	// a removal; the other views' feeds do not carry it at all.
	redis2 := parseSpecIn(t, "data", withTags("redis", "cache", "database", "deprecated"))
	if _, err := e.st.UpsertSpec(e.ctx, store.Offer{Registry: "data", Entry: "redis", Ref: "registry.test/redis:2", Spec: redis2, Digest: spec.Digest(redis2), Run: "seed2"}); err != nil {
		t.Fatal(err)
	}
	pg2 := parseSpecIn(t, "data", withTags("pg", "cache"))
	if _, err := e.st.UpsertSpec(e.ctx, store.Offer{Registry: "data", Entry: "pg", Ref: "registry.test/pg:2", Spec: pg2, Digest: spec.Digest(pg2), Run: "seed2"}); err != nil {
		t.Fatal(err)
	}
	e.commit()
	e.clock.Advance(time.Hour) // past the refresh window
	p := e.feedAs("dbs", "since=4")
	if len(p.Changes) != 2 || p.Changes[0].Name != "redis" || p.Changes[0].Service != nil || p.Changes[1].Name != "pg" || p.Changes[1].Service != nil || p.Next != 6 {
		t.Errorf("dbs after redis was deprecated and pg lost its database tag: %+v, want both without a service, next 6", p)
	}
	if p := e.feedAs("beta", "since=4"); len(p.Changes) != 0 || p.Next != 6 {
		t.Errorf("beta's feed carries data's changes: %+v", p)
	}
	if p := e.feedAs("alpha", "since=4"); len(p.Changes) != 2 || p.Changes[0].Service == nil || p.Changes[1].Service == nil {
		t.Errorf("alpha's feed: %+v, want both changes with their service", p)
	}
	if c, _ := e.catalogAs("dbs"); len(c.Services) != 0 {
		t.Errorf("dbs after both changes: %v, want nothing", serviceNames(c))
	}

	// The status page and GET /admin/views show the views and what each
	// holds, never a password.
	admin := func(path string) string {
		req := e.request(http.MethodGet, path, "")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		r := e.send(req)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		return string(r.body)
	}
	page := admin("/status")
	for _, want := range []string{
		`<tr data-view="alpha"><td><strong>alpha</strong></td><td><code>alpha</code></td><td><ul class="flat"><li><code>registries allow data</code></li></ul></td><td class="view-services">2</td></tr>`,
		`<tr data-view="none">`, `<td class="view-services">0</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %s", want)
		}
	}
	var list api.ViewList
	if err := json.Unmarshal([]byte(admin("/admin/views")), &list); err != nil || len(list.Views) != 5 || list.Revision != 6 {
		t.Fatalf("GET /admin/views: %+v %v", list, err)
	}
	for _, v := range list.Views {
		if want := map[string]int{"alpha": 2, "beta": 2, "mixed": 2, "dbs": 0, "none": 0}[v.Name]; v.Services != want {
			t.Errorf("view %s holds %d services, want %d", v.Name, v.Services, want)
		}
	}
	for _, body := range []string{page, admin("/admin/views")} {
		if strings.Contains(body, "-pass") {
			t.Error("a view's password is shown")
		}
	}
}

func parseSpecIn(t *testing.T, reg, yaml string) *spec.Spec {
	t.Helper()
	s, err := spec.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	spec.AssignIDs(s, reg)
	return s
}

// A long poll of a view is not woken by another view's change: it waits
// on, and answers with the revision it reached and nothing in it.
func TestViewsFeedWaitSkipsOtherViews(t *testing.T) {
	e, _ := newViewsEnv(t, 10*time.Millisecond, viewsFromYAML(t, viewsYAML, nil))
	e.seedIn("data", withTags("pg", "database"))
	e.clock.Advance(time.Hour)
	done := make(chan api.ChangePage, 1)
	go func() {
		req := e.request(http.MethodGet, "/v2/catalog/changes?since=1&wait=3s", "")
		req.SetBasicAuth("alpha", "alpha-pass")
		r, err := e.try(req)
		var p api.ChangePage
		if err == nil {
			err = json.Unmarshal(r.body, &p)
		}
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	time.Sleep(300 * time.Millisecond)
	e.seedIn("apps", withTags("web", "http")) // revision 2: beta's
	time.Sleep(300 * time.Millisecond)
	e.seedIn("data", withTags("redis", "cache")) // revision 3: alpha's
	select {
	case p := <-done:
		if got := changeNames(p); !slices.Equal(got, []string{"redis"}) || p.Next != 3 {
			t.Errorf("alpha's long poll: %v next %d, want [redis] next 3", got, p.Next)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not answer")
	}
}

// A view's password in a file is re-read: after a rotation the new one is
// accepted and the old one refused, without a restart of the broker.
func TestViewsRotatedCredential(t *testing.T) {
	path := filepath.Join(t.TempDir(), "alpha-password")
	if err := os.WriteFile(path, []byte("old-alpha-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const refresh = 50 * time.Millisecond
	views := viewsFromYAML(t, viewsYAML, map[string]func(string) bool{"alpha": web.MatchFile(path, 0, refresh, nil)})
	e, _ := newViewsEnv(t, time.Minute, views)
	e.seedIn("data", withTags("pg", "database"))
	get := func(pass string) int {
		req := e.request(http.MethodGet, "/v2/catalog", "")
		req.SetBasicAuth("alpha", pass)
		return e.send(req).status
	}
	if s := get("old-alpha-password"); s != http.StatusOK {
		t.Fatalf("old password before the rotation: %d", s)
	}
	if s := get("new-alpha-password"); s != http.StatusUnauthorized {
		t.Fatalf("new password before the rotation: %d, want 401", s)
	}
	if err := os.WriteFile(path, []byte("new-alpha-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for get("new-alpha-password") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the rotated password was not accepted")
		}
		time.Sleep(refresh / 2)
	}
	if s := get("old-alpha-password"); s != http.StatusUnauthorized {
		t.Errorf("old password after the rotation: %d, want 401", s)
	}
	// The other views' credentials are untouched, and no view's password
	// opens another's user.
	if r := e.as("beta", http.MethodGet, "/v2/catalog", ""); r.status != http.StatusOK {
		t.Errorf("beta after alpha's rotation: %d", r.status)
	}
	req := e.request(http.MethodGet, "/v2/catalog", "")
	req.SetBasicAuth("beta", "new-alpha-password")
	if s := e.send(req).status; s != http.StatusUnauthorized {
		t.Errorf("beta's user with alpha's password: %d, want 401", s)
	}
}
