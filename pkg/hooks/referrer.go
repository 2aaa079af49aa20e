package hooks

import (
	"regexp"

	"github.com/specsync/specsync/pkg/registry"
)

// signatureTag is a tag cosign gives what it attaches to a manifest
// rather than an image of its own: sha256-<hex>.sig (a signature),
// .att (an attestation), or sha256-<hex> alone (the OCI 1.1 referrers
// tag schema's index, where the registry lacks the referrers API). The
// tag is never an entry.
var signatureTag = regexp.MustCompile(`^sha256-[0-9a-f]{64}(\.sig|\.att)?$`)

// referrer marks a pushed change that refers to a manifest rather than
// moving a tag the source reads: a push tagged by signatureTag, or a
// manifest pushed without a tag (an OCI 1.1 referrer: cosign v3's
// signature bundle; it may also be a platform of an index pushed before
// its tag, which the tag's own push follows). A verifying source takes
// it as "check the repository's entry again", through its selection
// (registry.Change.Referrer); a delete is left as it is.
func referrer(c registry.Change) registry.Change {
	if !c.Deleted && (signatureTag.MatchString(c.Tag) || (c.Tag == "" && c.Digest != "")) {
		c.Referrer = true
	}
	return c
}

// selectChange is the one way a decoded change reaches a registry's
// selection, from a webhook (resolve) or from Artifact Registry (Route).
func selectChange(sel registry.Selector, c registry.Change) (string, bool) {
	return sel.Select(referrer(c))
}
