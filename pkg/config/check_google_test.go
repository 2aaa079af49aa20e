package config_test

import (
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
)

// `specsync config check` rejects auth type google where it cannot go,
// at the line of the field to fix: a host that is not Google's, plain
// HTTP, a URL that is not Cloud Storage, a field the type does not use.
// The operator CLI links no Google auth library (cmd/specsync's deps
// test), so this is pkg/registry's own check.
func TestCheckReportsGoogleAuthWhereItCannotGo(t *testing.T) {
	src := `registries:
  - name: ar
    type: oci
    oci:
      host: europe-docker.pkg.dev
      prefix: my-project/specs
      auth: {type: google}
  - name: elsewhere
    type: oci
    oci:
      host: registry.example.com
      auth:
        type: google
  - name: plain
    type: oci
    oci:
      host: eu.gcr.io
      insecure: true
      auth: {type: google}
  - name: index
    type: http
    http:
      url: https://specs.example.com/index.yaml
      auth: {type: google}
  - name: bucket
    type: http
    http:
      url: https://storage.googleapis.com/my-bucket/index.yaml
      auth: {type: google}
  - name: extra
    type: oci
    oci:
      host: gcr.io
      auth:
        type: google
        token_env: GOOGLE_TOKEN
`
	res := config.Check([]byte(src), "f.yaml", ".")
	got := map[int]string{}
	for _, p := range res.Problems {
		got[p.Line] += p.Message + "|"
	}
	for line, want := range map[int]string{
		11: `registries[1] (elsewhere): oci.host "registry.example.com" is not one of Google's registries (gcr.io, *.gcr.io, *.pkg.dev, over HTTPS)`,
		18: "registries[2] (plain): oci.insecure: auth type google never sends a Google access token over plain HTTP; remove oci.insecure",
		23: `registries[3] (index): http.url "https://specs.example.com/index.yaml" is not in Cloud Storage`,
		34: "registries[5] (extra): oci.auth: auth type google does not use token_env",
	} {
		if !strings.Contains(got[line], want) {
			t.Errorf("line %d: got %q, want %q", line, got[line], want)
		}
	}
	if len(res.Problems) != 4 {
		t.Errorf("%d problems, want 4: %+v", len(res.Problems), res.Problems)
	}
}
