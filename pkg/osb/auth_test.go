package osb_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/osb"
)

func TestBrokerAuth(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.seed(parseSpec(t, specYAML("db")))
	paths := []struct{ method, path, body string }{
		{http.MethodGet, "/v2/catalog", ""},
		{http.MethodPut, "/v2/service_instances/i1", `{}`},
		{http.MethodGet, "/v2/service_instances/i1", ""},
		{http.MethodDelete, "/v2/service_instances/i1?service_id=a&plan_id=b", ""},
	}
	creds := map[string]func(*http.Request){
		"none":           func(r *http.Request) { r.Header.Del("Authorization") },
		"wrong password": func(r *http.Request) { r.SetBasicAuth(brokerUser, brokerPass+"x") },
		"wrong user":     func(r *http.Request) { r.SetBasicAuth("someone", brokerPass) },
		"empty password": func(r *http.Request) { r.SetBasicAuth(brokerUser, "") },
		"admin bearer":   func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+adminToken) },
		// Auth comes before the version check: an unauthenticated caller
		// learns nothing about what the broker accepts.
		"none, no version": func(r *http.Request) {
			r.Header.Del("Authorization")
			r.Header.Del("X-Broker-API-Version")
		},
	}
	for _, p := range paths {
		for name, breakAuth := range creds {
			t.Run(p.method+" "+p.path+"/"+name, func(t *testing.T) {
				req := e.request(p.method, p.path, p.body)
				breakAuth(req)
				r := e.send(req)
				wantOSBError(t, r, http.StatusUnauthorized, "Unauthorized")
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") || !strings.Contains(got, "realm=") {
					t.Errorf("WWW-Authenticate %q, want a Basic challenge with a realm", got)
				}
				if strings.Contains(string(r.body), brokerPass) {
					t.Error("the response contains the broker password")
				}
			})
		}
	}
}

func TestBrokerAPIVersion(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.seed(parseSpec(t, specYAML("db")))
	for _, v := range []string{"", "1.0", "3.0", "2", "2.x", "v2.17", "2.17.1", "2.17.x"} {
		t.Run("reject "+v, func(t *testing.T) {
			req := e.request(http.MethodGet, "/v2/catalog", "")
			if v == "" {
				req.Header.Del("X-Broker-API-Version")
			} else {
				req.Header.Set("X-Broker-API-Version", v)
			}
			r := e.send(req)
			eb := wantOSBError(t, r, http.StatusPreconditionFailed, "")
			if eb.Error == "" {
				t.Errorf("412 without an error code: %s", r.body)
			}
			if !strings.Contains(eb.Description, "2.") {
				t.Errorf("412 description %q does not say which version is wanted", eb.Description)
			}
		})
	}
	// Any 2.x: minor versions only add optional fields (docs/api.md).
	for _, v := range []string{"2.0", "2.12", "2.13", "2.17", "2.18"} {
		t.Run("accept "+v, func(t *testing.T) {
			req := e.request(http.MethodGet, "/v2/catalog", "")
			req.Header.Set("X-Broker-API-Version", v)
			if r := e.send(req); r.status != http.StatusOK {
				t.Fatalf("version %s: %d %s", v, r.status, r.body)
			}
		})
	}
	// The version guards the instance endpoints as well.
	req := e.request(http.MethodPut, "/v2/service_instances/i1", `{}`)
	req.Header.Set("X-Broker-API-Version", "1.0")
	wantOSBError(t, e.send(req), http.StatusPreconditionFailed, "")
}

func TestBrokerEchoesRequestIdentity(t *testing.T) {
	e := newEnv(t, time.Minute)
	db := parseSpec(t, specYAML("db"))
	e.seed(db)
	cases := map[string]struct {
		req  func() *http.Request
		want int
	}{
		"catalog": {func() *http.Request { return e.request(http.MethodGet, "/v2/catalog", "") }, http.StatusOK},
		"provision": {func() *http.Request {
			return e.request(http.MethodPut, "/v2/service_instances/echo1", provisionBody(db.ID, db.Plans[0].ID))
		}, http.StatusCreated},
		"fetch unknown":  {func() *http.Request { return e.request(http.MethodGet, "/v2/service_instances/nope", "") }, http.StatusNotFound},
		"wrong method":   {func() *http.Request { return e.request(http.MethodPost, "/v2/catalog", "") }, http.StatusMethodNotAllowed},
		"malformed body": {func() *http.Request { return e.request(http.MethodPut, "/v2/service_instances/x", "{") }, http.StatusBadRequest},
		"old version": {func() *http.Request {
			r := e.request(http.MethodGet, "/v2/catalog", "")
			r.Header.Set("X-Broker-API-Version", "1.0")
			return r
		}, http.StatusPreconditionFailed},
		// OSB: the broker SHOULD include the header in the response to the
		// request; a refused request is still a response to it.
		"unauthenticated": {func() *http.Request {
			r := e.request(http.MethodGet, "/v2/catalog", "")
			r.Header.Del("Authorization")
			return r
		}, http.StatusUnauthorized},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			id := "req-" + strings.ReplaceAll(name, " ", "-") + "-4711"
			req := c.req()
			req.Header.Set("X-Broker-API-Request-Identity", id)
			r := e.send(req)
			if r.status != c.want {
				t.Fatalf("status %d, want %d: %s", r.status, c.want, r.body)
			}
			if got := r.header.Get("X-Broker-API-Request-Identity"); got != id {
				t.Errorf("X-Broker-API-Request-Identity %q, want %q", got, id)
			}
		})
	}
	// Without one in the request there is nothing to echo.
	if r := e.do(http.MethodGet, "/v2/catalog", ""); r.header.Get("X-Broker-API-Request-Identity") != "" {
		t.Errorf("an identity was invented: %q", r.header.Get("X-Broker-API-Request-Identity"))
	}
}

// TestOneAdminRule: every admin endpoint of the catalog function takes
// the admin credential the same two ways, a bearer token or the password
// of basic auth with any user name, and refuses the broker's credentials,
// a wrong token and none alike, with both challenges.
func TestOneAdminRule(t *testing.T) {
	e := newEnv(t, time.Minute)
	for _, path := range []string{"/registries", "/admin/specs", "/admin/instances", "/admin/operations", "/status"} {
		for name, c := range map[string]struct {
			auth func(*http.Request)
			ok   bool
		}{
			"bearer":              {func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+adminToken) }, true},
			"basic password":      {func(r *http.Request) { r.SetBasicAuth("anyone", adminToken) }, true},
			"broker basic":        {func(*http.Request) {}, false},
			"wrong bearer":        {func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+adminToken+"x") }, false},
			"wrong basic":         {func(r *http.Request) { r.SetBasicAuth("anyone", adminToken+"x") }, false},
			"token as basic user": {func(r *http.Request) { r.SetBasicAuth(adminToken, "") }, false},
			"none":                {func(r *http.Request) { r.Header.Del("Authorization") }, false},
		} {
			t.Run(path+"/"+name, func(t *testing.T) {
				req := e.request(http.MethodGet, path, "")
				c.auth(req)
				r := e.send(req)
				if c.ok {
					if r.status != http.StatusOK {
						t.Fatalf("%d %s, want 200", r.status, r.body)
					}
					return
				}
				wantOSBError(t, r, http.StatusUnauthorized, "Unauthorized")
				wantAdminChallenges(t, r)
			})
		}
	}
}

// wantAdminChallenges: a refused admin request names both ways in.
func wantAdminChallenges(t *testing.T, r response) {
	t.Helper()
	got := strings.Join(r.header.Values("WWW-Authenticate"), ", ")
	if !strings.Contains(got, `Basic realm="specsync-admin"`) || !strings.Contains(got, `Bearer realm="specsync-admin"`) {
		t.Errorf("WWW-Authenticate %q, want a Basic and a Bearer challenge", got)
	}
}

// syncBuffer is a log destination the server's goroutines write to while
// the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log lines whose message is msg.
func (b *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %s", l)
		}
		if m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// Every instance and binding write is one structured log line: what was
// asked, of which ids, its status, and who asked: OSB's request identity
// and originating identity, decoded (platform and user). Never the
// credentials, the raw header or a parameter; reads are not logged.
func TestWritesLogOriginatingIdentity(t *testing.T) {
	logs := &syncBuffer{}
	e := newEnv(t, time.Minute)
	broker := osb.NewBroker(e.st, osb.Config{Username: brokerUser, Password: brokerPass, MaxBodyBytes: testMaxBody, Logger: logging.New(logs, "info")})
	srv := httptest.NewServer(broker.Handler())
	t.Cleanup(srv.Close)
	e.srv = srv
	db := parseSpec(t, specYAML("db"))
	e.seed(db)
	small := db.Plans[0].ID

	const user = `{"username":"alice@example.com","uid":"u-1","groups":["devs"]}`
	identity := "kubernetes " + base64.StdEncoding.EncodeToString([]byte(user))
	send := func(method, path, body, originating string) response {
		t.Helper()
		req := e.request(method, path, body)
		req.Header.Set("X-Broker-API-Request-Identity", "req-"+method)
		if originating != "" {
			req.Header.Set("X-Broker-API-Originating-Identity", originating)
		}
		return e.send(req)
	}
	send(http.MethodPut, "/v2/service_instances/who", provisionBody(db.ID, small), identity)
	send(http.MethodGet, "/v2/service_instances/who", "", identity)
	send(http.MethodPatch, "/v2/service_instances/who", patchBody(db.ID, "", `"parameters":{"size_gb":2}`), "cloudfoundry "+base64.StdEncoding.EncodeToString([]byte(`{"user_id":"683ea748"}`)))
	send(http.MethodPut, "/v2/service_instances/who/service_bindings/b1", bindBody(db.ID, small, `"parameters":{"role":"readonly"}`), identity)
	send(http.MethodDelete, "/v2/service_instances/who/service_bindings/b1?service_id="+db.ID+"&plan_id="+small, "", "kubernetes not-base64!")
	send(http.MethodDelete, "/v2/service_instances/who?service_id="+db.ID+"&plan_id="+small, "", "")
	send(http.MethodDelete, "/v2/service_instances/who?service_id="+db.ID+"&plan_id="+small, "", "only-one-word")

	got := logs.lines(t, "osb write")
	want := []struct {
		operation, binding string
		status             float64
		identity           string // the identity the line must carry, as JSON
	}{
		{"provision", "", 201, `{"platform":"kubernetes","value":` + user + `}`},
		{"update", "", 200, `{"platform":"cloudfoundry","value":{"user_id":"683ea748"}}`},
		{"bind", "b1", 201, `{"platform":"kubernetes","value":` + user + `}`},
		{"unbind", "b1", 200, `{"error":"value is not the base64 of a JSON object","platform":"kubernetes"}`},
		{"deprovision", "", 200, ""},
		{"deprovision", "", 410, `{"error":"not \"platform value\" with a platform name"}`},
	}
	if len(got) != len(want) {
		t.Fatalf("%d write log lines, want %d (reads are not logged): %v", len(got), len(want), got)
	}
	for i, w := range want {
		l := got[i]
		if l["operation"] != w.operation || l["instance"] != "who" || l["status"] != w.status || l["severity"] != "INFO" || l["request_identity"] == nil {
			t.Errorf("line %d: %v, want %s of who answered %v", i, l, w.operation, w.status)
		}
		if b, _ := l["binding"].(string); b != w.binding {
			t.Errorf("line %d: binding %q, want %q", i, b, w.binding)
		}
		oi, present := l["originating_identity"]
		if w.identity == "" {
			if present {
				t.Errorf("line %d: an identity was invented: %v", i, oi)
			}
			continue
		}
		var wantOI any
		if err := json.Unmarshal([]byte(w.identity), &wantOI); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(oi, wantOI) {
			t.Errorf("line %d: originating_identity %v, want %v", i, oi, wantOI)
		}
	}
	all := logs.buf.String()
	basic := base64.StdEncoding.EncodeToString([]byte(brokerUser + ":" + brokerPass))
	for _, secret := range []string{brokerPass, basic, "correct horse battery", "not-base64!", "only-one-word", base64.StdEncoding.EncodeToString([]byte(user))} {
		if strings.Contains(all, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}
