package hooks

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/registry"
)

// Git push webhooks: GitHub's push event (X-GitHub-Event: push, signed as
// every GitHub event) and GitLab's Push Hook and Tag Push Hook
// (X-Gitlab-Event, authenticated by X-Gitlab-Token: hook type
// gitlab_token). Each is one event naming the ref and the paths the
// pushed commits touched; the registry's git source maps it to entries
// (registry.PushSelector).
const (
	KindGitLab = "gitlab"
	// GitLabEventHeader names a GitLab webhook's event.
	GitLabEventHeader = "X-Gitlab-Event"
	// GitLabTokenHeader carries a GitLab webhook's secret token.
	GitLabTokenHeader = "X-Gitlab-Token"
)

// gitHubPushMaxCommits is the number of commits from which a GitHub push
// is taken for one that may not list them all: GitHub documents a limit
// of 20 commits on the payload (for some deliveries), and a path touched
// only by a commit left out would be missed.
const gitHubPushMaxCommits = 20

// zeroCommit is the object id a push names as "before" for a new ref and
// as "after" for a deleted one.
const zeroCommit = "0000000000000000000000000000000000000000"

// gitCommitPaths are the paths one commit of a push touched (GitHub's
// and GitLab's commit objects have the same three lists).
type gitCommitPaths struct {
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Removed  []string `json:"removed"`
}

// decodeGitHubPush reads GitHub's push event ("Webhook events and
// payloads", push). A new or deleted ref, a forced push, or 20 commits or
// more: the push may have changed paths it does not list.
func decodeGitHubPush(body []byte) ([]event, error) {
	var p struct {
		Ref     string           `json:"ref"`
		Before  string           `json:"before"`
		After   string           `json:"after"`
		Created bool             `json:"created"`
		Deleted bool             `json:"deleted"`
		Forced  bool             `json:"forced"`
		Commits []gitCommitPaths `json:"commits"`
		// GitHub's push event gives the repository's web URL as url too.
		Repository *struct {
			CloneURL string `json:"clone_url"`
			HTMLURL  string `json:"html_url"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, malformed("not a GitHub push event: %v", err)
	}
	var urls []string
	if r := p.Repository; r != nil {
		urls = nonEmpty(r.CloneURL, r.HTMLURL)
	}
	complete := !p.Created && !p.Deleted && !p.Forced && p.Before != zeroCommit && p.After != zeroCommit &&
		len(p.Commits) < gitHubPushMaxCommits
	return gitPush("GitHub push event", urls, p.Ref, p.Commits, complete)
}

// decodeGitLab reads GitLab's Push Hook and Tag Push Hook (GitLab's
// "Webhook events", push and tag events); other GitLab events change
// nothing a run reads. GitLab lists at most 20 commits and counts them
// all in total_commits_count; a push listing fewer, or creating or
// deleting its ref, may have changed paths it does not list.
func decodeGitLab(kind string, body []byte) ([]event, error) {
	if kind != "Push Hook" && kind != "Tag Push Hook" {
		return []event{{skip: "GitLab event " + kind}}, nil
	}
	var p struct {
		Ref               string           `json:"ref"`
		Before            string           `json:"before"`
		After             string           `json:"after"`
		TotalCommitsCount int              `json:"total_commits_count"`
		Commits           []gitCommitPaths `json:"commits"`
		Project           *struct {
			GitHTTPURL string `json:"git_http_url"`
			WebURL     string `json:"web_url"`
		} `json:"project"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, malformed("not a GitLab %s: %v", kind, err)
	}
	var urls []string
	if r := p.Project; r != nil {
		urls = nonEmpty(r.GitHTTPURL, r.WebURL)
	}
	complete := p.Before != zeroCommit && p.After != zeroCommit && p.TotalCommitsCount == len(p.Commits)
	return gitPush("GitLab "+kind, urls, p.Ref, p.Commits, complete)
}

// gitPush is the one event of a push: its ref, and the paths of its
// commits, each once.
func gitPush(where string, urls []string, ref string, commits []gitCommitPaths, complete bool) ([]event, error) {
	if ref == "" || len(ref) > queue.MaxEntryBytes || !strings.HasPrefix(ref, "refs/") {
		return nil, malformed("%s: ref %q is not a full ref name (refs/heads/..., refs/tags/...)", where, ref)
	}
	var paths []string
	for i, c := range commits {
		for _, p := range slices.Concat(c.Added, c.Modified, c.Removed) {
			if p == "" || len(p) > queue.MaxEntryBytes || !utf8.ValidString(p) {
				return nil, malformed("%s: commits[%d] names a path that is empty, over %d bytes or not UTF-8", where, i, queue.MaxEntryBytes)
			}
			if !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
		}
	}
	// A push that lists no path at all says nothing of what it changed.
	complete = complete && len(paths) > 0
	return []event{{push: &registry.GitPush{URLs: urls, Ref: ref, Paths: paths, Complete: complete}}}, nil
}

func nonEmpty(ss ...string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return s == "" })
}

// selectPush is what a push asks of a registry: the entries of the paths
// it touched that the registry's git source selects, or the whole
// registry (a push that cannot list its paths, or more entries than one
// request names). A registry whose source reads no Git repository is
// not concerned (ok false).
func selectPush(src registry.Source, p registry.GitPush) (entries []string, whole, ok bool) {
	ps, ok := src.(registry.PushSelector)
	if !ok {
		return nil, false, false
	}
	entries, whole = ps.SelectPush(p)
	if len(entries) > MaxRequestEntries {
		return nil, true, true
	}
	return entries, whole, true
}

// resolvePush adds what a push asks for to a request (Service.resolve).
func resolvePush(src registry.Source, p registry.GitPush, req *request, t *tally, add func(string)) {
	es, whole, ok := selectPush(src, p)
	switch {
	case !ok:
		t.skipped["a Git push, and the registry reads no Git repository"]++
	case whole:
		req.whole, t.whole = true, true
	case len(es) == 0:
		t.unselected++
	default:
		t.selected++
		for _, e := range es {
			add(e)
		}
	}
}
