package osb_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/web"
)

// Authorization as RFC 9110 has it: the scheme is case-insensitive
// ("bearer" in lower case was refused), and a request with two
// Authorization headers is a 400 whichever comes first (good then bad
// was authenticated by the first, silently).
func TestAuthorizationParsing(t *testing.T) {
	e := newEnv(t, time.Minute)
	basic := base64.StdEncoding.EncodeToString([]byte(brokerUser + ":" + brokerPass))
	adminBasic := base64.StdEncoding.EncodeToString([]byte("anyone:" + adminToken))
	type route struct {
		path string
		good []string // Authorization values that must be accepted
		bad  string   // one that must not
	}
	routes := []route{
		{"/v2/catalog", []string{"Basic " + basic, "basic " + basic, "BASIC  " + basic}, "Basic " + base64.StdEncoding.EncodeToString([]byte(brokerUser+":wrong"))},
		{"/admin/operations", []string{"Bearer " + adminToken, "bearer " + adminToken, "BEARER " + adminToken, "bEaReR   " + adminToken, "basic " + adminBasic}, "Bearer wrong-token-0123456789"},
		{"/registries", []string{"bearer " + adminToken}, "Bearer wrong-token-0123456789"},
	}
	get := func(path string, auth ...string) response {
		req := e.request(http.MethodGet, path, "")
		req.Header.Del("Authorization")
		for _, a := range auth {
			req.Header.Add("Authorization", a)
		}
		return e.send(req)
	}
	for _, rt := range routes {
		for _, a := range rt.good {
			if r := get(rt.path, a); r.status != http.StatusOK {
				t.Errorf("GET %s with %q: %d %s", rt.path, strings.SplitN(a, " ", 2)[0], r.status, r.body)
			}
		}
		if r := get(rt.path, rt.bad); r.status != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong credential: %d", rt.path, r.status)
		}
		for name, pair := range map[string][]string{
			"good then bad": {rt.good[0], rt.bad},
			"bad then good": {rt.bad, rt.good[0]},
			"good twice":    {rt.good[0], rt.good[0]},
		} {
			r := get(rt.path, pair...)
			eb := wantOSBError(t, r, http.StatusBadRequest, "BadRequest")
			if !strings.Contains(eb.Description, "Authorization headers") {
				t.Errorf("GET %s, %s: %q", rt.path, name, eb.Description)
			}
		}
	}
}

// The request identity is echoed on every answer, a 413 (refused before
// routing) and a 404 of no route included, and logged with a write only
// up to 4 KiB, like the originating identity: a 60 kB header made a
// 60 kB log line of every write.
func TestRequestIdentityEchoedAndCapped(t *testing.T) {
	logs := &syncBuffer{}
	e := newEnv(t, time.Minute)
	broker := osb.NewBroker(e.st, osb.Config{Username: brokerUser, Password: brokerPass, MaxBodyBytes: testMaxBody, Logger: logging.New(logs, "info")})
	srv := httptest.NewServer(broker.Handler())
	t.Cleanup(srv.Close)
	e.srv = srv
	db := parseSpec(t, specYAML("db"))
	e.seed(db)

	const id = "req-4711"
	for name, req := range map[string]*http.Request{
		"413 declared": func() *http.Request {
			r := e.request(http.MethodPut, "/v2/service_instances/big", strings.Repeat(" ", testMaxBody+1))
			return r
		}(),
		"413 chunked": func() *http.Request {
			r := e.request(http.MethodPut, "/v2/service_instances/big", "")
			r.Body = http.NoBody
			r.Body = readCloser{strings.NewReader(`{"a":"` + strings.Repeat("x", testMaxBody) + `"}`)}
			r.ContentLength = -1
			return r
		}(),
		"404 no route":       e.request(http.MethodGet, "/nowhere", ""),
		"401 admin":          e.request(http.MethodGet, "/admin/specs", ""),
		"400 repeated query": e.request(http.MethodGet, "/v2/catalog/changes?since=1&since=2", ""),
		"400 two credentials": func() *http.Request {
			r := e.request(http.MethodGet, "/v2/catalog", "")
			r.Header.Add("Authorization", "Basic eA==")
			return r
		}(),
	} {
		req.Header.Set(web.RequestIdentityHeader, id)
		r := e.send(req)
		if r.status < 400 {
			t.Errorf("%s: %d", name, r.status)
		}
		if got := r.header.Get(web.RequestIdentityHeader); got != id {
			t.Errorf("%s (%d): request identity %q, want %q", name, r.status, got, id)
		}
	}

	huge := strings.Repeat("x", 5<<10)
	req := e.request(http.MethodPut, "/v2/service_instances/huge-id", provisionBody(db.ID, db.Plans[0].ID))
	req.Header.Set(web.RequestIdentityHeader, huge)
	if r := e.send(req); r.status != http.StatusCreated || r.header.Get(web.RequestIdentityHeader) != huge {
		t.Fatalf("a provision with a 5 KiB identity: %d, echoed %d bytes", r.status, len(r.header.Get(web.RequestIdentityHeader)))
	}
	var line map[string]any
	for _, l := range logs.lines(t, "osb write") {
		if l["instance"] == "huge-id" {
			line = l
		}
	}
	ri, ok := line["request_identity"].(map[string]any)
	if !ok || ri["bytes"] != float64(len(huge)) {
		t.Errorf("a 5 KiB identity was logged as %v", line["request_identity"])
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if strings.Contains(logs.buf.String(), huge[:4<<10]) {
		t.Error("the log holds the oversized identity")
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
