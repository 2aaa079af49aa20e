package hooks

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withTag is a GitHub fixture whose container version carries tag.
func withTag(t *testing.T, body []byte, key, tag string) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	v := p[key].(map[string]any)["package_version"].(map[string]any)
	v["container_metadata"].(map[string]any)["tag"].(map[string]any)["name"] = tag
	v["package_url"] = "ghcr.io/Codertocat/hello-world:" + tag
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func change(c registry.Change) event { return event{change: &c} }

// Every documented payload decodes into the changes it announces; what
// changes nothing a run reads (pulls, blobs, pings, packages that are no
// image) is ignored, with the reason.
func TestDecodePayloads(t *testing.T) {
	const ghDigest = "sha256:6c62fb45fe66bfb1ea9a66abc38f6a0cc974292b"
	gh := func(event string) http.Header { h := http.Header{}; h.Set(GitHubEventHeader, event); return h }
	for _, c := range []struct {
		name   string
		header http.Header
		body   []byte
		kind   string
		want   []event
	}{
		{"distribution: a manifest push by digest and two layers", nil, fixture(t, "distribution-push.json"), KindDistribution, []event{
			change(registry.Change{Repository: "library/test", Digest: "sha256:fea8895f450959fa676bcc1df0611ea93823a735a01205fd8622846041d0c7cf"}),
			{skip: "blob push"}, {skip: "blob push"},
		}},
		{"distribution: a pull", nil, fixture(t, "distribution-pull.json"), KindDistribution, []event{{skip: "pull"}}},
		{"distribution: a delete", nil, fixture(t, "distribution-delete.json"), KindDistribution, []event{
			change(registry.Change{Repository: "library/test", Digest: "sha256:d89e1bee20d9cb344674e213b581f14fbd8e70274ecf9d10c514bab78a307845", Deleted: true}),
		}},
		{"distribution: a tagged push, a mount, an action it may add", nil, []byte(`{"events":[
			{"action":"push","target":{"mediaType":"application/vnd.oci.image.index.v1+json","repository":"apps/redis","tag":"latest","digest":"sha256:ab"}},
			{"action":"mount","target":{"repository":"apps/redis","digest":"sha256:cd"}},
			{"action":"rename","target":{"repository":"apps/redis"}}]}`), KindDistribution, []event{
			change(registry.Change{Repository: "apps/redis", Tag: "latest", Digest: "sha256:ab"}), {skip: "blob mount"}, {skip: "action rename"},
		}},
		{"harbor: a push", nil, fixture(t, "harbor-push.json"), KindHarbor, []event{
			change(registry.Change{Repository: "test-webhook/debian", Tag: "latest", Digest: "sha256:8a9e9863dbb6e10edb5adfe917c00da84e1700fa76e7ed02476aa6e6fb8ee0d8"}),
		}},
		{"harbor: a pull (CloudEvents)", nil, fixture(t, "harbor-cloudevents-pull.json"), KindHarbor, []event{{skip: "Harbor event harbor.artifact.pulled"}}},
		{"harbor: a delete by digest (CloudEvents)", nil, fixture(t, "harbor-cloudevents-delete.json"), KindHarbor, []event{
			change(registry.Change{Repository: "library/busybox", Digest: "sha256:dde8e930c7b6a490f728e66292bc9bce42efc9bbb5278bae40e4f30f6e00fe8c", Deleted: true}),
		}},
		{"harbor: a scan", nil, []byte(`{"type":"SCANNING_COMPLETED","event_data":{"repository":{"repo_full_name":"a/b"}}}`), KindHarbor, []event{{skip: "Harbor event SCANNING_COMPLETED"}}},
		{"github: package published, untagged", gh("package"), fixture(t, "github-package-published.json"), KindGitHub, []event{
			change(registry.Change{Repository: "codertocat/hello-world", Digest: ghDigest}),
		}},
		{"github: package published as latest", gh("package"), withTag(t, fixture(t, "github-package-published.json"), "package", "latest"), KindGitHub, []event{
			change(registry.Change{Repository: "codertocat/hello-world", Tag: "latest", Digest: ghDigest}),
		}},
		{"github: registry_package published", gh("registry_package"), fixture(t, "github-registry-package-published.json"), KindGitHub, []event{
			change(registry.Change{Repository: "codertocat/hello-world", Digest: ghDigest}),
		}},
		{"github: a package deleted", gh("package"), []byte(`{"action":"deleted","package":{"name":"svc","package_type":"CONTAINER","owner":{"login":"Acme"}}}`), KindGitHub, []event{
			change(registry.Change{Repository: "acme/svc", Deleted: true}),
		}},
		{"github: an npm package", gh("package"), []byte(`{"action":"published","package":{"name":"x","package_type":"npm","ecosystem":"npm","owner":{"login":"a"}}}`), KindGitHub, []event{{skip: "GitHub package of type npm"}}},
		{"github: ping", gh("ping"), []byte(`{"zen":"Design for failure.","hook_id":1}`), KindGitHub, []event{{skip: "ping"}}},
		{"github: a push listing no path", gh("push"), []byte(`{"ref":"refs/heads/main"}`), KindGitHub, []event{{push: &registry.GitPush{Ref: "refs/heads/main"}}}},
		{"entries", nil, []byte(`{"entries":["redis","db/postgres"]}`), KindEntries, []event{{entries: []string{"redis", "db/postgres"}}}},
		{"entries: none is the whole registry", nil, []byte(`{"entries":[]}`), KindEntries, []event{{whole: true}}},
	} {
		kind, got, err := decodePayload(c.header, c.body)
		if err != nil || kind != c.kind || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %s %s, %v; want %s %s", c.name, kind, show(got), err, c.kind, show(c.want))
		}
	}

	for _, c := range []struct {
		name   string
		header http.Header
		body   string
		code   string
		says   string
	}{
		{"not JSON", nil, `{"events":`, "MalformedJSON", "not a JSON object"},
		{"a JSON array", nil, `[1]`, "MalformedJSON", "not a JSON object"},
		{"unknown", nil, `{"push_data":{"tag":"latest"},"repository":{}}`, "UnknownPayload", "unknown payload (fields push_data, repository)"},
		{"events not a list", nil, `{"events":{}}`, "MalformedJSON", "not a distribution notification envelope"},
		{"a change without a repository", nil, `{"events":[{"action":"delete","target":{"digest":"sha256:ab"}}]}`, "MalformedJSON", "events[0].target: the repository is empty"},
		{"a repository too long", nil, `{"events":[{"action":"delete","target":{"repository":"` + strings.Repeat("a", 513) + `"}}]}`, "MalformedJSON", "over 512 bytes"},
		{"harbor without its data", nil, `{"type":"PUSH_ARTIFACT","event_data":null}`, "MalformedJSON", "has no event_data"},
		{"github without the package", gh("package"), `{"action":"published"}`, "MalformedJSON", "without its package"},
		{"github not JSON", gh("package"), `nope`, "MalformedJSON", "not a GitHub package event"},
		{"entries with another field", nil, `{"entries":["a"],"tag":"x"}`, "MalformedJSON", "unknown field"},
		{"an empty entry", nil, `{"entries":["a",""]}`, "MalformedJSON", "entries[1] is not an entry name"},
	} {
		_, _, err := decodePayload(c.header, []byte(c.body))
		var pe errPayload
		if !errors.As(err, &pe) || pe.code != c.code || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want %s saying %q", c.name, err, c.code, c.says)
		}
	}
}

func show(evs []event) string {
	var parts []string
	for _, e := range evs {
		switch {
		case e.change != nil:
			parts = append(parts, "change"+jsonOf(*e.change))
		default:
			parts = append(parts, jsonOf(map[string]any{"entries": e.entries, "whole": e.whole, "skip": e.skip}))
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }
