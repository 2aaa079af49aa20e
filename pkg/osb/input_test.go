package osb_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/store"
)

// storeText is what of Firestore's own text must never reach an answer:
// its resource paths and gRPC status text.
var storeText = []string{"projects/", "databases/", "documents/", "rpc error", "desc =", "grpc", "firestore", "DocumentRef", "(default)"}

func wantNoStoreText(t *testing.T, what string, body []byte) {
	t.Helper()
	for _, s := range storeText {
		if strings.Contains(strings.ToLower(string(body)), strings.ToLower(s)) {
			t.Errorf("%s: the answer holds store text %q: %s", what, s, body)
		}
	}
}

// badIDs are ids no document may have, as a URL path segment or query
// value carries them (percent-encoded) and as a JSON string does.
var badIDs = []struct{ name, escaped, json string }{
	{"dot", "%2E", "."},
	{"dot dot", "%2E%2E", ".."},
	{"reserved", "__x__", "__x__"},
	{"reserved name", "__name__", "__name__"},
	{"invalid UTF-8", "%FF", ""},
	{"lone surrogate", "%ED%B0%80", ""},
	{"slashes", "a%2Fb%2Fc", "a/b/c"},
	{"too long", strings.Repeat("a", 256), strings.Repeat("a", 256)},
	{"space", "a%20b", "a b"},
	{"NUL", "%00", "\u0000"},
	{"not ASCII", "%C3%A9", "é"},
	{"newline", "a%0Ab", "a\nb"},
}

// Every route that takes an id, with every malformed id in every place an
// id goes (path, query, body): a 4xx with an OSB error that names no
// store internals, and nothing written. Before the ids were checked at
// the edge, "." and ".." reached Firestore and came back as a 400 with
// its resource path, invalid UTF-8 as a 503, and "a/b/c" read specs/a/b/c.
func TestMalformedIDsEveryRoute(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("i1", db.ID, small)
	wantEmptyObject(t, e.do(http.MethodPut, bindingURL("i1", "b1"), bindBody(db.ID, small, "")), http.StatusCreated)
	before := e.dbState()
	type call struct{ method, path, body string }
	for _, bad := range badIDs {
		id := bad.escaped
		q := url.Values{}
		calls := []call{
			{http.MethodPut, "/v2/service_instances/" + id, provisionBody(db.ID, small)},
			{http.MethodGet, "/v2/service_instances/" + id, ""},
			{http.MethodPatch, "/v2/service_instances/" + id, patchBody(db.ID, "", "")},
			{http.MethodDelete, "/v2/service_instances/" + id + "?service_id=" + db.ID + "&plan_id=" + small, ""},
			{http.MethodGet, "/v2/service_instances/" + id + "/last_operation", ""},
			{http.MethodPut, bindingURL(id, "b2"), bindBody(db.ID, small, "")},
			{http.MethodPut, bindingURL("i1", id), bindBody(db.ID, small, "")},
			{http.MethodGet, bindingURL(id, "b1"), ""},
			{http.MethodGet, bindingURL("i1", id), ""},
			{http.MethodDelete, bindingURL("i1", id) + "?service_id=" + db.ID + "&plan_id=" + small, ""},
			{http.MethodGet, bindingURL("i1", id) + "/last_operation", ""},
			// Query ids.
			{http.MethodDelete, "/v2/service_instances/i1?service_id=" + id + "&plan_id=" + small, ""},
			{http.MethodDelete, "/v2/service_instances/i1?service_id=" + db.ID + "&plan_id=" + id, ""},
			{http.MethodDelete, bindingURL("i1", "b1") + "?service_id=" + id + "&plan_id=" + small, ""},
			{http.MethodGet, "/v2/service_instances/i1/last_operation?service_id=" + id, ""},
			{http.MethodGet, "/v2/service_instances/i1/last_operation?plan_id=" + id, ""},
		}
		if bad.json != "" {
			js := func(v string) string { b, _ := json.Marshal(v); return strings.Trim(string(b), `"`) }
			calls = append(calls,
				call{http.MethodPut, "/v2/service_instances/i2", provisionBody(js(bad.json), small)},
				call{http.MethodPut, "/v2/service_instances/i2", provisionBody(db.ID, js(bad.json))},
				call{http.MethodPatch, "/v2/service_instances/i1", patchBody(js(bad.json), "", "")},
				call{http.MethodPatch, "/v2/service_instances/i1", patchBody(db.ID, js(bad.json), "")},
				call{http.MethodPatch, "/v2/service_instances/i1", patchBody(db.ID, "", `"previous_values":{"plan_id":"`+js(bad.json)+`"}`)},
				call{http.MethodPut, bindingURL("i1", "b2"), bindBody(js(bad.json), small, "")},
				call{http.MethodPut, bindingURL("i1", "b2"), bindBody(db.ID, js(bad.json), "")},
			)
		}
		for _, c := range calls {
			r := e.do(c.method, c.path, c.body)
			what := fmt.Sprintf("%s: %s %s %s", bad.name, c.method, c.path, c.body)
			if r.status < 400 || r.status > 499 {
				t.Errorf("%s: %d %s, want a 4xx", what, r.status, r.body)
				continue
			}
			if r.status != http.StatusGone { // OSB's 410 {} of a delete
				wantOSBError(t, r, r.status, "")
			}
			wantNoStoreText(t, what, r.body)
		}
		// The admin endpoints' ids and names.
		q.Set("service_id", "x")
		for _, path := range []string{"/admin/instances?service_id=" + id, "/admin/specs?registry=" + id, "/admin/instances?registry=" + id} {
			req := e.request(http.MethodGet, path, "")
			req.Header.Set("Authorization", "Bearer "+adminToken)
			r := e.send(req)
			if r.status != http.StatusBadRequest {
				t.Errorf("%s: GET %s: %d %s, want 400", bad.name, path, r.status, r.body)
			}
			wantNoStoreText(t, bad.name+": GET "+path, r.body)
		}
	}
	if after := e.dbState(); len(after) != len(before) {
		t.Errorf("malformed ids changed the store: %d documents before, %d after", len(before), len(after))
	}
	for path, at := range before {
		if e.dbState()[path] != at {
			t.Errorf("malformed ids rewrote %s", path)
		}
	}
}

// OSB lets a context be any JSON object; Firestore's maps do not hold
// every one (an array in an array, a key "" or "__name__", 21 levels or
// more). Each is recorded, answered, compared (200 the same again, 409
// another) and shown as sent; past the documented depth it is a 400
// naming the limit, never Firestore's text or a 503.
func TestAnyContextOSBAllows(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	nest := func(n int) string { return strings.Repeat(`{"a":`, n-1) + `1` + strings.Repeat(`}`, n-1) }
	for i, ctx := range []string{
		`{"x":[[1]]}`, `{"":1}`, `{"__name__":1}`, `{"a.b":{"c/d":"e"},"` + "`" + `x` + "`" + `":null}`, nest(osb.MaxObjectDepth),
		`{"big":12345678901234567890123,"f":1.50}`, `{"x":[[[]],[{"":[[]]}]]}`,
	} {
		id := fmt.Sprintf("ctx-%d", i)
		body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,`+guids+`,"context":%s}`, db.ID, small, ctx)
		r := e.do(http.MethodPut, "/v2/service_instances/"+id, body)
		if r.status != http.StatusCreated {
			t.Errorf("context %s: %d %s", ctx, r.status, r.body)
			continue
		}
		wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/"+id, body), http.StatusOK)
		got, _ := json.Marshal(e.instanceDocs()[id].Context)
		if !jsonEqual(t, string(got), ctx) {
			t.Errorf("context %s recorded as %s", ctx, got)
		}
		other := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,`+guids+`,"context":{"other":true}}`, db.ID, small)
		wantOSBError(t, e.do(http.MethodPut, "/v2/service_instances/"+id, other), http.StatusConflict, "")
		// The same contexts on a binding and in a PATCH.
		wantEmptyObject(t, e.do(http.MethodPut, bindingURL(id, "b"), bindBody(db.ID, small, `"context":`+ctx)), http.StatusCreated)
		wantEmptyObject(t, e.do(http.MethodPut, bindingURL(id, "b"), bindBody(db.ID, small, `"context":`+ctx)), http.StatusOK)
		wantEmptyObject(t, e.patch(id, patchBody(db.ID, "", `"context":`+ctx)), http.StatusOK)
	}
	// The admin listing shows a context as it was sent.
	req := e.request(http.MethodGet, "/admin/instances?service_id="+db.ID, "")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if r := e.send(req); r.status != http.StatusOK || !strings.Contains(string(r.body), `"context":{"x":[[1]]}`) {
		t.Errorf("admin instances: %d %s", r.status, r.body)
	}
	for _, c := range []struct{ name, body string }{
		{"too deep", nest(osb.MaxObjectDepth + 1)},
		{"far too deep", nest(400)},
		{"deep array", strings.Repeat("[", 40) + strings.Repeat("]", 40)},
	} {
		for _, path := range []string{"/v2/service_instances/deep", bindingURL("ctx-0", "deep")} {
			for _, field := range []string{"context", "parameters"} {
				body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,`+guids+`,%q:{"x":%s}}`, db.ID, small, field, c.body)
				r := e.do(http.MethodPut, path, body)
				eb := wantOSBError(t, r, http.StatusBadRequest, "BadRequest")
				if !strings.Contains(eb.Description, field) || !strings.Contains(eb.Description, fmt.Sprint(osb.MaxObjectDepth)) {
					t.Errorf("%s %s in %s: %q does not name the field and the limit", c.name, field, path, eb.Description)
				}
				wantNoStoreText(t, c.name, r.body)
			}
		}
		eb := wantOSBError(t, e.patch("ctx-0", patchBody(db.ID, "", `"context":{"x":`+c.body+`}`)), http.StatusBadRequest, "")
		if !strings.Contains(eb.Description, "context") {
			t.Errorf("PATCH %s: %q", c.name, eb.Description)
		}
	}
	// The size limit of a stored context, on a broker whose body limit
	// lets one through.
	big := osb.NewBroker(e.st, osb.Config{Username: brokerUser, Password: brokerPass, MaxBodyBytes: 1 << 20})
	body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,`+guids+`,"context":{"x":%q}}`, db.ID, small, strings.Repeat("y", osb.MaxContextBytes))
	req = e.request(http.MethodPut, "/v2/service_instances/huge", body)
	w := serve(big, req)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), fmt.Sprint(osb.MaxContextBytes)) {
		t.Errorf("a context over %d bytes: %d %s", osb.MaxContextBytes, w.Code, w.Body.String())
	}
}

// Records written before contexts were kept as text hold a Firestore map
// under "context": they are read (the admin listing, a provision again
// compares them), and the next update that writes one moves it to text.
func TestLegacyContextRecords(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("old", db.ID, small)
	ref := e.client.Collection(store.InstancesCollection).Doc("old")
	// What such a record holds: the context as a map, no text.
	if _, err := ref.Update(e.ctx, []firestoreUpdate{{Path: "context", Value: map[string]any{"platform": "kubernetes", "namespace": "apps"}}, {Path: "context_json", Value: deleteField}}); err != nil {
		t.Fatal(err)
	}
	if got := e.instanceDocs()["old"]; got.ContextJSON != "" || got.Context["namespace"] != "apps" {
		t.Fatalf("the old record reads as %+v", got)
	}
	// The same provision again: the same context, 200.
	wantEmptyObject(t, e.do(http.MethodPut, "/v2/service_instances/old", provisionBody(db.ID, small)), http.StatusOK)
	req := e.request(http.MethodGet, "/admin/instances?service_id="+db.ID, "")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if r := e.send(req); !strings.Contains(string(r.body), `"namespace":"apps"`) {
		t.Errorf("admin listing of an old record: %s", r.body)
	}
	wantEmptyObject(t, e.patch("old", patchBody(db.ID, "", `"context":{"platform":"kubernetes","namespace":"moved"}`)), http.StatusOK)
	snap, err := ref.Get(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snap.DataAt("context"); err == nil {
		t.Errorf("the updated record still holds the old map: %v", snap.Data())
	}
	if got := e.instanceDocs()["old"]; got.ContextJSON != `{"namespace":"moved","platform":"kubernetes"}` {
		t.Errorf("the updated record's text: %q", got.ContextJSON)
	}
}

// A query parameter given twice is a 400 on every route (before, since
// and limit took the first, dry_run the last), and so is a query string
// that does not parse.
func TestRepeatedQueryParameters(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("i1", db.ID, small)
	for _, path := range []string{
		"/v2/catalog/changes?since=0&since=5",
		"/v2/catalog/changes?since=0&limit=1&limit=oops",
		"/v2/catalog/changes?since=0&wait=1s&wait=2s",
		"/v2/service_instances/i1/last_operation?plan_id=" + small + "&plan_id=x",
		"/v2/catalog?x=1&x=2",
		"/v2/catalog/changes?since=0&%zz",
		"/v2/catalog/changes?since=0;limit=1",
	} {
		eb := wantOSBError(t, e.do(http.MethodGet, path, ""), http.StatusBadRequest, "BadRequest")
		if !strings.Contains(eb.Description, "query") {
			t.Errorf("GET %s: %q does not say what is wrong", path, eb.Description)
		}
	}
	r := e.do(http.MethodDelete, "/v2/service_instances/i1?service_id="+db.ID+"&plan_id="+small+"&plan_id="+small, "")
	wantOSBError(t, r, http.StatusBadRequest, "")
	if _, ok := e.instanceDocs()["i1"]; !ok {
		t.Error("a deprovision with a repeated parameter deleted the instance")
	}
	req := e.request(http.MethodGet, "/admin/operations?limit=1&limit=2", "")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	wantOSBError(t, e.send(req), http.StatusBadRequest, "")
}

// A body the client stops sending is a 408, never a body taken for what
// arrived: the server's read deadline cuts it, and DecodeBody says so.
func TestStalledBodyIs408(t *testing.T) {
	e, db := newDBEnv(t)
	srv := stallingServer(t, e.broker.Handler(), 300*time.Millisecond)
	head := fmt.Sprintf("PUT /v2/service_instances/stalled HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\nX-Broker-API-Version: 2.17\r\nTransfer-Encoding: chunked\r\n\r\n", basicAuth(brokerUser, brokerPass))
	status, body := stall(t, srv, head+fmt.Sprintf("100\r\n{\"service_id\":\"%s", db.ID[:4]))
	if status != http.StatusRequestTimeout {
		t.Fatalf("a stalled body: %d %s, want 408", status, body)
	}
	if _, ok := e.instanceDocs()["stalled"]; ok {
		t.Error("a stalled provision was recorded")
	}
}

type firestoreUpdate = firestore.Update

var deleteField = firestore.Delete

// jsonEqual compares two JSON texts as values.
func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// serve runs one request through a broker's handler.
func serve(b *osb.Broker, req *http.Request) *httptest.ResponseRecorder {
	req.RequestURI = ""
	w := httptest.NewRecorder()
	b.Handler().ServeHTTP(w, req)
	return w
}

func basicAuth(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// stallingServer serves h with a read deadline of read, as the local
// stack's server and Google's front end have one.
func stallingServer(t *testing.T, h http.Handler, read time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadTimeout = read
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// stall sends raw (a request whose body never ends) and reads the answer.
func stall(t *testing.T, srv *httptest.Server, raw string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled request: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
