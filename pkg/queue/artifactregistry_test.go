package queue_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/registry"
)

const arDigest = "sha256:6ec128e26cd5f1ba3b1c3b2d3c7c3c2e0f1d2c3b4a5968778695a4b3c2d1e0f9"

// Artifact Registry's messages, in the shapes its documentation gives
// ("Configuring Pub/Sub notifications": INSERT with the digest and the
// tag, INSERT of a digest alone, DELETE of a tag or of a digest), decode
// into the change they announce; anything else on that topic is invalid,
// and still recognisably Artifact Registry's.
func TestArtifactRegistryEvents(t *testing.T) {
	const repo = "us-east1-docker.pkg.dev/my-project/my-repo/hello-world"
	for _, c := range []struct {
		name, body string
		want       registry.Change
	}{
		{"push of a tagged image", `{"action":"INSERT","digest":"` + repo + `@` + arDigest + `","tag":"` + repo + `:1.1"}`,
			registry.Change{Host: "us-east1-docker.pkg.dev", Repository: "my-project/my-repo/hello-world", Tag: "1.1", Digest: arDigest}},
		{"push by digest", `{"action":"INSERT","digest":"` + repo + `@` + arDigest + `"}`,
			registry.Change{Host: "us-east1-docker.pkg.dev", Repository: "my-project/my-repo/hello-world", Digest: arDigest}},
		{"tag deleted", `{"action":"DELETE","tag":"` + repo + `:1.1"}`,
			registry.Change{Host: "us-east1-docker.pkg.dev", Repository: "my-project/my-repo/hello-world", Tag: "1.1", Deleted: true}},
		{"digest deleted", `{"action":"DELETE","digest":"` + repo + `@` + arDigest + `"}`,
			registry.Change{Host: "us-east1-docker.pkg.dev", Repository: "my-project/my-repo/hello-world", Digest: arDigest, Deleted: true}},
		{"Container Registry's host, an empty tag field", `{"action":"INSERT","digest":"gcr.io/my-project/hello-world@` + arDigest + `","tag":""}`,
			registry.Change{Host: "gcr.io", Repository: "my-project/hello-world", Digest: arDigest}},
		{"a field Google may add", `{"action":"INSERT","tag":"` + repo + `:v2","location":"us-east1"}`,
			registry.Change{Host: "us-east1-docker.pkg.dev", Repository: "my-project/my-repo/hello-world", Tag: "v2"}},
	} {
		ev, err := queue.DecodeBody([]byte(c.body))
		if err != nil || ev.Artifact == nil || ev.Reconcile != nil || ev.Commit != nil {
			t.Errorf("%s: %+v, %v", c.name, ev, err)
			continue
		}
		got, err := ev.Artifact.Change()
		if err != nil || got != c.want {
			t.Errorf("%s: change %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}

	for name, body := range map[string]string{
		"an action it never sends":     `{"action":"UPDATE","tag":"` + repo + `:1"}`,
		"no reference":                 `{"action":"INSERT"}`,
		"a tag without its host":       `{"action":"INSERT","tag":"hello-world:1.1"}`,
		"a tag without a tag":          `{"action":"DELETE","tag":"` + repo + `"}`,
		"a truncated digest":           `{"action":"INSERT","digest":"` + repo + `@sha256:6ec128e26cd5..."}`,
		"tag and digest disagree":      `{"action":"INSERT","digest":"` + repo + `@` + arDigest + `","tag":"us-east1-docker.pkg.dev/my-project/my-repo/other:1.1"}`,
		"an action that is not a word": `{"action":7}`,
		"null action":                  `{"action":null,"tag":"` + repo + `:1"}`,
	} {
		ev, err := queue.DecodeBody([]byte(body))
		if !failure.Is(err, failure.Invalid) || ev.Artifact == nil {
			t.Errorf("%s: %+v, %v; want an invalid Artifact Registry event", name, ev, err)
		}
	}
	// The other kinds are not mistaken for it, nor it for them.
	for _, body := range []string{`{"operation":"op","registry":"a"}`, `{"commit":{}}`, `{"registry":"a","event_at":"2026-01-02T03:04:05Z"}`} {
		if ev, err := queue.DecodeBody([]byte(body)); err != nil || ev.Artifact != nil {
			t.Errorf("%s: %+v, %v", body, ev, err)
		}
	}
	if _, err := queue.Decode([]byte(`{"action":"INSERT","tag":"` + repo + `:1"}`)); !failure.Is(err, failure.Invalid) {
		t.Errorf("an Artifact Registry event decoded as a reconcile message: %v", err)
	}
}

// Delivered as the gcr topic's push subscription delivers it, wrapped in
// the Pub/Sub envelope.
func TestArtifactRegistryEventFromEvent(t *testing.T) {
	body := `{"action":"INSERT","digest":"europe-docker.pkg.dev/p/r/redis@` + arDigest + `","tag":"europe-docker.pkg.dev/p/r/redis:latest"}`
	env := fmt.Sprintf(`{"message":{"data":%q,"messageId":"7","publishTime":"2026-01-02T03:04:05Z"},"subscription":"projects/p/subscriptions/specsync-gcr-push"}`,
		base64.StdEncoding.EncodeToString([]byte(body)))
	ev, id, err := queue.FromEvent([]byte(env))
	if err != nil || id != "7" || ev.Artifact == nil || ev.Artifact.Action != queue.ArtifactInsert || !strings.HasSuffix(ev.Artifact.Tag, ":latest") {
		t.Fatalf("FromEvent: %+v %s %v", ev, id, err)
	}
}
