// Package registry lists what an upstream registry offers. An adapter
// returns, for each entry, either a parsed spec or that entry's own error,
// plus a digest of the whole listing; a failure to list at all is an error
// of the fetch, which the reconciler treats as "know nothing".
package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"

	"github.com/specsync/specsync/pkg/spec"
)

// Entry is one thing a registry offers: an image repository, an item of an
// index document, a spec file.
type Entry struct {
	// Name identifies the entry within its registry (repository path, index
	// entry name, file name). Allow/deny lists match it.
	Name string
	// Ref says where the spec came from (image reference with digest, URL,
	// file path), for status and error reports.
	Ref string
	// Spec is the parsed, validated spec; nil when Err is set.
	Spec *spec.Spec
	// Err is this entry's own failure (bad label, invalid spec, missing
	// tag). It never fails the listing as a whole.
	Err error
}

// Listing is a complete, successful fetch of a registry.
type Listing struct {
	Entries []Entry
	// Digest summarises the whole listing: equal digests mean an equal
	// listing, so a reconcile can stop without reading the store.
	Digest string
	// ETag is the validator an HTTP source returned, to send next time.
	ETag string
	// NotModified is set when the source proved the listing is unchanged
	// since the validator it was given (HTTP 304); Entries is then empty and
	// Digest is the previous one.
	NotModified bool
}

// FetchOptions carries what a source may use to avoid work.
type FetchOptions struct {
	// ETag of the previous successful fetch, if the source uses one.
	ETag string
	// PreviousDigest is the listing digest of the last successful run.
	PreviousDigest string
}

// Source is one configured registry.
type Source interface {
	// Fetch lists the registry. Any failure to obtain the complete listing
	// (unreachable, auth, 5xx, timeout, a failed catalog page, a truncated
	// body) is returned as an error; per-entry problems go in Entry.Err.
	Fetch(ctx context.Context, opts FetchOptions) (*Listing, error)
}

// ListingDigest computes a digest over entries: names, refs, spec digests
// and entry errors, in name order. Adapters call it after filtering.
func ListingDigest(entries []Entry) string {
	sorted := make([]Entry, len(entries))
	copy(sorted, entries)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	h := sha256.New()
	for _, e := range sorted {
		var b strings.Builder
		b.WriteString(e.Name)
		b.WriteByte(0)
		b.WriteString(e.Ref)
		b.WriteByte(0)
		if e.Spec != nil {
			b.WriteString(spec.Digest(e.Spec))
		}
		b.WriteByte(0)
		if e.Err != nil {
			b.WriteString(e.Err.Error())
		}
		b.WriteByte('\n')
		h.Write([]byte(b.String()))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
