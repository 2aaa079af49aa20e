package osb_test

// Fuzz targets per route family, each driving the real broker handler on
// its own emulator project: OSB instances, bindings, the change feed, the
// admin endpoints (FuzzBrokerRequest fuzzes the whole surface at once;
// these reach deeper into each family's inputs). Their seed corpora are
// in testdata/fuzz, so `go test` runs them; `make fuzz-http` fuzzes for
// real. Every input must leave: no 5xx, every refusal an OSB error body,
// no secret (the broker password, the admin token, a parameters canary)
// in an answer, a header or the log, every log line one JSON object, and
// a store the invariant checker passes.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// paramsCanary stands for a secret a platform sends in parameters: never
// stored, logged or answered.
const paramsCanary = "fuzz-params-canary-5e2d"

var fuzzSecrets = []string{brokerPass, adminToken, paramsCanary}

// fuzzBroker is a broker whose log the target reads, over one project
// with one spec (SVC, its first plan PLAN), an instance i-1 and its
// binding b-1.
type fuzzBroker struct {
	e         *env
	logs      *syncBuffer
	h         http.Handler
	svc, plan string
}

func newFuzzBroker(f *testing.F, maxWait time.Duration) *fuzzBroker {
	e := newEnv(f, 0)
	logs := &syncBuffer{}
	b := osb.NewBroker(e.st, osb.Config{Username: brokerUser, Password: brokerPass, VerifyAdmin: web.StaticToken(adminToken),
		MaxBodyBytes: testMaxBody, MaxWait: maxWait, Logger: logging.New(logs, "debug")})
	b.Cache.Now = e.clock.Now
	sp := parseSpec(f, specYAML("fuzzed"))
	e.seed(sp)
	fb := &fuzzBroker{e: e, logs: logs, h: b.Handler(), svc: sp.ID, plan: sp.Plans[0].ID}
	if w := fb.send(http.MethodPut, "/v2/service_instances/i-1", "", provisionBody(fb.svc, fb.plan), "broker"); w.Code != http.StatusCreated {
		f.Fatalf("provision i-1: %d %s", w.Code, w.Body.String())
	}
	if w := fb.send(http.MethodPut, bindingURL("i-1", "b-1"), "", bindBody(fb.svc, fb.plan, ""), "broker"); w.Code != http.StatusCreated {
		f.Fatalf("bind b-1: %d %s", w.Code, w.Body.String())
	}
	return fb
}

// fill puts the seeded ids in for their placeholders, and takes any
// secret out: a secret an input puts where it may be recorded or quoted
// (an id, a context) would be its own text there, not a leak, and would
// stay in the project for the inputs after it.
func (fb *fuzzBroker) fill(s string) string {
	for _, secret := range fuzzSecrets {
		s = strings.ReplaceAll(s, secret, "scrubbed")
	}
	return strings.NewReplacer("SVC", fb.svc, "PLAN", fb.plan).Replace(s)
}

// credential is an Authorization value with ADMINTOKEN for the admin token.
func credential(s string) string { return strings.ReplaceAll(s, "ADMINTOKEN", adminToken) }

// params is a parameters value: the seeded ids filled in, the canary
// left where the input put it.
func (fb *fuzzBroker) params(s string) string {
	return strings.NewReplacer("SVC", fb.svc, "PLAN", fb.plan).Replace(s)
}

// send runs one request through the handler; auth is "broker", "admin",
// "" or a raw Authorization value.
func (fb *fuzzBroker) send(method, path, query, body, auth string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/", strings.NewReader(body))
	req.Method, req.URL.Path, req.URL.RawQuery, req.RequestURI = method, path, query, ""
	req.Header.Set("X-Broker-API-Version", apiVersion)
	switch auth {
	case "broker":
		req.SetBasicAuth(brokerUser, brokerPass)
	case "admin":
		req.Header.Set("Authorization", "Bearer "+adminToken)
	case "":
	default:
		req.Header["Authorization"] = []string{auth}
	}
	w := httptest.NewRecorder()
	fb.h.ServeHTTP(w, req)
	return w
}

// check is what every answer of every target must hold; sent is all the
// request said (store text it quotes back is the sender's, not the
// store's).
func (fb *fuzzBroker) check(t *testing.T, what, sent string, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code >= 500 {
		t.Fatalf("%s: %d %s", what, w.Code, w.Body.String())
	}
	answer := w.Body.String() + " " + strings.Join(headerValues(w.Result().Header), " ")
	fb.logs.mu.Lock()
	logs := fb.logs.buf.String()
	fb.logs.mu.Unlock()
	secrets := fuzzSecrets
	for _, s := range secrets {
		if strings.Contains(answer, s) {
			t.Fatalf("%s: the answer holds a secret: %d %s", what, w.Code, w.Body.String())
		}
		if strings.Contains(logs, s) {
			t.Fatalf("%s: the log holds a secret", what)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if line != "" && !json.Valid([]byte(line)) {
			t.Fatalf("%s: a log line is not JSON: %q", what, line)
		}
	}
	if w.Code >= 400 && w.Code != http.StatusGone && w.Code != http.StatusNotModified {
		var eb api.ErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Description == "" {
			t.Fatalf("%s: %d with a body that is not an OSB error: %q", what, w.Code, w.Body.String())
		}
		for _, st := range storeText {
			st = strings.ToLower(st)
			if strings.Contains(strings.ToLower(w.Body.String()), st) && !strings.Contains(strings.ToLower(sent), st) {
				t.Fatalf("%s: the answer holds store text %q: %s", what, st, w.Body.String())
			}
		}
	}
	invariant.Require(t, fb.e.client, invariant.Options{Canaries: secrets})
}

// FuzzInstances: provision, update, deprovision, fetch and last_operation
// with any id, service and plan ids, context, parameters and query.
func FuzzInstances(f *testing.F) {
	fb := newFuzzBroker(f, time.Millisecond)
	f.Fuzz(func(t *testing.T, op uint8, id, serviceID, planID, context, parameters, query string) {
		methods := []string{http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet, http.MethodGet}
		method := methods[int(op)%len(methods)]
		path := "/v2/service_instances/" + url.PathEscape(fb.fill(id))
		if int(op)%len(methods) == 4 {
			path += "/last_operation"
		}
		body := ""
		if method == http.MethodPut || method == http.MethodPatch {
			body = fmt.Sprintf(`{"service_id":%s,"plan_id":%s`, jsonString(fb.fill(serviceID)), jsonString(fb.fill(planID)))
			if context != "" {
				body += `,"context":` + fb.fill(context)
			}
			if parameters != "" {
				body += `,"parameters":` + fb.params(parameters)
			}
			body += "}"
		}
		w := fb.send(method, path, fb.fill(query), body, "broker")
		fb.check(t, method+" "+path, path+query+id+serviceID+planID+context, w)
		if method == http.MethodPut && (w.Code == http.StatusCreated || w.Code == http.StatusOK) {
			// What was recorded reads back, its context as sent.
			inst, err := fb.e.st.GetInstance(fb.e.ctx, fb.fill(id))
			if err != nil {
				t.Fatalf("a recorded instance does not read back: %v", err)
			}
			if context != "" && context != "null" && w.Code == http.StatusCreated {
				got, _ := json.Marshal(inst.Context)
				if !jsonEqualT(fb.fill(context), string(got)) {
					t.Fatalf("context %s recorded as %s", context, got)
				}
			}
		}
	})
}

// FuzzBindings: bind, fetch, unbind and last_operation with any instance
// and binding id, service and plan ids, context, parameters, bind_resource
// and query.
func FuzzBindings(f *testing.F) {
	fb := newFuzzBroker(f, time.Millisecond)
	f.Fuzz(func(t *testing.T, op uint8, instanceID, bindingID, serviceID, planID, context, parameters, extra, query string) {
		methods := []string{http.MethodPut, http.MethodGet, http.MethodDelete, http.MethodGet}
		method := methods[int(op)%len(methods)]
		path := bindingURL(url.PathEscape(fb.fill(instanceID)), url.PathEscape(fb.fill(bindingID)))
		if int(op)%len(methods) == 3 {
			path += "/last_operation"
		}
		body := ""
		if method == http.MethodPut {
			body = fmt.Sprintf(`{"service_id":%s,"plan_id":%s`, jsonString(fb.fill(serviceID)), jsonString(fb.fill(planID)))
			for k, v := range map[string]string{"context": fb.fill(context), "parameters": fb.params(parameters)} {
				if v != "" {
					body += fmt.Sprintf(`,%q:%s`, k, v)
				}
			}
			if extra != "" {
				body += "," + fb.fill(extra)
			}
			body += "}"
		}
		w := fb.send(method, path, fb.fill(query), body, "broker")
		fb.check(t, method+" "+path, path+query+instanceID+bindingID+serviceID+planID+context+extra, w)
	})
}

// FuzzChangeFeed: any since, limit and wait over a feed whose history is
// pruned in part (revisions 1 and 2 gone, 3 to 5 kept): 200 with the
// changes from since+1 in order, 400 for a bad parameter, 410 for a
// since whose next change is gone or that is ahead of the catalog;
// nothing else.
func FuzzChangeFeed(f *testing.F) {
	fb := newFuzzBroker(f, 20*time.Millisecond) // revision 1: the seeded spec
	for _, n := range []string{"f2", "f3", "f4", "f5"} {
		fb.e.seed(parseSpec(f, specYAML(n)))
	}
	snaps, err := fb.e.client.Collection(store.ChangesCollection).Where("revision", "<=", 2).Documents(fb.e.ctx).GetAll()
	if err != nil || len(snaps) != 2 {
		f.Fatalf("changes 1 and 2: %d %v", len(snaps), err)
	}
	for _, s := range snaps {
		if _, err := s.Ref.Update(fb.e.ctx, []firestoreUpdate{{Path: "expires_at", Value: time.Now().Add(-time.Hour)}}); err != nil {
			f.Fatal(err)
		}
	}
	if n, err := fb.e.st.PruneChanges(fb.e.ctx, time.Now(), 10); err != nil || n != 2 {
		f.Fatalf("prune: %d %v", n, err)
	}
	f.Fuzz(func(t *testing.T, query string) {
		w := fb.send(http.MethodGet, "/v2/catalog/changes", query, "", "broker")
		fb.check(t, "GET changes?"+query, query, w)
		q, perr := url.ParseQuery(query)
		switch w.Code {
		case http.StatusOK:
			var page api.ChangePage
			if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || perr != nil {
				t.Fatalf("200 %s: %v", w.Body.String(), err)
			}
			var since int64
			fmt.Sscan(q.Get("since"), &since)
			for i, c := range page.Changes {
				if c.Revision != since+1+int64(i) {
					t.Fatalf("since=%d: change %d is revision %d: a revision skipped", since, i, c.Revision)
				}
			}
			if since < 2 && len(page.Changes) > 0 {
				t.Fatalf("since=%d answered changes although revision %d is pruned", since, since+1)
			}
		case http.StatusBadRequest:
			if !feedQueryRefused(query, 20*time.Millisecond) {
				t.Fatalf("GET changes?%s: 400 for a query the contract takes: %s", query, w.Body.String())
			}
			return
		case http.StatusGone:
			var gone api.Gone
			if err := json.Unmarshal(w.Body.Bytes(), &gone); err != nil || gone.Revision != 5 {
				t.Fatalf("410 %s", w.Body.String())
			}
		default:
			t.Fatalf("GET changes?%s: %d %s", query, w.Code, w.Body.String())
		}
		if feedQueryRefused(query, 20*time.Millisecond) {
			t.Fatalf("GET changes?%s: %d for a query the contract refuses: %s", query, w.Code, w.Body.String())
		}
	})
}

// feedQueryRefused is the change feed's query contract as docs/api.md
// states it, written out apart from the handler's parsing: a query that
// does not parse or repeats a parameter, a parameter other than since,
// epoch, wait and limit, a since that is not a decimal integer >= 0, a
// wait that is not a duration from 0 to the maximum (maxWait), a limit
// that is not an integer from 1 to 1,000, an epoch longer than 64 bytes.
func feedQueryRefused(query string, maxWait time.Duration) bool {
	q, err := url.ParseQuery(query)
	if err != nil {
		return true
	}
	for k, vs := range q {
		if len(vs) > 1 || (k != "since" && k != "epoch" && k != "wait" && k != "limit") {
			return true
		}
	}
	if since, err := strconv.ParseInt(q.Get("since"), 10, 64); err != nil || since < 0 {
		return true
	}
	if s := q.Get("wait"); s != "" {
		if d, err := time.ParseDuration(s); err != nil || d < 0 || d > maxWait {
			return true
		}
	}
	if s := q.Get("limit"); s != "" {
		if n, err := strconv.Atoi(s); err != nil || n < 1 || n > 1000 {
			return true
		}
	}
	return len(q.Get("epoch")) > 64
}

// FuzzAdmin: the admin endpoints with any path among them, query and
// Authorization value (ADMINTOKEN stands for the real token): read-only
// whatever is sent, never the token in an answer.
func FuzzAdmin(f *testing.F) {
	fb := newFuzzBroker(f, time.Millisecond)
	paths := []string{"/admin/specs", "/admin/instances", "/admin/operations", "/registries", "/status"}
	f.Fuzz(func(t *testing.T, which uint8, method, query, auth string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n()<>@,;:\\\"/[]?={}") || len(method) > 16 {
			method = http.MethodGet
		}
		e := *fb.e // the env's helpers, on this input's t
		e.t = t
		before := e.dbContent()
		path := paths[int(which)%len(paths)]
		w := fb.send(method, path, fb.fill(query), "", credential(auth))
		fb.check(t, method+" "+path+"?"+query, method+query, w)
		after := e.dbContent()
		for p, doc := range before {
			if after[p] != doc {
				t.Fatalf("%s %s?%s changed %s:\nbefore %s\nafter  %s", method, path, query, p, doc, after[p])
			}
		}
		if len(after) != len(before) {
			t.Fatalf("%s %s?%s created documents: %d before, %d after", method, path, query, len(before), len(after))
		}
	})
}

// dbContent is every document of the project (subcollections included,
// as dbState lists them) with its content and update time: equal maps
// mean nothing was created, deleted or rewritten, even with the same
// number of documents.
func (e *env) dbContent() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for p, updated := range e.dbState() {
		snap, err := e.client.Doc(strings.TrimPrefix(p, e.docsPrefix())).Get(e.ctx)
		if err != nil {
			e.t.Fatalf("read %s: %v", p, err)
		}
		data, err := json.Marshal(snap.Data())
		if err != nil {
			e.t.Fatalf("encode %s: %v", p, err)
		}
		out[p] = updated.UTC().Format(time.RFC3339Nano) + " " + string(data)
	}
	return out
}

// docsPrefix is what a document's full path has before its path in the
// database (projects/P/databases/D/documents/).
func (e *env) docsPrefix() string {
	ref := e.client.Collection("x").Doc("y")
	return strings.TrimSuffix(ref.Path, "x/y")
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// jsonEqualT compares two JSON texts as values (false if either is not
// JSON).
func jsonEqualT(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}
