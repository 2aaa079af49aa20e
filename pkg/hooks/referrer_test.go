package hooks_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/hooks"
	"github.com/specsync/specsync/pkg/queue"
)

// referrerRegistries are two registries of one host, one verifying
// (signed) and one not (plain), each with a bearer webhook.
func referrerRegistries(t *testing.T) string {
	t.Helper()
	t.Setenv("SPECSYNC_TEST_TEAM_HOOK", bearerSecret)
	return `registries:
  - name: signed
    type: oci
    deny: ["internal/.*"]
    oci: {host: registry.example.com, prefix: apps, tag: latest}
    verify: {keys: [{pem_file: /etc/keys/cosign.pub}]}
    hook: {type: bearer, secret_env: SPECSYNC_TEST_TEAM_HOOK}
  - name: plain
    type: oci
    oci: {host: registry.example.com, prefix: apps, tag: latest}
    hook: {type: bearer, secret_env: SPECSYNC_TEST_TEAM_HOOK}
`
}

const (
	signedHex = "6ec128e26cd5f1ba3b1c3b2d3c7c3c2e0f1d2c3b4a5968778695a4b3c2d1e0f9"
	sigDigest = "sha256:1c3b2d3c7c3c2e0f1d2c3b4a5968778695a4b3c2d1e0f96ec128e26cd5f1ba3b"
)

// A signature pushed after the image (cosign's sha256-<hex>.sig tag, an
// attestation's .att, the referrers tag schema's sha256-<hex>, or an OCI
// 1.1 referrer pushed without a tag) is no entry of its own: through the
// registry's selection it names the repository's entry, for a registry
// that verifies, in every payload form; a registry that does not verify
// enqueues nothing, nor does a deleted signature, a denied repository or
// a tag that only looks like one. No answer or message ever names a
// sha256- tag as an entry.
func TestHookSignaturePushRechecksTheRepository(t *testing.T) {
	e := newHookEnv(t, referrerRegistries(t), 10*time.Millisecond, true)
	dist := func(action, repo, tag, digest string) []byte {
		return fmt.Appendf(nil, `{"events":[{"action":%q,"target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":%q,"tag":%q,"digest":%q}}]}`, action, repo, tag, digest)
	}
	sig := "sha256-" + signedHex + ".sig"
	for _, c := range []struct {
		name    string
		body    []byte
		headers []string
		kind    string
		signed  []string // what the verifying registry enqueues
	}{
		{"distribution: cosign's .sig tag", dist("push", "apps/redis", sig, sigDigest), nil, hooks.KindDistribution, []string{"redis"}},
		{"distribution: an attestation's .att tag", dist("push", "apps/redis", "sha256-"+signedHex+".att", sigDigest), nil, hooks.KindDistribution, []string{"redis"}},
		{"distribution: the referrers tag schema", dist("push", "apps/db/pg", "sha256-"+signedHex, sigDigest), nil, hooks.KindDistribution, []string{"db/pg"}},
		{"distribution: a referrer pushed without a tag", dist("push", "apps/redis", "", sigDigest), nil, hooks.KindDistribution, []string{"redis"}},
		{"distribution: the signature deleted", dist("delete", "apps/redis", sig, ""), nil, hooks.KindDistribution, nil},
		{"distribution: a denied repository", dist("push", "apps/internal/x", sig, sigDigest), nil, hooks.KindDistribution, nil},
		{"distribution: another prefix", dist("push", "other/redis", sig, sigDigest), nil, hooks.KindDistribution, nil},
		{"distribution: a tag that only looks like one", dist("push", "apps/redis", "sha256-"+signedHex[:12]+".sig", sigDigest), nil, hooks.KindDistribution, nil},
		{"harbor: cosign's .sig tag", fmt.Appendf(nil, `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"digest":%q,"tag":%q}],"repository":{"repo_full_name":"apps/redis"}}}`, sigDigest, sig),
			nil, hooks.KindHarbor, []string{"redis"}},
		{"quay: updated_tags with the .sig tag", fmt.Appendf(nil, `{"repository":"apps/redis","docker_url":"registry.example.com/apps/redis","updated_tags":[%q]}`, sig),
			nil, hooks.KindQuay, []string{"redis"}},
		{"github: registry_package tagged .sig", fmt.Appendf(nil, `{"action":"published","registry_package":{"name":"redis","package_type":"CONTAINER","owner":{"login":"apps"},"package_version":{"version":%q,"container_metadata":{"tag":{"name":%q,"digest":%q}}}}}`, sigDigest, sig, sigDigest),
			[]string{hooks.GitHubEventHeader, "registry_package"}, hooks.KindGitHub, []string{"redis"}},
		{"github: an untagged package version (a referrer)", fmt.Appendf(nil, `{"action":"published","package":{"name":"redis","package_type":"CONTAINER","owner":{"login":"apps"},"package_version":{"version":%q}}}`, sigDigest),
			[]string{hooks.GitHubEventHeader, "package"}, hooks.KindGitHub, []string{"redis"}},
	} {
		for _, reg := range []string{"signed", "plain"} {
			want := c.signed
			if reg == "plain" {
				want = nil
			}
			h := e.post(reg, c.body, append(bearer(bearerSecret), c.headers...)...).accepted(t)
			if h.Kind != c.kind || h.Enqueued != (len(want) > 0) || !slices.Equal(h.Entries, append([]string{}, want...)) {
				t.Errorf("%s, to %s: %+v; want %s entries %v", c.name, reg, h, c.kind, want)
			}
			if len(want) > 0 && !strings.Contains(h.Description, "a signature or another referrer pushed") {
				t.Errorf("%s, to %s: the answer %q does not say a signature was pushed", c.name, reg, h.Description)
			}
		}
	}
	for _, m := range e.published() {
		if m.Registry != "signed" || slices.ContainsFunc(m.Entries, func(s string) bool { return strings.HasPrefix(s, "sha256-") }) {
			t.Errorf("published %+v: only the verifying registry's entries, never a sha256- tag", m)
		}
	}
}

// Artifact Registry's notification of a signature's tag goes through the
// same selection: the verifying registry checks the repository's entry
// again, the others take nothing.
func TestRouteSignaturePush(t *testing.T) {
	cfg, err := config.Parse([]byte(`registries:
  - name: signed
    type: oci
    oci: {host: europe-docker.pkg.dev, prefix: proj/services, tag: stable}
    verify: {keys: [{pem_file: /etc/keys/cosign.pub}]}
  - name: plain
    type: oci
    oci: {host: europe-docker.pkg.dev, prefix: proj/services, tag: stable}
`), "test", ".")
	if err != nil {
		t.Fatal(err)
	}
	const repo = "europe-docker.pkg.dev/proj/services/redis"
	for _, c := range []struct {
		name string
		ev   queue.ArtifactEvent
		want []string
	}{
		{"the .sig tag", queue.ArtifactEvent{Action: "INSERT", Digest: repo + "@" + sigDigest, Tag: repo + ":sha256-" + signedHex + ".sig"}, []string{"signed:redis"}},
		{"a referrer by digest", queue.ArtifactEvent{Action: "INSERT", Digest: repo + "@" + sigDigest}, []string{"signed:redis"}},
		{"the .sig tag deleted", queue.ArtifactEvent{Action: "DELETE", Tag: repo + ":sha256-" + signedHex + ".sig"}, nil},
	} {
		ch, err := c.ev.Change()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, m := range hooks.Route(ch, hooks.FromConfig(cfg), time.Now()) {
			got = append(got, m.Registry+":"+strings.Join(m.Entries, ","))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
