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
	// Refused, on a listing of named entries (EntryFetcher), are the names
	// the source does not select (its repository list, allow or deny):
	// nothing was fetched for them, and nothing may be concluded of them
	// (they are not gone upstream).
	Refused []string
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

// Change is what an event from upstream says happened: a push or a delete
// on a repository of a registry host (Artifact Registry's Pub/Sub
// notifications, a distribution registry's notification envelope, a
// Harbor or GitHub webhook). It is a hint, never the truth: a run that
// acts on it reads upstream's current state.
type Change struct {
	// Host is the registry host the event is from ("" when the event
	// does not say: a webhook addressed to one registry).
	Host string
	// Repository is the repository's full path on the host.
	Repository string
	// Tag and Digest are what was pushed or deleted; either may be empty.
	Tag, Digest string
	// Deleted says the tag, the digest or (neither set) the repository was
	// deleted.
	Deleted bool
}

// Selector is a source whose entries an event can name.
type Selector interface {
	// Select returns the entry a change concerns, if the source selects
	// it: its host, prefix, repository list, allow and deny, and its tag.
	Select(c Change) (entry string, ok bool)
}

// EntryFetcher is a source that can fetch some of its entries without
// listing the rest (a targeted run after an event).
type EntryFetcher interface {
	// FetchEntries fetches the named entries. The listing holds an entry
	// for each name that offers something now (a spec or that entry's
	// error); a name it does not hold is gone upstream (no such
	// repository or tag, or nothing that offers a spec), unless it is in
	// Listing.Refused: a name the source does not select is neither
	// fetched nor gone. A failure to
	// learn that (the registry is down, refuses the credentials, every
	// named entry failed) is the fetch's error, and then nothing may be
	// concluded of any name. Listing.Digest is not a digest of the whole
	// registry and must not be recorded as one.
	FetchEntries(ctx context.Context, names []string, opts FetchOptions) (*Listing, error)
}

// EntrySelector is a source that can tell, without asking upstream,
// whether it selects an entry name (its repository list, allow and
// deny): a run named entries drops the others before it takes the
// registry's lease, so an event for nothing the registry selects costs
// no write.
type EntrySelector interface {
	SelectsEntry(entry string) bool
}
