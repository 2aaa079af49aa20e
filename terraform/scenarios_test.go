//go:build deploycheck

package terraform_test

// The root modules the deploy check plans: what teams deploy. Each test
// names the scenarios it reads; a scenario is planned once per run.

import (
	"os"
	"path/filepath"
	"testing"
)

const (
	testProject = "specsync-test"
	// The reference registries file shows every field, credentials of
	// every kind and a ${VAR} reference: the richest input for the module.
	referenceRegistries = "examples/registries.reference.yaml"
	// The other project an Artifact Registry source reads in the outside
	// scenario, and the reference file's.
	otherProject     = "team-images-prj"
	referenceProject = "my-project"
)

var referenceEnv = map[string]string{"REFERENCE_REGISTRY_HOST": "registry.example.com"}

// arRepositories are added to the grants the registries file implies.
var arRepositories = []string{"europe/extra", "shared-images/us-central1/team-images"}

// shipped is examples/deploy as a team copies it.
var shipped = scenario{name: "shipped", shipped: true}

// reference deploys examples/registries.reference.yaml (every field, every
// kind of credential, hooks of both kinds, a dir source), with extra
// repositories; its Artifact Registry sources read another project, whose
// gcr topic the plan reads from the emulator.
func reference(t *testing.T) scenario {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", referenceRegistries))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"registries.yaml": string(text)}
	specs, _ := filepath.Glob("../examples/registry/*.yaml")
	for _, s := range specs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		files["registry/"+filepath.Base(s)] = string(b)
	}
	return scenario{
		name:  "reference",
		files: files,
		args: `  registries_file                = "registries.yaml"
  registry_env                   = { REFERENCE_REGISTRY_HOST = "registry.example.com" }
  artifact_registry_repositories = ["europe/extra", "shared-images/us-central1/team-images"]
`,
		topics: []string{referenceProject + "/gcr"},
	}
}

// outsideRegistries is a registries file kept outside the module's
// checkout and the root module (an absolute registries_file): an
// Artifact Registry source in another project, a Helm chart repository
// and an index in Cloud Storage read with the function's identity, a
// distribution registry with a password and a webhook, and bundled specs.
const outsideRegistries = `registries:
  - name: team-images
    type: oci
    oci:
      host: europe-west1-docker.pkg.dev
      prefix: ` + otherProject + `/specs
      auth: {type: google}
  - name: charts
    type: helm
    helm:
      url: https://storage.googleapis.com/acme-charts/stable
      auth: {type: google}
  - name: partner-index
    type: http
    http:
      url: https://storage.googleapis.com/acme-partner-index/index.yaml
      auth: {type: google}
    hook: {type: hmac, secret_file: /secrets/partner-hook/secret}
  - name: distribution
    type: oci
    oci:
      host: registry.acme.example
      auth: {type: basic, username: robot, password_env: DISTRIBUTION_PASSWORD}
    hook: {type: bearer, secret_env: DISTRIBUTION_HOOK_SECRET}
  - name: bundled
    type: dir
    dir: {path: specs}
`

const bundledSpec = `name: bundled-redis
description: Redis, bundled with the deployment
bindable: true
plans:
  - name: default
    description: the default plan
`

// outside: the registries file outside the source tree, a private
// bootstrap, hooks.
var outside = scenario{
	name:    "outside",
	outside: map[string]string{"registries.yaml": outsideRegistries, "specs/redis.yaml": bundledSpec},
	args: `  registries_file    = "$OUTSIDE/registries.yaml"
  bootstrap_public   = false
  bootstrap_invokers = ["group:platform-ops@example.com"]
`,
	topics: []string{otherProject + "/gcr"},
}

// ownRegistries reads the module's own project's Artifact Registry, with
// a webhook (a registry that also notifies).
const ownRegistries = `registries:
  - name: own
    type: oci
    oci:
      host: europe-docker.pkg.dev
      prefix: ` + testProject + `/specs
      auth: {type: google}
  - name: hooked
    type: http
    http: {url: "https://specs.example.com/index.yaml"}
    hook: {type: bearer, secret_env: HOOKED_SECRET}
`

// views: catalog views, Artifact Registry events off.
var views = scenario{
	name:  "views",
	files: map[string]string{"registries.yaml": ownRegistries},
	args: `  artifact_registry_events = "off"
  notification_channels    = ["projects/specsync-test/notificationChannels/123", "projects/specsync-test/notificationChannels/456"]
  alert_failed_runs        = 4
  broker_views = {
    cf-prod = {
      username   = "cf-prod"
      registries = { allow = ["own"] }
      tags       = { deny = ["experimental"] }
    }
    k8s-dev = {
      username = "k8s-dev"
      services = { allow = ["redis.*"], deny = ["redis-legacy"] }
    }
  }
`,
}

// domain: an organisation that refuses allUsers (domain-restricted
// sharing), a multi-region database, the gcr topic created here.
var domain = scenario{
	name:  "domain",
	files: map[string]string{"registries.yaml": ownRegistries},
	args: `  public_access            = "invoker_iam_disabled"
  bootstrap_public         = true
  artifact_registry_events = "create"
  firestore_location       = "nam5"
`,
}

// missingTopic reads another project whose gcr topic does not exist.
var missingTopic = scenario{
	name:     "missing-topic",
	files:    map[string]string{"registries.yaml": "registries:\n  - name: nowhere\n    type: oci\n    oci:\n      host: us-docker.pkg.dev\n      prefix: no-topic-prj/specs\n      auth: {type: google}\n"},
	args:     `  registries_file = "registries.yaml"` + "\n",
	emulator: true,
}

// missingEnv references a ${VAR} registry_env does not set.
var missingEnv = scenario{
	name:  "missing-env",
	files: map[string]string{"registries.yaml": "registries:\n  - name: env\n    type: http\n    http: {url: \"${INDEX_URL}\"}\n"},
	args:  `  registries_file = "registries.yaml"` + "\n",
}
