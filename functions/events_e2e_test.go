package functions_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
)

// hookCanary is the webhook secret of the events test: it must appear in
// no log line and no answer.
const hookCanary = "canary-e2e-hook-secret-0123456789"

func (s *stack) logText() string {
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	return s.logs.String()
}

// waitForService polls the catalog until it offers a service of that
// name, which no bootstrap was asked for: an event brought it.
func (s *stack) waitForService(name string) {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, _ := s.catalog()
		if strings.Contains(","+names(c)+",", ","+name+",") {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the catalog offers %q 60s after the event, not %s", names(c), name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func specLabel(name string) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "name: %s\ndescription: the %s service\nbindable: true\nplans:\n  - name: default\n    description: the plan\n", name, name))
}

// Events, end to end through the local stack and no bootstrap: an
// Artifact Registry notification published to the project's gcr topic
// (pushed to the reconcile function through functions-framework-go, as
// the terraform subscription does) and a webhook to the bootstrap
// function each bring the entry they name into the catalog. What else the
// gcr topic carries (garbage, an action it never sends, a push by digest
// alone, another repository) is acknowledged and logged at debug level
// once, not redelivered; a forged webhook is refused.
func TestE2EEvents(t *testing.T) {
	t.Parallel()
	reg := emulatortest.Registry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	redis, err := emulator.PushSpecImage(ctx, reg.Host(), "team/redis", "latest", specLabel("redis"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := startStack(t, fmt.Sprintf(`registries:
  - name: images
    type: oci
    oci: {host: %q, prefix: team, insecure: true}
    hook: {type: bearer, secret_env: E2E_IMAGES_HOOK}
`, reg.Host()), "E2E_IMAGES_HOOK="+hookCanary, "LOG_LEVEL=debug")

	// Artifact Registry's notification of the push, on the gcr topic.
	client, err := pubsub.NewClient(ctx, s.project)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	topic := emulatortest.PushTopic(t, client, s.project, "gcr", s.pushURL, false, time.Minute)
	gcr := client.Publisher(topic)
	defer gcr.Stop()
	publish := func(body string) {
		t.Helper()
		if _, err := gcr.Publish(ctx, &pubsub.Message{Data: []byte(body)}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ref := reg.Host() + "/team/redis"
	publish(fmt.Sprintf(`{"action":"INSERT","digest":"%s@%s","tag":"%s:latest"}`, ref, redis, ref))
	s.waitForService("redis")

	// A webhook for a push that came after.
	if _, err := emulator.PushSpecImage(ctx, reg.Host(), "team/pg", "latest", specLabel("pg"), nil); err != nil {
		t.Fatal(err)
	}
	envelope := `{"events":[{"action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":"team/pg","tag":"latest"}}]}`
	r := s.do(http.MethodPost, "/hooks/images", "", strings.NewReader(envelope), "Authorization", "Bearer "+hookCanary)
	var h api.HookAccepted
	r.json(t, &h)
	if r.status != http.StatusAccepted || !h.Enqueued || len(h.Entries) != 1 || h.Entries[0] != "pg" {
		t.Fatalf("the webhook: %d %s", r.status, r.body)
	}
	s.waitForService("pg")
	if r := s.do(http.MethodPost, "/hooks/images", "", strings.NewReader(envelope), "Authorization", "Bearer not-the-secret-0123456789"); r.status != http.StatusUnauthorized {
		t.Errorf("a forged webhook: %d %s", r.status, r.body)
	}
	if r := s.do(http.MethodPost, "/hooks/nope", "", strings.NewReader(envelope), "Authorization", "Bearer "+hookCanary); r.status != http.StatusNotFound {
		t.Errorf("a webhook for no registry: %d %s", r.status, r.body)
	}
	// No registry named at all: a 404 of the hooks function, not a
	// redirect that a sender would follow.
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/hooks", "/hooks/"} {
		req, _ := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(envelope))
		req.Header.Set("Authorization", "Bearer "+hookCanary)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s: %d, want 404", path, resp.StatusCode)
		}
	}

	// Noise on the gcr topic: each acknowledged at once (a refused push
	// would come back within the subscription's 100 ms to 1 s backoff).
	publish(`not json at all`)
	publish(fmt.Sprintf(`{"action":"UPDATE","tag":"%s:latest"}`, ref))
	publish(fmt.Sprintf(`{"action":"INSERT","digest":"%s@%s"}`, ref, redis))
	publish(fmt.Sprintf(`{"action":"INSERT","tag":"%s/other/redis:latest"}`, reg.Host()))
	want := map[string]int{
		"ignoring a message on the gcr topic that is not an Artifact Registry event": 1,
		"ignoring an Artifact Registry message that is not one it sends":             1,
		"ignoring an Artifact Registry event for nothing a registry selects":         2,
	}
	deadline := time.Now().Add(30 * time.Second)
	for !logged(s.logText(), want) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // long enough for any redelivery to show
	logs := s.logText()
	for msg, n := range want {
		if got := strings.Count(logs, `"message":"`+msg+`"`); got != n {
			t.Errorf("%q logged %d times, want %d (once per message: acknowledged, not redelivered)", msg, got, n)
		}
	}
	if strings.Contains(logs, "dropping an undecodable event") {
		t.Error("noise on the gcr topic was logged as an error")
	}
	if strings.Contains(logs, hookCanary) || strings.Contains(string(r.body), hookCanary) {
		t.Error("the hook's secret is in the stack's log or an answer")
	}
}

func logged(logs string, want map[string]int) bool {
	for msg, n := range want {
		if strings.Count(logs, `"message":"`+msg+`"`) < n {
			return false
		}
	}
	return true
}
