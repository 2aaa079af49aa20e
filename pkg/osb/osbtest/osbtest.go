// Package osbtest checks broker responses against the OSB OpenAPI file
// (pkg/catalog/testdata/osb-openapi.yaml, the spec's own), for the tests of
// pkg/osb and the end-to-end tests of functions/. Test support only: no
// production code imports it.
package osbtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

// The OSB OpenAPI file's paths of the instance and binding operations.
const (
	InstancePath      = "/v2/service_instances/{instance_id}"
	InstanceLastOp    = "/v2/service_instances/{instance_id}/last_operation"
	BindingPath       = "/v2/service_instances/{instance_id}/service_bindings/{binding_id}"
	BindingLastOpPath = "/v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation"
)

var (
	once sync.Once
	doc  *openapi3.T
	err  error
)

// Doc is the OSB OpenAPI document, loaded and validated once.
func Doc() (*openapi3.T, error) {
	once.Do(func() {
		_, self, _, _ := runtime.Caller(0)
		file := filepath.Join(filepath.Dir(self), "..", "..", "catalog", "testdata", "osb-openapi.yaml")
		if doc, err = openapi3.NewLoader().LoadFromFile(file); err == nil {
			err = doc.Validate(context.Background())
		}
	})
	return doc, err
}

// Check reports how a response breaks what the OSB OpenAPI file declares
// for method and path: a status the operation does not declare, or a body
// that does not match the declared application/json schema.
func Check(method, path string, status int, body []byte) error {
	d, err := Doc()
	if err != nil {
		return fmt.Errorf("OSB OpenAPI: %w", err)
	}
	item := d.Paths.Value(path)
	if item == nil {
		return fmt.Errorf("the OSB OpenAPI file has no path %s", path)
	}
	op := item.GetOperation(method)
	if op == nil {
		return fmt.Errorf("the OSB OpenAPI file has no %s %s", method, path)
	}
	resp := op.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return fmt.Errorf("status %d %s is not declared for %s %s", status, http.StatusText(status), method, path)
	}
	media := resp.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	return media.Schema.Value.VisitJSON(v, openapi3.MultiErrors())
}
