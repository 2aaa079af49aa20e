//go:build deploycheck

package terraform_test

// The module's inputs: bad values are refused by the plan, each by its
// variable's own validation, before anything is created; and the outputs
// say what they should.

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// badInputs is one root module that gets every input wrong at once:
// terraform reports every failed variable validation of a plan together.
var badInputs = scenario{
	name:  "bad-inputs",
	files: map[string]string{"registries.yaml": ownRegistries},
	args: `  registries_file                 = "no-such-file.yaml"
  name_prefix                     = "this-prefix-is-too-long"
  log_level                       = "verbose"
  reconcile_max_delivery_attempts = 1
  reconcile_service               = { timeout_seconds = 900 }
  catalog_service                 = { cpu = "0.5", concurrency = 80 }
  bootstrap_schedule              = "hourly"
  registry_env                    = { SPECSYNC_TOPIC = "x" }
  artifact_registry_events        = "if-absent"
  hook_window_seconds             = 0
  notification_channels           = ["1234567890"]
  alert_failed_runs               = 0
  bootstrap_interval_seconds      = 86400
  trace_sample_ratio              = 1.5
  public_access                   = "public"
  bootstrap_invokers              = ["allUsers"]
  firestore_location              = "Europe West"
  artifact_registry_repositories  = ["Europe/specs", "europe/specs/extra/x"]
`,
}

// badCrossInputs: inputs whose validation reads other inputs (which are
// right here).
var badCrossInputs = scenario{
	name:  "bad-cross-inputs",
	files: map[string]string{"registries.yaml": ownRegistries},
	args: `  lease_ttl_seconds               = 60
  broker_password_previous_sha256 = "` + sha256Hex(testCredentials["SPECSYNC_BROKER_PASSWORD"]) + `"
`,
}

func TestBadInputsAreRefused(t *testing.T) {
	t.Parallel()
	out := planFailure(t, badInputs)
	for _, name := range []string{"registries_file", "name_prefix", "log_level", "reconcile_max_delivery_attempts", "reconcile_service", "catalog_service",
		"bootstrap_schedule", "registry_env", "artifact_registry_events", "hook_window_seconds",
		"notification_channels", "alert_failed_runs", "bootstrap_interval_seconds", "trace_sample_ratio", "public_access",
		"bootstrap_invokers", "firestore_location", "artifact_registry_repositories"} {
		if !refused(out, name) {
			t.Errorf("variable %s accepts its bad value:\n%s", name, out)
		}
	}
	if strings.Contains(out, "Plan:") {
		t.Error("the plan with bad inputs planned changes")
	}
	out = planFailure(t, badCrossInputs)
	for _, name := range []string{"lease_ttl_seconds", "broker_password_previous_sha256"} {
		if !refused(out, name) {
			t.Errorf("variable %s accepts its bad value:\n%s", name, out)
		}
	}
}

// refused reports whether terraform's output has a failed validation of
// the variable (module.specsync's input).
func refused(out, name string) bool {
	return regexp.MustCompile(`(?m)^\s*│ var\.` + name + `\b`).MatchString(out)
}

// The digests every deployment needs: not its password, not sha256sum's
// whole line, not the digest of an empty string (an unset variable).
func TestBadDigestsAreRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, broker, admin string }{
		{"password-not-digest", testCredentials["SPECSYNC_BROKER_PASSWORD"], sha256Hex("") + "  -"},
		{"empty-digests", sha256Hex(""), sha256Hex("")},
	} {
		sc := scenario{name: "digests-" + c.name, files: map[string]string{"registries.yaml": ownRegistries},
			args: "  broker_password_sha256 = \"" + c.broker + "\"\n  admin_token_sha256 = \"" + c.admin + "\"\n", overrideDigests: true}
		out := planFailure(t, sc)
		for _, name := range []string{"broker_password_sha256", "admin_token_sha256"} {
			if !refused(out, name) {
				t.Errorf("%s: variable %s accepts %q:\n%s", c.name, name, map[string]string{"broker_password_sha256": c.broker, "admin_token_sha256": c.admin}[name], out)
			}
		}
	}
}

func TestOutputs(t *testing.T) {
	t.Parallel()
	m := planOf(t, outside)
	for name, want := range map[string]string{
		"reconcile_topic":       "projects/" + testProject + "/topics/specsync-reconcile",
		"catalog_changes_topic": "projects/" + testProject + "/topics/specsync-catalog-changes",
		"commit_topic":          "projects/" + testProject + "/topics/specsync-commit",
		"registries_object":     "gs://" + testProject + "-specsync-config/registries.json",
	} {
		if got := asString(m.outVals[name]); got != want {
			t.Errorf("output %s = %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"broker_url", "bootstrap_url", "hook_urls", "function_urls", "secrets", "service_accounts", "gcr_subscriptions", "oidc_audiences", "dashboard_url"} {
		if _, ok := m.outVals[name]; !ok {
			t.Errorf("no output %s", name)
		}
	}
}

// The resources each root module plans, as docs/deploy.md's table of the
// deploy check says them (a figure there that the plan does not bear out
// fails here).
func TestPlannedResources(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]scenario{
		"| `examples/deploy/` as shipped":               shipped,
		"| a registries file outside the tree":          outside,
		"| `examples/registries.reference.yaml`":        reference(t),
		"| catalog views, events `off`":                 views,
		"| `public_access = \"invoker_iam_disabled\"`":  domain,
		"| `write_secrets` with the values in `TF_VAR_": writeSecrets,
	}
	for prefix, sc := range rows {
		var line string
		for _, l := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(l, prefix) {
				line = l
			}
		}
		if line == "" {
			t.Errorf("docs/deploy.md has no row %q", prefix)
			continue
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimSpace(line), "|"), "|")
		want := strings.TrimSpace(cells[len(cells)-1])
		m := planOf(t, sc)
		created := 0
		for _, k := range m.order {
			r := m.resources[k]
			for _, i := range r.Instances {
				if r.Mode == "resource" && len(i.Actions) == 1 && i.Actions[0] == "create" {
					created++
				}
			}
		}
		if got := strconv.Itoa(created); got != want {
			t.Errorf("%s plans %s resources; docs/deploy.md says %s", sc.name, got, want)
		}
	}
}
