package hooks

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/registry"
)

// Quay's notifications: a push is a change per updated tag; every other
// event of a repository (it has docker_url and repository, no
// updated_tags) is ignored with the reason.
func TestDecodeQuayPayloads(t *testing.T) {
	for _, c := range []struct {
		name string
		body []byte
		want []event
	}{
		{"a push of two tags", fixture(t, "quay-push.json"), []event{
			change(registry.Change{Repository: "acme/redis", Tag: "latest"}),
			change(registry.Change{Repository: "acme/redis", Tag: "7.2"}),
		}},
		{"a push without repository, from namespace and name", []byte(`{"namespace":"acme","name":"tools/db","docker_url":"quay.io/acme/tools/db","repository":"","updated_tags":["latest"]}`), []event{
			change(registry.Change{Repository: "acme/tools/db", Tag: "latest"}),
		}},
		{"a push that updated no tag", []byte(`{"repository":"acme/redis","docker_url":"quay.io/acme/redis","updated_tags":[]}`), []event{{skip: "Quay push that updated no tag"}}},
		{"a build", []byte(`{"repository":"acme/redis","namespace":"acme","name":"redis","docker_url":"quay.io/acme/redis","homepage":"https://quay.io/repository/acme/redis/build/x","build_id":"x","docker_tags":["latest"],"trigger_kind":"GitHub"}`),
			[]event{{skip: "Quay notification without updated_tags (a build, scan, mirror or expiry event)"}}},
	} {
		kind, got, err := decodePayload(nil, c.body)
		if err != nil || kind != KindQuay || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %s %s, %v; want %s %s", c.name, kind, show(got), err, KindQuay, show(c.want))
		}
	}
	for _, c := range []struct {
		name, body, says string
	}{
		{"no repository at all", `{"repository":"","docker_url":"quay.io/","updated_tags":["latest"]}`, "Quay notification: the repository is empty"},
		{"an empty tag", `{"repository":"acme/redis","docker_url":"quay.io/acme/redis","updated_tags":["latest",""]}`, "updated_tags[1] is empty"},
		{"tags not a list", `{"repository":"acme/redis","docker_url":"quay.io/acme/redis","updated_tags":"latest"}`, "not a Quay repository notification"},
		{"a repository too long", `{"repository":"` + strings.Repeat("a", 513) + `","docker_url":"x","updated_tags":["latest"]}`, "over 512 bytes"},
	} {
		_, _, err := decodePayload(nil, []byte(c.body))
		var pe errPayload
		if !errors.As(err, &pe) || pe.code != "MalformedJSON" || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want MalformedJSON saying %q", c.name, err, c.says)
		}
	}
	// Docker Hub's webhook names a repository too, but no docker_url: not
	// taken for Quay's.
	_, _, err := decodePayload(nil, []byte(`{"push_data":{"tag":"latest"},"repository":{"repo_name":"a/b"}}`))
	if err == nil || !strings.Contains(err.Error(), "a Quay repository notification (repository, docker_url)") {
		t.Errorf("unknown payload: %v", err)
	}
}

// A basic hook takes HTTP Basic whose password is its secret, whatever
// the user name; nothing else.
func TestVerifyBasicHook(t *testing.T) {
	const secret, other = "quay-hook-secret-0123456789", "quay-hook-wrong-0123456789"
	t.Setenv("SPECSYNC_TEST_QUAY_HOOK", secret)
	var logs strings.Builder
	v := newVerifier(config.Hook{Type: config.HookBasic, SecretEnv: "SPECSYNC_TEST_QUAY_HOOK"}, slog.New(slog.NewJSONHandler(&logs, nil)))
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, c := range []struct {
		header []string
		ok     bool
	}{
		{[]string{"Basic " + b64("specsync:"+secret)}, true},
		{[]string{"basic " + b64(":"+secret)}, true},
		{[]string{"Basic " + b64("specsync:"+other)}, false},
		{[]string{"Basic " + b64(secret+":")}, false},
		{[]string{"Basic " + b64(secret)}, false},
		{[]string{"Basic " + secret}, false},
		{[]string{"Bearer " + secret}, false},
		{[]string{"Basic " + b64("a:"+other), "Basic " + b64("a:"+secret)}, false},
		{nil, false},
	} {
		r := httptest.NewRequest("POST", "/hooks/quay", nil)
		for _, h := range c.header {
			r.Header.Add("Authorization", h)
		}
		if err := v.verify(r, nil); (err == nil) != c.ok {
			t.Errorf("Authorization %q: %v, want accepted %v", c.header, err, c.ok)
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the secret is in the log: %s", logs.String())
	}
}
