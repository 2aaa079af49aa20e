package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

// FormatVersion is part of every revision ETag. Bump it whenever Render
// produces different bytes for the same specs: the catalog revision only
// counts spec changes, so without it a deploy that changes rendering would
// answer 304 to platforms holding the old body under the same ETag.
const FormatVersion = 1

var plainVariant = regexp.MustCompile(`^[A-Za-z0-9._-]*$`)

// ETag is a strong entity tag for the catalog at a revision (the
// meta/catalog counter, bumped exactly when the served catalog changes).
// variant separates representations of one revision that differ in bytes,
// such as a gzip-encoded body or a rendering per API version; "" for none.
// A variant that is not plain [A-Za-z0-9._-] is hashed, so any string
// yields a valid, collision-free tag.
//
// The tag is only as exact as the read behind it: read the revision and
// the specs in one read-only transaction (or the revision first), so a
// body is never tagged with a revision newer than its specs.
func ETag(revision int64, variant string) string {
	tag := "c" + strconv.Itoa(FormatVersion) + "-" + strconv.FormatInt(revision, 10)
	if variant != "" {
		if !plainVariant.MatchString(variant) {
			sum := sha256.Sum256([]byte(variant))
			variant = hex.EncodeToString(sum[:8])
		}
		tag += "-" + variant
	}
	return `"` + tag + `"`
}

// BodyETag is ETag(revision, string(body)) without copying the body
// twice: a catalog body is megabytes, and the tag is computed on every
// refresh.
func BodyETag(revision int64, body []byte) string {
	tag := "c" + strconv.Itoa(FormatVersion) + "-" + strconv.FormatInt(revision, 10)
	if len(body) > 0 {
		if plainVariant.Match(body) {
			tag += "-" + string(body)
		} else {
			sum := sha256.Sum256(body)
			tag += "-" + hex.EncodeToString(sum[:8])
		}
	}
	return `"` + tag + `"`
}

// Digest is the SHA-256 of the catalog's JSON encoding, "sha256:<hex>",
// for callers that prefer a content ETag (quote it) to a revision one.
// encoding/json writes struct fields in order and map keys sorted, and
// Render orders services and plans, so equal catalogs have equal digests.
func Digest(c *Catalog) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode catalog for digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
