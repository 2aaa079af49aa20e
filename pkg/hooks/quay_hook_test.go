package hooks_test

import (
	"bytes"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/hooks"
)

// quayHookSecret is the Quay registry's hook secret in these tests.
const quayHookSecret = "quay-hook-secret-0123456789abcdef"

// Quay's repository notification, as Quay sends it (the event data as
// the body, the webhook URL's user information as HTTP Basic), through
// the endpoint to the Pub/Sub emulator: a push of the registry's tag
// enqueues that entry; a push of another tag, of a repository the
// registry denies or of another namespace, and Quay's other events,
// enqueue nothing; a wrong password or a bearer header is refused.
func TestHookQuayNotifications(t *testing.T) {
	t.Setenv("SPECSYNC_TEST_QUAY_HOOK", quayHookSecret)
	e := newHookEnv(t, `registries:
  - name: quay
    type: quay
    deny: ["internal/.*"]
    quay: {namespace: acme}
    hook: {type: basic, secret_env: SPECSYNC_TEST_QUAY_HOOK}
`, 10*time.Millisecond, true)
	post := func(password string, body []byte, headers ...string) answer {
		t.Helper()
		u, err := url.Parse(e.url + "/hooks/quay")
		if err != nil {
			t.Fatal(err)
		}
		if password != "" {
			u.User = url.UserPassword("specsync", password)
		}
		req, err := http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return e.do(req)
	}
	push := fixture(t, "quay-push.json")
	with := func(old, new string) []byte { return bytes.ReplaceAll(push, []byte(old), []byte(new)) }
	for _, c := range []struct {
		name    string
		body    []byte
		entries []string
	}{
		{"a push of latest and 7.2", push, []string{"redis"}},
		{"a push of 7.2 alone", with(`"latest", `, ""), nil},
		{"a denied repository", with("acme/redis", "acme/internal/redis"), nil},
		{"another namespace", with("acme/redis", "other/redis"), nil},
		{"a build", []byte(`{"repository":"acme/db","namespace":"acme","name":"db","docker_url":"quay.io/acme/db","homepage":"https://quay.io/repository/acme/db/build/b","build_id":"b","docker_tags":["latest"]}`), nil},
	} {
		h := post(quayHookSecret, c.body).accepted(t)
		if h.Kind != hooks.KindQuay || h.Enqueued != (len(c.entries) > 0) || !slices.Equal(h.Entries, append([]string{}, c.entries...)) {
			t.Errorf("%s: %+v, want %s entries %v", c.name, h, hooks.KindQuay, c.entries)
		}
	}
	post("quay-hook-wrong-0123456789abcdef", push).error(t, http.StatusUnauthorized, "Unauthorized", "not the hook's secret")
	// A refusal asks for Basic credentials (RFC 7235).
	resp, err := http.Post(e.url+"/hooks/quay", "application/json", bytes.NewReader(push))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(got, "Basic ") {
		t.Errorf("without credentials: %d, WWW-Authenticate %q; want 401 asking for Basic", resp.StatusCode, got)
	}
	post("", push, "Authorization", "Bearer "+quayHookSecret).error(t, http.StatusUnauthorized, "Unauthorized", "needs an Authorization: Basic header")

	var got []string
	for _, m := range e.published() {
		got = append(got, m.Registry+":"+strings.Join(m.Entries, ","))
	}
	if !slices.Equal(got, []string{"quay:redis"}) {
		t.Errorf("published %v, want one message for quay:redis", got)
	}
	if strings.Contains(e.logs.String(), quayHookSecret) {
		t.Errorf("the hook secret is in the log:\n%s", e.logs.String())
	}
}
