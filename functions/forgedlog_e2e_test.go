package functions_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// forged is a body that, printed raw, would put lines of its own into the
// log: one Cloud Logging reads as an EMERGENCY with a message of the
// sender's choosing.
const forged = "x\n{\"severity\":\"EMERGENCY\",\"message\":\"forged-by-test\"}\n{\"severity\":\"EMERGENCY\",\"message\":\"forged-by-test\"}\r\nplain text\n"

// No forged log line, anywhere: a newline-laden body (and the same text
// in ids, queries, a context, an identity, a Pub/Sub message) sent to
// every endpoint of the local stack, the push endpoint included, leaves a
// log of which every line is one JSON object, none with the sender's
// severity or message. Before, the push endpoint was served on the
// broker's port to anyone, and the functions framework printed a body it
// could not parse raw.
func TestE2ENoForgedLogLine(t *testing.T) {
	t.Parallel()
	s := startStack(t, `registries:
  - name: images
    type: http
    http: {url: "http://127.0.0.1:9/index.yaml"}
    hook: {type: bearer, secret_env: E2E_FORGED_HOOK}
`, "E2E_FORGED_HOOK=forged-log-hook-secret-0123456789", "LOG_LEVEL=debug")
	body := func() *strings.Reader { return strings.NewReader(forged) }
	esc := url.PathEscape(forged)
	qesc := url.QueryEscape(forged)
	identity := "kubernetes " + base64.StdEncoding.EncodeToString([]byte(`{"username":`+jsonString(forged)+`}`))

	// The broker's port: every route, every method it takes.
	for _, c := range []struct{ method, path, auth string }{
		{"POST", "/bootstrap", "admin"}, {"POST", "/bootstrap?dry_run=" + qesc, "admin"}, {"POST", "/bootstrap", ""},
		{"GET", "/bootstrap/last_operation?operation=" + qesc, "admin"},
		{"POST", "/hooks/images", ""}, {"POST", "/hooks/" + esc, ""},
		{"GET", "/v2/catalog", "broker"}, {"GET", "/v2/catalog/changes?since=" + qesc, "broker"},
		{"PUT", "/v2/service_instances/i1", "broker"}, {"PUT", "/v2/service_instances/" + esc, "broker"},
		{"PATCH", "/v2/service_instances/i1", "broker"}, {"DELETE", "/v2/service_instances/i1?service_id=" + qesc + "&plan_id=p", "broker"},
		{"GET", "/v2/service_instances/i1/last_operation?operation=" + qesc, "broker"},
		{"PUT", "/v2/service_instances/i1/service_bindings/" + esc, "broker"}, {"PUT", "/v2/service_instances/i1/service_bindings/b1", "broker"},
		{"GET", "/registries", "admin"}, {"GET", "/admin/specs?registry=" + qesc, "admin"}, {"GET", "/admin/instances?" + qesc + "=1", "admin"},
		{"GET", "/admin/operations?limit=" + qesc, "admin"}, {"GET", "/status", "admin"}, {"GET", "/" + esc, ""},
		{"POST", "/projects/" + s.project + "/topics/specsync-reconcile", ""}, {"POST", "/projects/x/topics/" + esc, ""},
	} {
		r := s.do(c.method, c.path, c.auth, body(), "X-Broker-API-Originating-Identity", identity, "X-Broker-API-Request-Identity", "req-forged")
		if r.status >= 500 {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
		if strings.HasPrefix(c.path, "/projects/") && r.status != http.StatusNotFound {
			t.Errorf("the push path on the broker's port: %s %d, want 404", c.path, r.status)
		}
	}
	// A provision that is recorded, with the text in its context and
	// identity: the write's log line carries both as JSON.
	r := s.do("PUT", "/v2/service_instances/i2", "broker", strings.NewReader(`{"service_id":"nope","plan_id":"p","context":{"x":`+jsonString(forged)+`}}`),
		"X-Broker-API-Originating-Identity", identity)
	if r.status != http.StatusBadRequest {
		t.Errorf("a provision of no service: %d %s", r.status, r.body)
	}

	// The push endpoint: without its token, with a wrong one, with it
	// and a body that is not a push, a CloudEvent, and pushes whose
	// message is garbage (that reaches the reconcile function).
	push := func(base, path, ct, payload string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(payload))
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
			req.Header.Set("Ce-Id", "forged")
		}
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	topic := "/projects/" + s.project + "/topics/specsync-reconcile"
	hostOnly := s.pushURL[:strings.LastIndex(s.pushURL, "/")]
	for name, c := range map[string]struct {
		base, path, ct, body string
		want                 int
	}{
		"no token":        {hostOnly, topic, "", forged, http.StatusNotFound},
		"wrong token":     {hostOnly + "/not-the-token-0123456789", topic, "", forged, http.StatusNotFound},
		"not a push":      {s.pushURL, topic, "", forged, http.StatusBadRequest},
		"not a topic":     {s.pushURL, "/" + esc, "", `{"message":{}}`, http.StatusNotFound},
		"a CloudEvent":    {s.pushURL, topic, "application/cloudevents+json", forged, http.StatusBadRequest},
		"garbage message": {s.pushURL, topic, "", pushBody(forged, forged), http.StatusOK},
		"garbage JSON":    {s.pushURL, topic, "", pushBody(`{"registry":`+jsonString(forged)+`}`, "m2"), http.StatusOK},
	} {
		if got := push(c.base, c.path, c.ct, c.body); got != c.want {
			t.Errorf("push, %s: %d, want %d", name, got, c.want)
		}
	}

	time.Sleep(500 * time.Millisecond) // the last lines of the answers' handlers
	s.logsMu.Lock()
	logs := s.stderr.String()
	s.logsMu.Unlock()
	messages := map[string]int{}
	for i, line := range strings.Split(strings.TrimRight(logs, "\n"), "\n") {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(line))
		if err := dec.Decode(&m); err != nil || dec.More() {
			t.Errorf("log line %d is not one JSON object: %q", i+1, line)
			continue
		}
		if m["severity"] == "EMERGENCY" || m["message"] == "forged-by-test" || m["message"] == "plain text" {
			t.Errorf("log line %d is the sender's: %s", i+1, line)
		}
		msg, _ := m["message"].(string)
		messages[msg]++
	}
	for _, want := range []string{"the push endpoint refused a request", "dropping an undecodable event", "osb write"} {
		if messages[want] == 0 {
			t.Errorf("no %q line: the requests did not reach what they were sent to (messages: %v)", want, messages)
		}
	}
	if bytes.Contains([]byte(logs), []byte(`"message":"forged-by-test"`)) {
		t.Error("the forged line is in the log as it was sent")
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pushBody is a Pub/Sub push request carrying data, as the emulator sends
// one.
func pushBody(data, messageID string) string {
	return fmt.Sprintf(`{"message":{"data":%q,"messageId":%s,"attributes":{"k":%s},"publishTime":"2026-01-02T03:04:05Z"},"subscription":"projects/p/subscriptions/s"}`,
		base64.StdEncoding.EncodeToString([]byte(data)), jsonString(messageID), jsonString(data))
}
