package functions

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/examples"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/queue"
)

// lockedBuffer is the functions' log in a test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The registries file as terraform deploys it, a config bundle in Cloud
// Storage (here fake-gcs-server, reached as the functions reach Cloud
// Storage: STORAGE_EMULATOR_HOST for Application Default Credentials),
// and an edit of it, which every function takes up within the refresh
// interval with no new cold start: the registries a bootstrap fans out
// to, the webhooks (hook blocks), the registries a reconcile message can
// run (its dir source's files from the bundle) and those an Artifact
// Registry notification is routed to.
func TestConfigBundleEditReachesEveryFunction(t *testing.T) {
	for _, v := range []string{"FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"} {
		if os.Getenv(v) == "" {
			t.Fatalf("%s is not set: run the tests through `make test`", v)
		}
	}
	const token, hookSecret, refresh = "admin-token-0123456789abcdef", "bundle-hook-secret-0123456789", 300 * time.Millisecond
	saved, savedOut := registriesRefresh, LogOutput
	registriesRefresh = refresh
	logs := &lockedBuffer{}
	LogOutput = logs
	t.Cleanup(func() { registriesRefresh, LogOutput = saved, savedOut })

	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Stop)
	gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "deploy"})
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(gcs.URL(), "http://"))
	spec := func(name string) string {
		b, err := fs.ReadFile(examples.Registry, examples.RegistryDir+"/"+name+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write := func(registries string, files map[string]string) {
		b, err := json.Marshal(config.Bundle{Version: config.BundleVersion, Registries: registries, Files: files})
		if err != nil {
			t.Fatal(err)
		}
		gcs.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "deploy", Name: "specsync/registries.json"}, Content: b})
	}

	client, project := emulatortest.PubSub(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic, sub := "projects/"+project+"/topics/reconcile", "projects/"+project+"/subscriptions/pull"
	for _, name := range []string{topic, "projects/" + project + "/topics/commit"} {
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic}); err != nil {
		t.Fatal(err)
	}
	// published returns the registries of the messages published since
	// the last call, sorted.
	published := func() []string {
		t.Helper()
		var out []string
		for empty := 0; empty < 3; {
			resp, err := client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 100, ReturnImmediately: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ReceivedMessages) == 0 {
				empty++
				time.Sleep(50 * time.Millisecond)
				continue
			}
			var ids []string
			for _, m := range resp.ReceivedMessages {
				msg, err := queue.Decode(m.Message.Data)
				if err != nil {
					t.Fatal(err)
				}
				out, ids = append(out, msg.Registry), append(ids, m.AckId)
			}
			if err := client.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: ids}); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(out)
		return out
	}

	reg := emulatortest.Registry(t)
	label := base64.StdEncoding.EncodeToString([]byte("name: pg\ndescription: the pg service\nplans:\n  - name: default\n    description: the plan\n"))
	if _, err := emulator.PushSpecImage(ctx, reg.Host(), "team/pg", "latest", label, nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPECSYNC_TEST_BUNDLE_HOOK", hookSecret)
	t.Setenv("SPECSYNC_TEST_BUNDLE_REGISTRY", reg.Host())
	write(`registries:
  - name: bundled
    type: dir
    dir: {path: specs}
    hook: {type: bearer, secret_env: SPECSYNC_TEST_BUNDLE_HOOK}
`, map[string]string{"specs/redis.yaml": spec("redis")})

	env := lookup(map[string]string{
		"GOOGLE_CLOUD_PROJECT":  project,
		"LOG_LEVEL":             "debug",
		"SPECSYNC_REGISTRIES":   "gs://deploy/specsync/registries.json",
		"SPECSYNC_TOPIC":        topic,
		"SPECSYNC_COMMIT_TOPIC": "commit",
		"SPECSYNC_ADMIN_TOKEN":  token,
		"SPECSYNC_HOOK_WINDOW":  "10ms",
	})
	boot, err := newBootstrap(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	hooksH, err := newHooks(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := newReconcile(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	post := func(h http.Handler, path string, auth func(*http.Request), body string) int {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		auth(req)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	message := func(data []byte) event.Event {
		body, err := json.Marshal(map[string]any{"message": map[string]any{"data": data, "messageId": fmt.Sprint(time.Now().UnixNano())}})
		if err != nil {
			t.Fatal(err)
		}
		e := event.New()
		e.SetID("event-1")
		e.SetType("google.cloud.pubsub.topic.v1.messagePublished")
		e.SetSource("//pubsub.googleapis.com/projects/" + project + "/topics/reconcile")
		e.SetTime(time.Now())
		if err := e.SetData("application/json", body); err != nil {
			t.Fatal(err)
		}
		return e
	}
	eventFor := func(registry string) event.Event {
		data, err := queue.Message{Registry: registry, EventAt: time.Now()}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return message(data)
	}
	ref := reg.Host() + "/team/pg:latest"
	artifact := message(fmt.Appendf(nil, `{"action":"INSERT","tag":%q}`, ref))
	handle := func(e event.Event) {
		t.Helper()
		if err := rec.handle(ctx, e); err != nil {
			t.Fatalf("the reconcile function: %v", err)
		}
	}

	// As deployed.
	if code := post(boot, "/bootstrap", bearer(token), ""); code != http.StatusAccepted {
		t.Fatalf("POST /bootstrap: %d", code)
	}
	if got := published(); !slices.Equal(got, []string{"bundled"}) {
		t.Errorf("the bootstrap fans out to %v, want [bundled]", got)
	}
	if code := post(hooksH, "/hooks/bundled", bearer(hookSecret), `{"entries": []}`); code != http.StatusAccepted {
		t.Errorf("bundled's webhook: %d", code)
	}
	if code := post(hooksH, "/hooks/later", bearer(hookSecret), `{"entries": []}`); code != http.StatusNotFound {
		t.Errorf("a webhook the file does not have yet: %d", code)
	}
	published()
	handle(eventFor("later"))
	handle(artifact)
	for _, want := range []string{"dropping an event for a registry this deployment does not configure", "ignoring an Artifact Registry event for nothing a registry selects"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("before the edit, the reconcile function did not log %q", want)
		}
	}

	// Edited: bundled loses its hook; later (a dir source with files of
	// its own) and images (the OCI registry) come.
	write(`registries:
  - name: bundled
    type: dir
    dir: {path: specs}
  - name: later
    type: dir
    dir: {path: more}
    hook: {type: bearer, secret_env: SPECSYNC_TEST_BUNDLE_HOOK}
  - name: images
    type: oci
    oci: {host: "${SPECSYNC_TEST_BUNDLE_REGISTRY}", prefix: team, insecure: true}
`, map[string]string{"specs/redis.yaml": spec("redis"), "more/rabbitmq.yaml": spec("rabbitmq")})
	time.Sleep(refresh)

	// The bootstrap in progress is coalesced with; a dry run is another.
	if code := post(boot, "/bootstrap?dry_run=true", bearer(token), ""); code != http.StatusAccepted {
		t.Fatalf("POST /bootstrap?dry_run=true: %d", code)
	}
	if got := published(); !slices.Equal(got, []string{"bundled", "images", "later"}) {
		t.Errorf("after the edit, the bootstrap fans out to %v, want [bundled images later]", got)
	}
	if code := post(hooksH, "/hooks/later", bearer(hookSecret), `{"entries": []}`); code != http.StatusAccepted {
		t.Errorf("the webhook the edit added: %d", code)
	}
	if code := post(hooksH, "/hooks/bundled", bearer(hookSecret), `{"entries": []}`); code != http.StatusNotFound {
		t.Errorf("the webhook the edit removed: %d", code)
	}
	handle(eventFor("later"))
	handle(artifact)
	lines := logs.String()
	if !strings.Contains(lines, `"message":"Artifact Registry event handled"`) {
		t.Error("after the edit, the Artifact Registry event was not routed to images")
	}
	for _, registry := range []string{"later", "images"} {
		if !strings.Contains(lines, `"event":"run_summary"`) || !containsLine(lines, `"event":"run_summary"`, `"registry":"`+registry+`"`, `"result":"succeeded"`) {
			t.Errorf("after the edit, no successful run of %s:\n%s", registry, lines)
		}
	}
	if n := strings.Count(lines, "its new configuration is in use"); n != 3 {
		t.Errorf("%d functions logged the new configuration, want 3", n)
	}
}

// containsLine reports whether a line of logs holds every part.
func containsLine(logs string, parts ...string) bool {
	for _, l := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
