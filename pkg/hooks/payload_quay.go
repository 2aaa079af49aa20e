package hooks

import (
	"encoding/json"

	"github.com/specsync/specsync/pkg/registry"
)

// KindQuay is a Quay repository notification (a webhook of Quay's
// "Push to Repository" event).
const KindQuay = "quay"

// quayNotification is the body Quay's webhook method posts: the event
// data of the notification (quay/quay, notifications/__init__.py,
// build_repository_event_data), which for a push (repo_push) adds
// updated_tags. Every event of a repository has repository, namespace,
// name, docker_url and homepage; only a push has updated_tags.
type quayNotification struct {
	Repository  string    `json:"repository"`
	Namespace   string    `json:"namespace"`
	Name        string    `json:"name"`
	DockerURL   string    `json:"docker_url"`
	UpdatedTags *[]string `json:"updated_tags"`
}

// isQuay tells a Quay notification by the fields every one of them has
// and no other payload read here does.
func isQuay(has func(string) bool) bool { return has("docker_url") && has("repository") }

// decodeQuay reads a Quay notification: a push is one change per updated
// tag; the other events of a repository (builds, scans, mirroring, tag
// expiry) change nothing a run reads. Quay sends no notification of a
// deleted tag: the scheduled bootstrap finds those.
func decodeQuay(body []byte) ([]event, error) {
	var n quayNotification
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, malformed("not a Quay repository notification: %v", err)
	}
	repo := n.Repository
	if repo == "" && n.Namespace != "" && n.Name != "" {
		repo = n.Namespace + "/" + n.Name
	}
	if err := checkRepository("Quay notification", repo); err != nil {
		return nil, err
	}
	if n.UpdatedTags == nil {
		return []event{{skip: "Quay notification without updated_tags (a build, scan, mirror or expiry event)"}}, nil
	}
	if len(*n.UpdatedTags) == 0 {
		return []event{{skip: "Quay push that updated no tag"}}, nil
	}
	out := make([]event, 0, len(*n.UpdatedTags))
	for i, tag := range *n.UpdatedTags {
		if tag == "" {
			return nil, malformed("Quay notification: updated_tags[%d] is empty", i)
		}
		out = append(out, event{change: &registry.Change{Repository: repo, Tag: tag}})
	}
	return out, nil
}

// quayFields names what decodePayload looks for, in its message for a
// payload it does not know.
const quayFields = "a Quay repository notification (repository, docker_url)"
