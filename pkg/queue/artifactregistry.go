package queue

import (
	"bytes"
	"encoding/json"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/registry"
)

// ArtifactRegistryTopic is the Pub/Sub topic Artifact Registry (and
// Container Registry before it) publishes its notifications to, in the
// project of the repositories: its name is fixed.
const ArtifactRegistryTopic = "gcr"

// Artifact Registry's actions.
const (
	ArtifactInsert = "INSERT"
	ArtifactDelete = "DELETE"
)

// ArtifactEvent is a message Artifact Registry publishes to the gcr topic
// when an image is pushed, tagged or deleted, as its documentation
// ("Configuring Pub/Sub notifications") gives it:
//
//	{"action":"INSERT","digest":"HOST/PATH@sha256:…","tag":"HOST/PATH:TAG"}
//
// A push of a tagged image carries both references; a push by digest, or
// the delete of a digest, only the digest; the delete of a tag only the
// tag. It is the third kind of message the reconcile function receives
// (from the gcr topic's push subscription), told from the others by its
// action: no reconcile message or commit request has one.
type ArtifactEvent struct {
	Action string `json:"action"`
	Digest string `json:"digest,omitempty"`
	Tag    string `json:"tag,omitempty"`
}

// Change is what the event says happened: the host and repository of its
// references, the tag and the digest, and whether it was a delete. An
// event that is not one Artifact Registry sends (another action, no
// reference, a reference that does not parse, two references to two
// repositories) is failure.Invalid.
func (e ArtifactEvent) Change() (registry.Change, error) {
	var c registry.Change
	switch e.Action {
	case ArtifactInsert:
	case ArtifactDelete:
		c.Deleted = true
	default:
		return c, failure.New(failure.Invalid, "artifact registry event: action %q is not INSERT or DELETE", e.Action)
	}
	if e.Tag == "" && e.Digest == "" {
		return c, failure.New(failure.Invalid, "artifact registry event: %s names neither a tag nor a digest", e.Action)
	}
	// Strict: a reference must name its registry host and its tag or
	// digest; nothing is defaulted (no docker.io, no latest).
	if e.Tag != "" {
		t, err := name.NewTag(e.Tag, name.StrictValidation)
		if err != nil {
			return c, failure.New(failure.Invalid, "artifact registry event: tag %q is not HOST/PATH:TAG: %v", e.Tag, err)
		}
		c.Host, c.Repository, c.Tag = t.RegistryStr(), t.RepositoryStr(), t.TagStr()
	}
	if e.Digest != "" {
		d, err := name.NewDigest(e.Digest, name.StrictValidation)
		if err != nil {
			return c, failure.New(failure.Invalid, "artifact registry event: digest %q is not HOST/PATH@sha256:HEX: %v", e.Digest, err)
		}
		if c.Repository != "" && (d.RegistryStr() != c.Host || d.RepositoryStr() != c.Repository) {
			return c, failure.New(failure.Invalid, "artifact registry event: tag %q and digest %q are in different repositories", e.Tag, e.Digest)
		}
		c.Host, c.Repository, c.Digest = d.RegistryStr(), d.RepositoryStr(), d.DigestStr()
	}
	return c, nil
}

// isArtifactEvent reports whether a body is shaped like Artifact
// Registry's (a JSON object with an action), whatever else is right or
// wrong with it.
func isArtifactEvent(data []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(data, &probe) != nil {
		return false
	}
	_, ok := probe["action"]
	return ok
}

// decodeArtifactEvent decodes and checks an Artifact Registry body. A bad
// one comes back with its error and Artifact still set, so that the
// caller can tell noise on the gcr topic (acknowledged quietly) from a
// broken reconcile message. Unknown fields are allowed: the body is
// Google's, not ours, and a field added to it must not drop every event.
func decodeArtifactEvent(data []byte) (Event, error) {
	var e ArtifactEvent
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&e); err != nil {
		return Event{Artifact: &e}, failure.New(failure.Invalid, "artifact registry event: %v", err)
	}
	_, err := e.Change()
	return Event{Artifact: &e}, err
}
