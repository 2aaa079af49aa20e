package terraform_test

// Checks of terraform/ against the code, without terraform: each file of
// these tests answers one question a reader asks (is every function
// deployed, does each read the settings terraform sets, are the queries
// indexed, is every grant needed, ...) and fails when the terraform and
// the code drift apart. harness_test.go evaluates the module; this file
// holds the inputs every test evaluates it with.

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

const (
	testProject = "specsync-test"
	// The reference registries file shows every field, credentials of
	// every kind and a ${VAR} reference: the richest input for the module.
	referenceRegistries = "examples/registries.reference.yaml"
)

var referenceEnv = map[string]string{"REFERENCE_REGISTRY_HOST": "registry.example.com"}

func inputs(extra map[string]cty.Value) map[string]cty.Value {
	in := map[string]cty.Value{
		"project_id":             cty.StringVal(testProject),
		"registries_file":        cty.StringVal(referenceRegistries),
		"registry_env":           ctyFromGo(referenceEnv),
		"broker_password_sha256": cty.StringVal(sha256Hex(testCredentials["SPECSYNC_BROKER_PASSWORD"])),
		// Upper case, as some tools print it: the module normalises it.
		"admin_token_sha256": cty.StringVal(strings.ToUpper(sha256Hex(testCredentials["SPECSYNC_ADMIN_TOKEN"]))),
	}
	for k, v := range extra {
		in[k] = v
	}
	return in
}

// evaluated loads the module with the test's inputs; any evaluation error
// fails the test.
func evaluated(t *testing.T, extra map[string]cty.Value) *module {
	t.Helper()
	m, err := loadModule(".", inputs(extra))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, e := range m.errs {
		t.Error(e)
	}
	if t.Failed() {
		t.FailNow()
	}
	return m
}
