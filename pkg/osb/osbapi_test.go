package osb_test

import (
	"net/http"
	"testing"

	"github.com/specsync/specsync/pkg/osb/osbtest"
)

// The OSB OpenAPI file's paths, as wantOSBResponse looks them up.
const (
	instancePath      = osbtest.InstancePath
	instanceLastOp    = osbtest.InstanceLastOp
	bindingPath       = osbtest.BindingPath
	bindingLastOpPath = osbtest.BindingLastOpPath
)

// wantOSBResponse fails the test unless r is what OSB declares.
func wantOSBResponse(t testing.TB, method, path string, r response) {
	t.Helper()
	if err := osbtest.Check(method, path, r.status, r.body); err != nil {
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
		if err := osbtest.Check(c.method, c.path, c.status, []byte(c.body)); err == nil {
			t.Errorf("%s %s %d %s passed the OSB check", c.method, c.path, c.status, c.body)
		}
	}
	if err := osbtest.Check(http.MethodGet, instanceLastOp, http.StatusOK, []byte(`{"state":"succeeded"}`)); err != nil {
		t.Errorf("a valid last_operation failed the check: %v", err)
	}
}
