package config_test

import (
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
)

// A hook block names its type and where its secret is; every mistake is
// a load error that says which field, and `config check` puts it at that
// field's line.
func TestHookBlock(t *testing.T) {
	const head = "registries:\n- name: a\n  type: oci\n  oci: {host: r.example.com}\n"
	cfg, err := config.Parse([]byte(head+"  hook: {type: hmac, secret_env: SPECSYNC_TEST_HOOK_SECRET_NOT_SET}\n"), "test", ".")
	if err != nil {
		t.Fatalf("a hook naming an unset variable must load (the secret is read on use): %v", err)
	}
	if h := cfg.Registries[0].Hook; h == nil || h.Type != config.HookHMAC || h.SecretEnv != "SPECSYNC_TEST_HOOK_SECRET_NOT_SET" {
		t.Fatalf("hook %+v", h)
	}
	if _, err := config.Parse([]byte(head+"  hook: {type: bearer, secret_file: /secrets/hook/token}\n"), "test", "."); err != nil {
		t.Fatalf("a bearer hook with a file: %v", err)
	}
	if cfg, err := config.Parse([]byte(head), "test", "."); err != nil || cfg.Registries[0].Hook != nil {
		t.Fatalf("no hook block: %+v, %v", cfg, err)
	}
	for name, c := range map[string]struct{ hook, want string }{
		"no type":           {"{secret_env: S}", "hook.type is required (bearer, hmac, basic or gitlab_token)"},
		"unknown type":      {"{type: digest, secret_env: S}", `hook.type "digest" is not one of bearer, hmac, basic, gitlab_token`},
		"no secret":         {"{type: bearer}", "hook.secret_env or hook.secret_file is required"},
		"two secrets":       {"{type: bearer, secret_env: S, secret_file: /s}", "hook.secret_env and hook.secret_file: set only one"},
		"not an env name":   {"{type: hmac, secret_env: 'MY-SECRET'}", `hook.secret_env "MY-SECRET" is not an environment variable name`},
		"the secret itself": {"{type: hmac, secret: s3cr3t}", "unknown field"},
	} {
		_, err := config.Parse([]byte(head+"  hook: "+c.hook+"\n"), "test", ".")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}

	src := `registries:
  - name: a
    type: oci
    oci: {host: r.example.com}
    hook:
      type: hmac
      secret_env: S
      secret_file: /s
  - name: b
    type: http
    http: {url: "https://example.com/i.yaml"}
    hook:
      type: signature
      secret_env: T
  - name: c
    type: dir
    dir: {embedded: true}
    hook:
      type: bearer
`
	res := config.Check([]byte(src), "f.yaml", ".")
	got := map[int]string{}
	for _, p := range res.Problems {
		got[p.Line] += p.Message + "|"
	}
	for line, want := range map[int]string{
		7:  "registries[0] (a): hook.secret_env and hook.secret_file: set only one",
		13: `registries[1] (b): hook.type "signature" is not one of bearer, hmac, basic`,
		18: "registries[2] (c): hook.secret_env or hook.secret_file is required",
	} {
		if !strings.Contains(got[line], want) {
			t.Errorf("line %d: got %q, want %q (all: %+v)", line, got[line], want, res.Problems)
		}
	}
	if len(res.Problems) != 3 {
		t.Errorf("%d problems, want 3: %+v", len(res.Problems), res.Problems)
	}
	// Printing a hook says where the secret is, never more.
	if s := (config.Hook{Type: "hmac", SecretFile: "/secrets/h"}).String(); s != "hmac(secret from file /secrets/h)" {
		t.Errorf("String() = %q", s)
	}
}
