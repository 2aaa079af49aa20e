// Package kindtest registers a kind of source that pkg/config has never
// heard of and loads, checks and describes it: what adding a source (git,
// quay) would do, without touching pkg/config. It is a package of its own
// so that the kind it registers is no type of pkg/config's own tests.
package kindtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/registry"
)

// fakeBlock is the fake block: a url and an auth, as a source has them.
type fakeBlock struct {
	URL     string            `json:"url"`
	Timeout registry.Duration `json:"timeout,omitempty"`
	Auth    registry.Auth     `json:"auth,omitempty"`
}

func (b *fakeBlock) Build(bc registry.BuildContext) (registry.Source, error) {
	if b.URL == "" {
		return nil, errors.New("fake.url is required")
	}
	if err := b.Auth.Validate(); err != nil {
		return nil, err
	}
	return registry.NewDir(registry.DirConfig{FS: fstest.MapFS{}, Root: "fake:" + b.URL, Filter: bc.Filter})
}

func (b *fakeBlock) Describe() registry.Description {
	return registry.Description{Location: "fake " + b.URL, Auth: b.Auth.Type}
}

func init() {
	registry.Register(registry.Kind{Type: "fake", New: func() registry.Block { return new(fakeBlock) }, Credentials: registry.AuthCredentials, Order: 1 << 20})
}

func TestARegisteredKindLoadsWithoutChangesToConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(`registries:
  - name: f
    type: fake
    fake: {url: "https://fake.example.com", timeout: 5s, auth: {type: token, token_env: FAKE_TOKEN}}
`), "f.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Registries[0]
	if b, ok := r.Block().(*fakeBlock); !ok || b.URL != "https://fake.example.com" || b.Auth.TokenEnv != "FAKE_TOKEN" {
		t.Errorf("block %#v", r.Block())
	}
	if got := fmt.Sprint(r.Source); got != "dir fake:https://fake.example.com" {
		t.Errorf("source %s", got)
	}
	if d := r.Describe(); d.Type != "fake" || d.Location != "fake https://fake.example.com" || d.Auth != "token" {
		t.Errorf("describe %+v", d)
	}
	kind, _ := registry.LookupKind("fake")
	if envs, files, err := registry.CredentialRefs(kind, r.Block()); err != nil || strings.Join(envs, ",") != "FAKE_TOKEN" || len(files) != 0 {
		t.Errorf("credentials %v %v %v", envs, files, err)
	}

	// Written out, the registry has its block again, and reads back the
	// same.
	out, err := json.Marshal(cfg.File)
	if err != nil {
		t.Fatal(err)
	}
	again, err := config.Parse(out, "f.json", ".")
	if err != nil {
		t.Fatalf("%s does not load again: %v", out, err)
	}
	if b := again.Registries[0].Block().(*fakeBlock); b.URL != "https://fake.example.com" || b.Auth.TokenEnv != "FAKE_TOKEN" || b.Timeout != registry.Duration(5*time.Second) {
		t.Errorf("written and read again: %s, %+v", out, b)
	}

	// Strict decoding: an unknown field of the block fails the load.
	if _, err := config.Parse([]byte("registries:\n- name: f\n  type: fake\n  fake: {url: u, colour: red}\n"), "f.yaml", "."); err == nil || !strings.Contains(err.Error(), `unknown field "colour"`) {
		t.Errorf("unknown field: %v", err)
	}

	// config check reports the block's problems at their lines.
	res := config.Check([]byte(`registries:
  - name: f
    type: fake
    fake:
      url: "https://fake.example.com"
      colour: red
      timeout: [1]
  - name: g
    type: fake
    fake:
      auth: {type: token}
`), "f.yaml", ".")
	got := map[int]string{}
	for _, p := range res.Problems {
		got[p.Line] += p.Message + "|"
	}
	for line, want := range map[int]string{
		6: "registries[0].fake.colour: unknown field",
		7: "registries[0].fake.timeout: want a duration",
		8: "registries[1] (g): fake.url is required", // missing: at the registry
	} {
		if !strings.Contains(got[line], want) {
			t.Errorf("line %d: got %q, want %q", line, got[line], want)
		}
	}
	if len(res.Problems) != 3 {
		t.Errorf("problems %v, want 3", res.Problems)
	}
}
