package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/registry"
)

// Payload kinds, as HookAccepted.Kind names them.
const (
	KindDistribution = "distribution"
	KindHarbor       = "harbor"
	KindGitHub       = "github"
	KindEntries      = "entries"
)

// GitHubEventHeader names a GitHub webhook's event.
const GitHubEventHeader = "X-GitHub-Event"

// event is what one event of a payload asks for: exactly one field is
// set.
type event struct {
	// change is a push or a delete, for the registry's Selector.
	change *registry.Change
	// entries are entries named directly (the entries payload).
	entries []string
	// whole asks for the whole registry (the entries payload naming none).
	whole bool
	// skip says why the event asks for nothing: a pull, a blob, a package
	// that is no container image, a ping.
	skip string
	// push is a Git push, for the registry's PushSelector
	// (payload_git.go).
	push *registry.GitPush
}

// errPayload is a body that is not a payload this endpoint reads (400);
// code is the error code of the answer.
type errPayload struct {
	code, msg string
}

func (e errPayload) Error() string { return e.msg }

func malformed(format string, args ...any) error {
	return errPayload{"MalformedJSON", fmt.Sprintf(format, args...)}
}

func unknownPayload(format string, args ...any) error {
	return errPayload{"UnknownPayload", fmt.Sprintf(format, args...)}
}

// decodePayload reads a webhook's body: a GitHub event (told by its
// X-GitHub-Event header), a distribution notification envelope ({"events":
// [...]}, whatever its media type says: v1 and v2 are the same envelope),
// a Harbor event (its default format, {"type", "event_data"}, or its
// CloudEvents format, {"specversion", "type": "harbor.…", "data"}), or
// the plain {"entries": [...]}. The host in a payload is not kept: the
// URL names the registry, and its secret proves the sender.
func decodePayload(h http.Header, body []byte) (string, []event, error) {
	// JSON is UTF-8 (RFC 8259): a body that is not is refused whole, before
	// a decoder could replace what it cannot read and pass the rest on.
	if !utf8.Valid(body) {
		return "", nil, malformed("request body is not UTF-8")
	}
	if gh := h.Get(GitHubEventHeader); gh != "" {
		evs, err := decodeGitHub(gh, body)
		return KindGitHub, evs, err
	}
	if gl := h.Get(GitLabEventHeader); gl != "" {
		evs, err := decodeGitLab(gl, body)
		return KindGitLab, evs, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return "", nil, malformed("request body is not a JSON object: %v", err)
	}
	has := func(k string) bool { _, ok := top[k]; return ok }
	switch {
	case has("events"):
		evs, err := decodeDistribution(body)
		return KindDistribution, evs, err
	case has("event_data") && has("type"), has("specversion") && has("data"):
		evs, err := decodeHarbor(body)
		return KindHarbor, evs, err
	case has("entries"):
		evs, err := decodeEntries(body)
		return KindEntries, evs, err
	case isQuay(has):
		evs, err := decodeQuay(body)
		return KindQuay, evs, err
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > 8 {
		keys = append(keys[:8], "…")
	}
	return "", nil, unknownPayload("unknown payload (fields %s): not a distribution notification envelope (events), a Harbor event (type, event_data; or CloudEvents specversion, data), a GitHub package event (X-GitHub-Event header), %s or {\"entries\": [...]}", strings.Join(keys, ", "), quayFields)
}

// checkRepository checks a repository path a payload names.
func checkRepository(where, repo string) error {
	switch {
	case repo == "":
		return malformed("%s: the repository is empty", where)
	case len(repo) > queue.MaxEntryBytes || !utf8.ValidString(repo):
		return malformed("%s: the repository is over %d bytes or not UTF-8", where, queue.MaxEntryBytes)
	}
	return nil
}

// manifestTypes are the media types of the manifests a push of an image
// or an index announces; a push of anything else (a layer, a config) is a
// blob's, which changes no tag.
var manifestTypes = map[string]bool{
	"application/vnd.docker.distribution.manifest.v1+json":      true,
	"application/vnd.docker.distribution.manifest.v1+prettyjws": true,
	"application/vnd.docker.distribution.manifest.v2+json":      true,
	"application/vnd.docker.distribution.manifest.list.v2+json": true,
	"application/vnd.oci.image.manifest.v1+json":                true,
	"application/vnd.oci.image.index.v1+json":                   true,
	"application/vnd.oci.artifact.manifest.v1+json":             true,
}

// distributionEnvelope is the CNCF distribution registry's notification
// (the "Work with notifications" page of the distribution registry's
// documentation).
type distributionEnvelope struct {
	Events []struct {
		Action string `json:"action"`
		Target struct {
			MediaType  string `json:"mediaType"`
			Digest     string `json:"digest"`
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"target"`
	} `json:"events"`
}

func decodeDistribution(body []byte) ([]event, error) {
	var env distributionEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, malformed("not a distribution notification envelope: %v", err)
	}
	out := make([]event, 0, len(env.Events))
	for i, e := range env.Events {
		t := e.Target
		where := fmt.Sprintf("events[%d]", i)
		switch e.Action {
		case "pull":
			out = append(out, event{skip: "pull"})
			continue
		case "mount":
			out = append(out, event{skip: "blob mount"})
			continue
		case "push":
			// A manifest push names its media type; one without any is
			// taken for a manifest when it names a tag.
			if !manifestTypes[t.MediaType] && !(t.MediaType == "" && t.Tag != "") {
				out = append(out, event{skip: "blob push"})
				continue
			}
		case "delete":
		default:
			out = append(out, event{skip: "action " + e.Action})
			continue
		}
		if err := checkRepository(where+".target", t.Repository); err != nil {
			return nil, err
		}
		out = append(out, event{change: &registry.Change{Repository: t.Repository, Tag: t.Tag, Digest: t.Digest, Deleted: e.Action == "delete"}})
	}
	return out, nil
}

// harborEventData is the data of a Harbor artifact event, in both of its
// formats (goharbor/website's configure-webhooks.md; Harbor's
// src/pkg/notifier/formats).
type harborEventData struct {
	Resources []struct {
		Digest string `json:"digest"`
		Tag    string `json:"tag"`
	} `json:"resources"`
	Repository struct {
		Name         string `json:"name"`
		Namespace    string `json:"namespace"`
		RepoFullName string `json:"repo_full_name"`
	} `json:"repository"`
}

// harborChanges maps Harbor's event types (default and CloudEvents
// formats) to deletes (true) and pushes (false); other types (pulls,
// scans, quotas, replication) change nothing a run reads.
var harborChanges = map[string]bool{
	"PUSH_ARTIFACT":           false,
	"DELETE_ARTIFACT":         true,
	"harbor.artifact.pushed":  false,
	"harbor.artifact.deleted": true,
}

func decodeHarbor(body []byte) ([]event, error) {
	var p struct {
		Type      string           `json:"type"`
		EventData *harborEventData `json:"event_data"`
		Data      *harborEventData `json:"data"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, malformed("not a Harbor event: %v", err)
	}
	deleted, known := harborChanges[p.Type]
	if !known {
		return []event{{skip: "Harbor event " + p.Type}}, nil
	}
	d := p.EventData
	if d == nil {
		d = p.Data
	}
	if d == nil {
		return nil, malformed("Harbor event %s has no event_data", p.Type)
	}
	repo := d.Repository.RepoFullName
	if repo == "" && d.Repository.Name != "" {
		repo = strings.Trim(d.Repository.Namespace+"/"+d.Repository.Name, "/")
	}
	if err := checkRepository("Harbor event "+p.Type, repo); err != nil {
		return nil, err
	}
	if len(d.Resources) == 0 {
		return []event{{change: &registry.Change{Repository: repo, Deleted: deleted}}}, nil
	}
	out := make([]event, 0, len(d.Resources))
	for _, r := range d.Resources {
		tag := r.Tag
		// An artifact pushed by digest is reported with its digest as its
		// tag.
		if strings.HasPrefix(tag, "sha256:") {
			tag = ""
		}
		out = append(out, event{change: &registry.Change{Repository: repo, Tag: tag, Digest: r.Digest, Deleted: deleted}})
	}
	return out, nil
}

// gitHubPackage is the package of GitHub's package and registry_package
// events (octokit/webhooks' payload examples; GitHub's "Webhook events
// and payloads").
type gitHubPackage struct {
	Name           string                 `json:"name"`
	PackageType    string                 `json:"package_type"`
	Ecosystem      string                 `json:"ecosystem"`
	Owner          struct{ Login string } `json:"owner"`
	PackageVersion *struct {
		Version           string `json:"version"`
		PackageURL        string `json:"package_url"`
		ContainerMetadata *struct {
			Tag struct {
				Name   string `json:"name"`
				Digest string `json:"digest"`
			} `json:"tag"`
		} `json:"container_metadata"`
	} `json:"package_version"`
}

func decodeGitHub(kind string, body []byte) ([]event, error) {
	if kind == "ping" {
		return []event{{skip: "ping"}}, nil
	}
	if kind == "push" {
		return decodeGitHubPush(body)
	}
	if kind != "package" && kind != "registry_package" {
		return []event{{skip: "GitHub event " + kind}}, nil
	}
	var p struct {
		Action          string         `json:"action"`
		Package         *gitHubPackage `json:"package"`
		RegistryPackage *gitHubPackage `json:"registry_package"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, malformed("not a GitHub %s event: %v", kind, err)
	}
	pkg := p.Package
	if kind == "registry_package" {
		pkg = p.RegistryPackage
	}
	if pkg == nil {
		return nil, malformed("GitHub %s event without its %s", kind, kind)
	}
	var deleted bool
	switch p.Action {
	case "published", "updated":
	case "deleted":
		deleted = true
	default:
		return []event{{skip: "GitHub package action " + p.Action}}, nil
	}
	container := func(s string) bool { s = strings.ToLower(s); return s == "container" || s == "docker" }
	if !container(pkg.PackageType) && !container(pkg.Ecosystem) {
		return []event{{skip: "GitHub package of type " + pkg.PackageType}}, nil
	}
	var c registry.Change
	c.Deleted = deleted
	if v := pkg.PackageVersion; v != nil {
		// ghcr.io/OWNER/NAME:TAG (the tag may be empty).
		if ref := v.PackageURL; ref != "" {
			path := ref
			if first, rest, ok := strings.Cut(ref, "/"); ok && strings.ContainsAny(first, ".:") {
				path = rest
			}
			if at := strings.LastIndex(path, "@"); at >= 0 {
				path = path[:at]
			}
			if colon := strings.LastIndex(path, ":"); colon > strings.LastIndex(path, "/") {
				path, c.Tag = path[:colon], path[colon+1:]
			}
			c.Repository = path
		}
		if m := v.ContainerMetadata; m != nil {
			if m.Tag.Name != "" {
				c.Tag = m.Tag.Name
			}
			c.Digest = m.Tag.Digest
		}
		if c.Digest == "" && strings.HasPrefix(v.Version, "sha256:") {
			c.Digest = v.Version
		}
	}
	if c.Repository == "" && pkg.Owner.Login != "" && pkg.Name != "" {
		c.Repository = pkg.Owner.Login + "/" + pkg.Name
	}
	// Container registry paths are lower case; GitHub's logins are not.
	c.Repository = strings.ToLower(c.Repository)
	if err := checkRepository("GitHub "+kind+" event", c.Repository); err != nil {
		return nil, err
	}
	return []event{{change: &c}}, nil
}

// MaxRequestEntries bounds the entries one {"entries": [...]} request
// names: one reconcile message's worth (queue.MaxEntries). More is the
// whole registry ({"entries": []}) or several requests.
const MaxRequestEntries = queue.MaxEntries

// decodeEntries reads {"entries": [...]}: entry names as the registry
// names them (relative to its prefix), or none for the whole registry.
// A name must be in its clean form, relative, and never climb: "a/b", not
// "/a", "a//b", "./a" or "a/../../b", which a source could take for
// another path than the one the sender meant.
func decodeEntries(body []byte) ([]event, error) {
	var p struct {
		Entries []string `json:"entries"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, malformed("not {\"entries\": [...]}: %v", err)
	}
	if len(p.Entries) == 0 {
		return []event{{whole: true}}, nil
	}
	if len(p.Entries) > MaxRequestEntries {
		return nil, malformed("%d entries: a request names at most %d (send {\"entries\": []} for the whole registry, or several requests)", len(p.Entries), MaxRequestEntries)
	}
	for i, e := range p.Entries {
		if e == "" || len(e) > queue.MaxEntryBytes || !utf8.ValidString(e) {
			return nil, malformed("entries[%d] is not an entry name (empty, over %d bytes or not UTF-8)", i, queue.MaxEntryBytes)
		}
		if strings.HasPrefix(e, "/") || path.Clean(e) != e || e == ".." || strings.HasPrefix(e, "../") {
			return nil, malformed("entries[%d] %q is not a relative entry name in its clean form (no leading /, no empty, . or .. parts)", i, e)
		}
	}
	return []event{{entries: p.Entries}}, nil
}
