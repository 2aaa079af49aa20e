package hooks_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/hooks"
)

const gitlabSecret = "canary-gitlab-hook-secret-0123456789"

// gitRegistriesYAML: the GitHub repository of GitHub's examples and the
// GitLab project of GitLab's, each read by a git source, with their
// hooks; and an OCI registry with an HMAC hook, which reads no Git
// repository.
func gitRegistriesYAML(t *testing.T) string {
	t.Setenv("SPECSYNC_TEST_GH_HOOK", hmacSecret)
	t.Setenv("SPECSYNC_TEST_GL_HOOK", gitlabSecret)
	return `registries:
  - name: gh
    type: git
    deny: ["specs/internal"]
    git: {url: "https://github.com/codertocat/hello-world.git", ref: main, paths: ["specs/*.yaml"]}
    hook: {type: hmac, secret_env: SPECSYNC_TEST_GH_HOOK}
  - name: gl
    type: git
    git: {url: "https://gitlab.example.com/mike/diaspora", ref: refs/heads/main, paths: ["specs/*.yaml"]}
    hook: {type: gitlab_token, secret_env: SPECSYNC_TEST_GL_HOOK}
  - name: images
    type: oci
    oci: {host: ghcr.io, prefix: codertocat}
    hook: {type: hmac, secret_env: SPECSYNC_TEST_GH_HOOK}
`
}

// edit changes a JSON fixture: each key of set is a top-level field.
func edit(t *testing.T, body []byte, set map[string]any) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		p[k] = v
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// manySpecs are n spec paths.
func manySpecs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("specs/s%d.yaml", i)
	}
	return out
}

func gitlab(token, event string) []string {
	return []string{hooks.GitLabTokenHeader, token, hooks.GitLabEventHeader, event}
}

// A push names the entries of the paths it touched that the registry
// selects; a push to another ref or repository, or touching no selected
// path, enqueues nothing; one that cannot list every path it changed (a
// new, deleted or forced ref, a payload short of commits) enqueues the
// whole registry. Published messages are exactly those.
func TestGitPushHooks(t *testing.T) {
	e := newHookEnv(t, gitRegistriesYAML(t), 10*time.Millisecond, true)
	gh, gl := fixture(t, "github-push.json"), fixture(t, "gitlab-push.json")
	onlyPaths := func(body []byte, paths ...string) []byte {
		return edit(t, body, map[string]any{"commits": []any{map[string]any{"added": paths, "modified": []string{}, "removed": []string{}}}, "total_commits_count": 1})
	}
	commits := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"modified": []string{fmt.Sprintf("specs/s%d.yaml", i)}}
		}
		return out
	}
	for _, c := range []struct {
		name, registry string
		body           []byte
		headers        func(body []byte) []string
		kind           string
		entries        []string
		whole          bool
	}{
		{"github push", "gh", gh, nil, hooks.KindGitHub, []string{"specs/cache", "specs/db", "specs/old"}, false},
		{"github push of a denied and an unselected path", "gh", onlyPaths(gh, "specs/internal.yaml", "notes/x.yaml", "specs/a.json"), nil, hooks.KindGitHub, nil, false},
		{"github push to another branch", "gh", edit(t, gh, map[string]any{"ref": "refs/heads/dev"}), nil, hooks.KindGitHub, nil, false},
		{"github push to another repository", "gh", edit(t, gh, map[string]any{"repository": map[string]any{"clone_url": "https://github.com/codertocat/other.git"}}), nil, hooks.KindGitHub, nil, false},
		{"github forced push", "gh", edit(t, gh, map[string]any{"forced": true}), nil, hooks.KindGitHub, nil, true},
		{"github branch deleted", "gh", edit(t, gh, map[string]any{"deleted": true, "after": strings.Repeat("0", 40), "commits": []any{}}), nil, hooks.KindGitHub, nil, true},
		{"github push of 20 commits", "gh", edit(t, gh, map[string]any{"commits": commits(20)}), nil, hooks.KindGitHub, nil, true},
		{"github push of more specs than a request names", "gh", onlyPaths(gh, manySpecs(hooks.MaxRequestEntries+1)...), nil, hooks.KindGitHub, nil, true},
		{"github push to a registry that reads no repository", "images", gh, nil, hooks.KindGitHub, nil, false},
		{"gitlab push", "gl", gl, func([]byte) []string { return gitlab(gitlabSecret, "Push Hook") }, hooks.KindGitLab, []string{"specs/cache", "specs/db"}, false},
		{"gitlab push listing 2 of 25 commits", "gl", edit(t, gl, map[string]any{"total_commits_count": 25}), func([]byte) []string { return gitlab(gitlabSecret, "Push Hook") }, hooks.KindGitLab, nil, true},
		{"gitlab tag push", "gl", edit(t, gl, map[string]any{"ref": "refs/tags/main"}), func([]byte) []string { return gitlab(gitlabSecret, "Tag Push Hook") }, hooks.KindGitLab, nil, false},
		{"gitlab merge request", "gl", []byte(`{"object_kind":"merge_request"}`), func([]byte) []string { return gitlab(gitlabSecret, "Merge Request Hook") }, hooks.KindGitLab, nil, false},
	} {
		headers := signed(hmacSecret, c.body, "push")
		if c.headers != nil {
			headers = c.headers(c.body)
		}
		h := e.post(c.registry, c.body, headers...).accepted(t)
		enqueued := len(c.entries) > 0 || c.whole
		if h.Kind != c.kind || h.Enqueued != enqueued || h.WholeRegistry != c.whole || !slices.Equal(h.Entries, append([]string{}, c.entries...)) {
			t.Errorf("%s: %+v, want %s entries %v whole %v", c.name, h, c.kind, c.entries, c.whole)
		}
	}
	got := map[string]map[string]bool{}
	for _, m := range e.published() {
		if got[m.Registry] == nil {
			got[m.Registry] = map[string]bool{}
		}
		if len(m.Entries) == 0 {
			got[m.Registry]["(whole)"] = true
		}
		for _, en := range m.Entries {
			got[m.Registry][en] = true
		}
	}
	want := map[string][]string{"gh": {"(whole)", "specs/cache", "specs/db", "specs/old"}, "gl": {"(whole)", "specs/cache", "specs/db"}}
	for reg, names := range want {
		for _, n := range names {
			if !got[reg][n] {
				t.Errorf("no message for %s names %s: %v", reg, n, got)
			}
		}
		if len(got[reg]) != len(names) {
			t.Errorf("%s: published %v, want only %v", reg, got[reg], names)
		}
	}
	if len(got["images"]) > 0 {
		t.Errorf("a push enqueued a run of a registry that reads no Git repository: %v", got["images"])
	}
	if strings.Contains(e.logs.String(), gitlabSecret) {
		t.Error("the GitLab secret is in the log")
	}
}

// A gitlab_token hook takes exactly one X-Gitlab-Token header equal to
// its secret; anything else is refused before the payload is read, and
// nothing is published.
func TestGitLabTokenHook(t *testing.T) {
	e := newHookEnv(t, gitRegistriesYAML(t), 10*time.Millisecond, true)
	body := fixture(t, "gitlab-push.json")
	for name, headers := range map[string][]string{
		"no token":      {hooks.GitLabEventHeader, "Push Hook"},
		"wrong token":   gitlab(gitlabSecret+"x", "Push Hook"),
		"a prefix":      gitlab(gitlabSecret[:20], "Push Hook"),
		"an hmac":       signed(gitlabSecret, body, "push"),
		"bearer secret": {"Authorization", "Bearer " + gitlabSecret, hooks.GitLabEventHeader, "Push Hook"},
	} {
		a := e.post("gl", body, headers...)
		a.error(t, http.StatusUnauthorized, "Unauthorized", hooks.GitLabTokenHeader)
		if bytes.Contains(a.body, []byte(gitlabSecret)) {
			t.Errorf("%s: the answer shows the secret", name)
		}
	}
	req, err := http.NewRequest(http.MethodPost, e.url+"/hooks/gl", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(hooks.GitLabEventHeader, "Push Hook")
	req.Header.Add(hooks.GitLabTokenHeader, "not-it")
	req.Header.Add(hooks.GitLabTokenHeader, gitlabSecret)
	e.do(req).error(t, http.StatusUnauthorized, "Unauthorized", "one "+hooks.GitLabTokenHeader)
	if got := e.published(); len(got) != 0 {
		t.Errorf("refused requests published %v", got)
	}
	if h := e.post("gl", body, gitlab(gitlabSecret, "Push Hook")...).accepted(t); !h.Enqueued {
		t.Errorf("the right token: %+v", h)
	}
}

// A push payload that is not one is refused whole (400), naming what is
// wrong.
func TestGitPushPayloadRefused(t *testing.T) {
	e := newHookEnv(t, gitRegistriesYAML(t), 10*time.Millisecond, true)
	for name, c := range map[string]struct {
		body []byte
		says string
	}{
		"no ref":         {[]byte(`{"commits":[]}`), "is not a full ref name"},
		"a short ref":    {[]byte(`{"ref":"main","commits":[]}`), "is not a full ref name"},
		"an empty path":  {[]byte(`{"ref":"refs/heads/main","commits":[{"added":[""]}]}`), "commits[0] names a path"},
		"paths not list": {[]byte(`{"ref":"refs/heads/main","commits":[{"added":"specs/a.yaml"}]}`), "not a GitHub push event"},
	} {
		a := e.post("gh", c.body, signed(hmacSecret, c.body, "push")...)
		a.error(t, http.StatusBadRequest, "MalformedJSON", c.says)
		_ = name
	}
	if got := e.published(); len(got) != 0 {
		t.Errorf("refused payloads published %v", got)
	}
}
