package osb_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// The OSB OpenAPI file's paths, as wantOSBResponse looks them up.
const (
	instancePath      = "/v2/service_instances/{instance_id}"
	instanceLastOp    = "/v2/service_instances/{instance_id}/last_operation"
	bindingPath       = "/v2/service_instances/{instance_id}/service_bindings/{binding_id}"
	bindingLastOpPath = "/v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation"
)

var (
	osbDocOnce sync.Once
	osbDoc     *openapi3.T
	osbDocErr  error
)

func osbOpenAPI(t testing.TB) *openapi3.T {
	t.Helper()
	osbDocOnce.Do(func() {
		osbDoc, osbDocErr = openapi3.NewLoader().LoadFromFile("../catalog/testdata/osb-openapi.yaml")
		if osbDocErr == nil {
			osbDocErr = osbDoc.Validate(context.Background())
		}
	})
	if osbDocErr != nil {
		t.Fatalf("OSB OpenAPI: %v", osbDocErr)
	}
	return osbDoc
}

// osbResponseError checks a response against what the OSB OpenAPI file
// declares for method and path: the status must be one the operation
// declares, and the body must match its application/json schema.
func osbResponseError(t testing.TB, method, path string, status int, body []byte) error {
	t.Helper()
	item := osbOpenAPI(t).Paths.Value(path)
	if item == nil {
		t.Fatalf("the OSB OpenAPI file has no path %s", path)
	}
	op := item.GetOperation(method)
	if op == nil {
		t.Fatalf("the OSB OpenAPI file has no %s %s", method, path)
	}
	resp := op.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return &osbMismatch{what: "status " + http.StatusText(status) + " is not declared for " + method + " " + path}
	}
	media := resp.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil {
		return nil
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return &osbMismatch{what: "body is not JSON: " + err.Error()}
	}
	return media.Schema.Value.VisitJSON(doc, openapi3.MultiErrors())
}

type osbMismatch struct{ what string }

func (m *osbMismatch) Error() string { return m.what }

// wantOSBResponse fails the test unless r is what OSB declares.
func wantOSBResponse(t testing.TB, method, path string, r response) {
	t.Helper()
	if err := osbResponseError(t, method, path, r.status, r.body); err != nil {
		t.Fatalf("%s %s answered %d %s, which the OSB OpenAPI does not allow: %v", method, path, r.status, r.body, err)
	}
}

// The check can fail: a status the operation does not declare, and a body
// that breaks the declared schema, are both caught.
func TestOSBResponseCheckCanFail(t *testing.T) {
	cases := []struct {
		method, path string
		status       int
		body         string
	}{
		{http.MethodPatch, instancePath, http.StatusNotFound, `{"description":"x"}`},                   // PATCH declares no 404
		{http.MethodPut, bindingPath, http.StatusCreated, `{"credentials":"not an object"}`},           // credentials is an object
		{http.MethodGet, instanceLastOp, http.StatusOK, `{"state":"done"}`},                            // not an OSB state
		{http.MethodGet, instanceLastOp, http.StatusOK, `{"description":"no state"}`},                  // state is required
		{http.MethodGet, instancePath, http.StatusOK, `{"service_id":"s","maintenance_info":{}}`},      // version is required
		{http.MethodGet, bindingLastOpPath, http.StatusOK, `{"state":"succeeded","description":7}`},    // description is a string
		{http.MethodDelete, bindingPath, http.StatusOK, `[]`},                                          // {} is an object
		{http.MethodPatch, instancePath, http.StatusBadRequest, `{"error":"X","instance_usable":"y"}`}, // a boolean
	}
	for _, c := range cases {
		if err := osbResponseError(t, c.method, c.path, c.status, []byte(c.body)); err == nil {
			t.Errorf("%s %s %d %s passed the OSB check", c.method, c.path, c.status, c.body)
		}
	}
	if err := osbResponseError(t, http.MethodGet, instanceLastOp, http.StatusOK, []byte(`{"state":"succeeded"}`)); err != nil {
		t.Errorf("a valid last_operation failed the check: %v", err)
	}
}
