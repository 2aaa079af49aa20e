//go:build deploycheck

package terraform_test

// The module's interface: variables typed, described and validated, the
// APIs every resource needs enabled, and the outputs.

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

func TestVariablesTypedDescribedValidated(t *testing.T) {
	m := evaluated(t, nil)
	for name, b := range m.variables {
		ty, ok := b.Body.Attributes["type"]
		if !ok {
			t.Errorf("variable %s has no type", name)
		}
		if d, ok := b.Body.Attributes["description"]; !ok {
			t.Errorf("variable %s has no description", name)
		} else if v, _ := d.Expr.Value(nil); len(asString(v)) < 20 {
			t.Errorf("variable %s: describe it", name)
		}
		validations := 0
		for _, vb := range b.Body.Blocks {
			if vb.Type == "validation" {
				validations++
			}
		}
		isBool := ok && hclKeyword(ty) == "bool"
		if validations == 0 && !isBool {
			t.Errorf("variable %s is not validated", name)
		}
	}
	// Bad values are refused at plan time.
	for name, bad := range map[string]cty.Value{
		"project_id":                      cty.StringVal("Not A Project"),
		"name_prefix":                     cty.StringVal("this-prefix-is-too-long"),
		"registries_file":                 cty.StringVal("../outside.yaml"),
		"log_level":                       cty.StringVal("verbose"),
		"reconcile_max_delivery_attempts": cty.NumberIntVal(1),
		"lease_ttl_seconds":               cty.NumberIntVal(60),
		"reconcile_service":               ctyFromGo(map[string]any{"timeout_seconds": 900}),
		"catalog_service":                 ctyFromGo(map[string]any{"cpu": "0.5", "concurrency": 80}),
		"bootstrap_schedule":              cty.StringVal("hourly"),
		"registry_env":                    ctyFromGo(map[string]string{"REFERENCE_REGISTRY_HOST": "h", "SPECSYNC_TOPIC": "x"}),
		"broker_password_sha256":          cty.StringVal(testCredentials["SPECSYNC_BROKER_PASSWORD"]),            // the password, not its digest
		"admin_token_sha256":              cty.StringVal(sha256Hex("") + "  -"),                                  // sha256sum's whole line
		"broker_password_previous_sha256": cty.StringVal(sha256Hex(testCredentials["SPECSYNC_BROKER_PASSWORD"])), // the current one again
		"artifact_registry_events":        cty.StringVal("if-absent"),
		"hook_window_seconds":             cty.NumberIntVal(0),
		"notification_channels":           ctyFromGo([]string{"1234567890"}),
		"alert_failed_runs":               cty.NumberIntVal(0),
		"bootstrap_interval_seconds":      cty.NumberIntVal(86400),
		"trace_sample_ratio":              cty.NumberFloatVal(1.5),
	} {
		bm, err := loadModule(".", inputs(map[string]cty.Value{name: bad}))
		if err != nil {
			t.Fatal(err)
		}
		failed := false
		for _, e := range bm.errs {
			failed = failed || strings.Contains(e, "variable "+name+" validation")
		}
		if !failed {
			t.Errorf("variable %s accepts %#v", name, bad)
		}
	}
	// The digest of nothing (a credential variable that was not set when
	// it was hashed) is refused too.
	for _, name := range []string{"broker_password_sha256", "admin_token_sha256"} {
		bm, err := loadModule(".", inputs(map[string]cty.Value{name: cty.StringVal(sha256Hex(""))}))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(bm.errs, "\n"), "variable "+name+" validation") {
			t.Errorf("variable %s accepts the digest of an empty string", name)
		}
	}
}

func hclKeyword(a *hclsyntax.Attribute) string {
	if st, ok := a.Expr.(*hclsyntax.ScopeTraversalExpr); ok {
		return st.Traversal.RootName()
	}
	return ""
}

// Every API a resource needs is enabled, and every resource waits for them.
func TestAPIs(t *testing.T) {
	m := evaluated(t, nil)
	needs := []struct {
		prefix string
		apis   []string
	}{
		{"google_cloudfunctions2_", []string{"cloudfunctions", "run", "cloudbuild", "artifactregistry", "logging"}},
		{"google_cloud_run_v2_", []string{"run"}},
		{"google_firestore_", []string{"firestore"}},
		{"google_pubsub_", []string{"pubsub"}},
		{"google_secret_manager_", []string{"secretmanager"}},
		{"google_cloud_scheduler_", []string{"cloudscheduler"}},
		{"google_storage_", []string{"storage"}},
		{"google_service_account", []string{"iam"}},
		{"google_project_iam_", []string{"cloudresourcemanager"}},
		{"google_project", []string{"cloudresourcemanager"}},
		{"google_artifact_registry_", []string{"artifactregistry"}},
		{"google_logging_", []string{"logging"}},
		{"google_monitoring_", []string{"monitoring"}},
	}
	enabled := map[string]bool{}
	for _, s := range m.ofType("google_project_service") {
		enabled[strings.TrimSuffix(s.str("service"), ".googleapis.com")] = true
	}
	for _, k := range m.order {
		r := m.resources[k]
		if !strings.HasPrefix(r.Type, "google_") || r.Type == "google_project_service" {
			continue
		}
		known := false
		for _, n := range needs {
			if strings.HasPrefix(r.Type, n.prefix) {
				known = true
				for _, api := range n.apis {
					if !enabled[api] {
						t.Errorf("%s needs %s.googleapis.com, which is not enabled", k, api)
					}
				}
				break
			}
		}
		if !known {
			t.Errorf("%s: no API known for %s; add it to this test", k, r.Type)
		}
		if !m.dependsOn(k, "google_project_service.enabled") {
			t.Errorf("%s does not wait for the APIs (directly or through what it references)", k)
		}
	}
}

func TestOutputs(t *testing.T) {
	m := evaluated(t, nil)
	fns := functionsByEntryPoint(t, m)
	want := map[string]string{
		"broker_url":            fns["Catalog"].one("service_config").str("uri"),
		"bootstrap_url":         fns["Bootstrap"].one("service_config").str("uri"),
		"reconcile_topic":       workTopicOf(t, m).str("id"),
		"catalog_changes_topic": m.instance("google_pubsub_topic.catalog_changes", "").str("id"),
		"commit_topic":          commitTopicOf(t, m).str("id"),
	}
	for name, w := range want {
		v, ok := m.outVals[name]
		if !ok {
			t.Errorf("no output %s", name)
			continue
		}
		if asString(v) != w {
			t.Errorf("output %s = %q, want %q", name, asString(v), w)
		}
	}
	for name, b := range m.outputs {
		if _, ok := b.Body.Attributes["description"]; !ok {
			t.Errorf("output %s has no description", name)
		}
	}
}
