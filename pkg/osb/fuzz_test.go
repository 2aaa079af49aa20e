package osb_test

// Fuzz targets for the broker's input parsing (docs/RELIABILITY.md). The
// seed corpus runs in every `go test`; `make fuzz-http` fuzzes for real.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/web"
)

// DecodeBody: a body it accepts is one JSON value within the limit; one
// it refuses gets an OSB error (413 beyond the limit, 400 otherwise) and
// the handler stops.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"service_id":"a","plan_id":"b"}`, `{"a":1} {"b":2}`, `{"a":`, `[]`, `null`, `"x"`, ``, ` `,
		`{"context":{"platform":"kubernetes","namespace":"ns"},"parameters":{"size_gb":3}}`,
		strings.Repeat(`{"a":`, 200), `{"a":"` + strings.Repeat("x", 300) + `"}`, "\xff\xfe{}", `{"a":1}garbage`,
	} {
		f.Add([]byte(s), uint16(256))
	}
	f.Fuzz(func(t *testing.T, body []byte, limit uint16) {
		lim := int64(limit%1024) + 1
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPut, "/v2/service_instances/x", bytes.NewReader(body))
		var v map[string]any
		ok := web.DecodeBody(w, r, lim, &v)
		if ok {
			if w.Code != http.StatusOK || w.Body.Len() != 0 {
				t.Fatalf("accepted, yet wrote %d %q", w.Code, w.Body.String())
			}
			trimmed := bytes.TrimSpace(body)
			if int64(len(trimmed)) > lim {
				// The value itself must fit; only trailing space may lie beyond.
				if i := bytes.Index(body, trimmed); int64(i+len(trimmed)) > lim {
					t.Fatalf("accepted %d bytes of JSON with a limit of %d", len(trimmed), lim)
				}
			}
			if !json.Valid(trimmed) {
				t.Fatalf("accepted invalid JSON %q", body)
			}
			return
		}
		if w.Code != http.StatusBadRequest && w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("refused with %d", w.Code)
		}
		if w.Code == http.StatusRequestEntityTooLarge && int64(len(body)) <= lim {
			t.Fatalf("413 for %d bytes with a limit of %d", len(body), lim)
		}
		var eb api.ErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Description == "" {
			t.Fatalf("refusal is not an OSB error body: %q", w.Body.String())
		}
	})
}

// FuzzBrokerRequest sends arbitrary method, path, query, headers and body
// to the whole broker handler (auth, version check, routing, parsing,
// store: catalog, instances with their updates and last_operation,
// bindings) over one emulator project: it never answers 5xx, every error is
// an OSB error body, no answer repeats the broker password, and the data
// stays consistent (the invariant checker).
func FuzzBrokerRequest(f *testing.F) {
	seeds := []struct {
		method, path, query, version, body string
		auth                               bool
	}{
		{"GET", "/v2/catalog", "", "2.17", "", true},
		{"GET", "/v2/catalog", "", "1.0", "", true},
		{"GET", "/v2/catalog", "", "2.17", "", false},
		{"PUT", "/v2/service_instances/i-1", "", "2.17", `{"service_id":"SVC","plan_id":"PLAN","organization_guid":"o","space_guid":"s"}`, true},
		{"PUT", "/v2/service_instances/i-1", "accepts_incomplete=true", "2.17", `{"service_id":"SVC","plan_id":"PLAN","organization_guid":"o","space_guid":"s","context":{"platform":"cf"}}`, true},
		{"PUT", "/v2/service_instances/i-2", "", "2.17", `{"service_id":"SVC","plan_id":"nope"}`, true},
		{"PUT", "/v2/service_instances/i-3", "", "2.17", `{"service_id":"SVC"`, true},
		{"PUT", "/v2/service_instances/%00", "", "2.17", `{}`, true},
		{"PUT", "/v2/service_instances/" + strings.Repeat("a", 300), "", "2.17", `{}`, true},
		{"GET", "/v2/service_instances/i-1", "", "2.17", "", true},
		{"DELETE", "/v2/service_instances/i-1", "service_id=SVC&plan_id=PLAN", "2.17", "", true},
		{"DELETE", "/v2/service_instances/i-1", "service_id=SVC", "2.17", "", true},
		{"DELETE", "/v2/service_instances/i-9", "service_id=%zz&plan_id=;;", "2.17", "", true},
		{"PATCH", "/v2/service_instances/i-1", "", "2.17", `{}`, true},
		{"PATCH", "/v2/service_instances/i-1", "accepts_incomplete=true", "2.17", `{"service_id":"SVC","plan_id":"PLAN","previous_values":{"plan_id":"PLAN"}}`, true},
		{"PATCH", "/v2/service_instances/i-1", "", "2.17", `{"service_id":"SVC","maintenance_info":{"version":"1.0.0"},"context":{"oci_platform":"linux/amd64"}}`, true},
		{"PATCH", "/v2/service_instances/i-1", "", "2.17", `{"service_id":"SVC","plan_id":"nope","parameters":[]}`, true},
		{"GET", "/v2/service_instances/i-1/last_operation", "service_id=SVC&plan_id=PLAN", "2.17", "", true},
		{"GET", "/v2/service_instances/i-1/last_operation", "operation=x", "2.17", "", true},
		{"PUT", "/v2/service_instances/i-1/service_bindings/b-1", "accepts_incomplete=true", "2.17", `{"service_id":"SVC","plan_id":"PLAN","bind_resource":{"app_guid":"a"}}`, true},
		{"PUT", "/v2/service_instances/i-1/service_bindings/b-1", "", "2.17", `{"predecessor_binding_id":"b-0"}`, true},
		{"PUT", "/v2/service_instances/i-9/service_bindings/b-1", "", "2.17", `{"service_id":"SVC","plan_id":"PLAN"}`, true},
		{"GET", "/v2/service_instances/i-1/service_bindings/b-1", "", "2.17", "", true},
		{"GET", "/v2/service_instances/i-1/service_bindings/b-1/last_operation", "", "2.17", "", true},
		{"DELETE", "/v2/service_instances/i-1/service_bindings/b-1", "service_id=SVC&plan_id=PLAN", "2.17", "", true},
		{"DELETE", "/v2/service_instances/i-1/service_bindings/%2e%2e", "service_id=SVC&plan_id=PLAN", "2.17", "", true},
		{"GET", "/registries", "", "", "", false},
		{"GET", "/v2/../registries", "", "2.17", "", true},
		{"POST", "/v2/catalog", "x=1&x=2", "2.x", `[]`, true},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, s.version, s.body, s.auth)
	}
	// One project for the whole run: the target runs many times.
	e := newEnv(f, 0)
	sp := parseSpec(f, specYAML("fuzzed"))
	e.seed(sp)
	svc, plan := sp.ID, sp.Plans[0].ID
	f.Fuzz(func(t *testing.T, method, path, query, version, body string, auth bool) {
		if method == "" || strings.ContainsAny(method, " \t\r\n()<>@,;:\\\"/[]?={}") || len(method) > 16 {
			method = http.MethodGet
		}
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		body = strings.NewReplacer("SVC", svc, "PLAN", plan).Replace(body)
		query = strings.NewReplacer("SVC", svc, "PLAN", plan).Replace(query)
		req := httptest.NewRequest(http.MethodGet, "/", strings.NewReader(body))
		req.Method = method
		req.URL.Path = path
		req.URL.RawQuery = query
		req.RequestURI = ""
		if auth {
			req.SetBasicAuth(brokerUser, brokerPass)
		}
		if version != "" {
			req.Header.Set("X-Broker-API-Version", version)
		}
		w := httptest.NewRecorder()
		e.broker.Handler().ServeHTTP(w, req)
		resp := w.Result()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s?%s: %d %s", method, path, query, resp.StatusCode, w.Body.String())
		}
		if strings.Contains(w.Body.String(), brokerPass) || strings.Contains(strings.Join(headerValues(resp.Header), " "), brokerPass) {
			t.Fatalf("the answer repeats the broker password")
		}
		if resp.StatusCode >= 400 && method != http.MethodHead {
			var eb api.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Description == "" {
				// DELETE of an unknown instance or binding is 410 with {} per OSB.
				if !(resp.StatusCode == http.StatusGone && strings.TrimSpace(w.Body.String()) == "{}") {
					t.Fatalf("%s %s: %d with a body that is not an OSB error: %q", method, path, resp.StatusCode, w.Body.String())
				}
			}
		}
		invariant.Require(t, e.client, invariant.Options{Canaries: []string{brokerPass, adminToken}})
	})
}

func headerValues(h http.Header) []string {
	var out []string
	for _, vs := range h {
		out = append(out, vs...)
	}
	return out
}
