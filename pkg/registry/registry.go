// Package registry lists what an upstream registry offers. An adapter
// returns, for each entry, either a parsed spec or that entry's own error,
// plus a digest of the whole listing; a failure to list at all is an error
// of the fetch, which the reconciler treats as "know nothing".
package registry

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
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
	// Spec is the parsed, validated spec; nil when Err or Hint is set.
	Spec *spec.Spec
	// Err is this entry's own failure (bad label, invalid spec, missing
	// tag). It never fails the listing as a whole.
	Err error
	// Upstream, when set, names what the source read the entry at (OCI:
	// how this code reads an image, OCIReadVersion, and the manifest
	// digest): the same Upstream always gives the same entry (its spec,
	// or the same content error), so the entry's part of the listing
	// digest is taken over it instead of its spec (EntryDigest), and a
	// source can tell an unchanged listing from upstream digests alone.
	// Empty when the entry could not be read (a failure that reading
	// again may cure) or the source names nothing so.
	Upstream string
	// Hint, when set, is the run's hint the source gave the entry back
	// from without reading it (FetchOptions.Hints): Spec is nil, and the
	// entry offers the spec the hint names.
	Hint *Hint
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
	// since the validator it was given (HTTP 304; an OCI registry whose
	// tags name the upstream digests that sum to PreviousDigest); Entries
	// is then empty and Digest is the previous one.
	NotModified bool
	// Refused, on a listing of named entries (EntryFetcher), are the names
	// the source does not select (its repository list, allow or deny):
	// nothing was fetched for them, and nothing may be concluded of them
	// (they are not gone upstream).
	Refused []string
	// Quiet are the names the source read at an Upstream and found to
	// offer nothing (an image without a spec label): not entries (Name,
	// Ref and Upstream only), but their parts are in Digest, since a
	// source that digests upstream digests cannot tell them from entries
	// before it reads them. A run records them, to hand them back as
	// hints of nothing (a Hint without a spec).
	Quiet []Entry
}

// FetchOptions carries what a source may use to avoid work.
type FetchOptions struct {
	// ETag of the previous successful fetch, if the source uses one.
	ETag string
	// PreviousDigest is the listing digest of the last successful run.
	// A source whose entries carry Upstream may answer NotModified when
	// the upstream digests it looked up sum to it, without reading an
	// entry.
	PreviousDigest string
	// Hints, when set, gives what the run recorded of the source's
	// entries, by entry name (Hint): an entry the source finds at the
	// Upstream a hint names it gives back from the hint (Entry.Hint)
	// instead of reading it again. The source calls it at most once a
	// fetch, and only when it would otherwise read an entry, so a run
	// that finds the listing unchanged pays nothing for it. Its error
	// (the run's store failed) fails the fetch.
	Hints func(ctx context.Context) (map[string]Hint, error)
}

// Hint is what a run recorded of an entry it left clean: the Upstream the
// source read it at, and what the entry gave then, exactly as the run
// planned it. A run hands out hints only of a manifest it trusts, and only
// of entries whose spec was active and clean (no entry error, nothing held
// back, the offered content stored); a broken entry is never hinted, so it
// is read again on every run that reads.
type Hint struct {
	Upstream string
	// SpecID, SpecName and SpecDigest are the spec the entry gave, as
	// the run planned it (ids assigned, digest of that); all empty, the
	// entry gave nothing (an image without a spec label: Listing.Quiet).
	SpecID, SpecName, SpecDigest string
}

// Quiet reports whether the hint is of an entry that offered nothing.
func (h Hint) Quiet() bool { return h.SpecID == "" }

// Source is one configured registry.
type Source interface {
	// Fetch lists the registry. Any failure to obtain the complete listing
	// (unreachable, auth, 5xx, timeout, a failed catalog page, a truncated
	// body) is returned as an error; per-entry problems go in Entry.Err.
	Fetch(ctx context.Context, opts FetchOptions) (*Listing, error)
}

// ListingDigest computes a digest over entries: the sum (modulo 2^128) of
// each entry's EntryDigest, so it does not depend on their order, and a
// run that refetched some entries can work out the digest of the listing
// with those entries replaced (AdjustDigest) from what each of them added
// before, without the others. Adapters call it after filtering.
func ListingDigest(entries []Entry) string {
	var sum digest128
	for _, e := range entries {
		sum = sum.add(entryDigest(e))
	}
	return sum.listing()
}

// EntryDigest is what one entry adds to its listing's digest: 128 bits of
// SHA-256 over its name, ref, spec digest and error, base64url without
// padding (22 characters). An entry with an Upstream adds its name, ref
// and Upstream instead, which name its spec or its error: a source can
// work that out from upstream digests alone, before it reads an entry.
func EntryDigest(e Entry) string { return EntriesDigest([]Entry{e}) }

// EntriesDigest is what some entries add to their listing's digest
// together: the sum of their EntryDigest.
func EntriesDigest(entries []Entry) string {
	var sum digest128
	for _, e := range entries {
		sum = sum.add(entryDigest(e))
	}
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// AdjustDigest is the digest of a listing (ListingDigest) with entries
// taken out and others put in, given what each added (EntryDigest). It
// reports false, and returns "", when listing is not such a digest (a
// source that digests its listing otherwise, or none recorded) or an
// entry digest does not decode: then nothing can be worked out.
func AdjustDigest(listing string, remove, add []string) (string, bool) {
	hexSum, ok := strings.CutPrefix(listing, listingDigestPrefix)
	b, err := hex.DecodeString(hexSum)
	if !ok || err != nil || len(b) != 16 {
		return "", false
	}
	var sum digest128
	copy(sum[:], b)
	for i, set := range [][]string{remove, add} {
		for _, s := range set {
			b, err := base64.RawURLEncoding.DecodeString(s)
			if err != nil || len(b) != 16 {
				return "", false
			}
			var d digest128
			copy(d[:], b)
			if i == 0 {
				sum = sum.sub(d)
			} else {
				sum = sum.add(d)
			}
		}
	}
	return sum.listing(), true
}

// listingDigestPrefix names the digest's kind: a listing digest recorded
// by a version before it (an ordered SHA-256, "sha256:") never equals
// one, so the first run after the upgrade does the full work once.
const listingDigestPrefix = "sum128:"

// digest128 is a 128-bit number, big-endian.
type digest128 [16]byte

func entryDigest(e Entry) digest128 {
	h := sha256.New()
	h.Write([]byte(e.Name))
	h.Write([]byte{0})
	h.Write([]byte(e.Ref))
	h.Write([]byte{0})
	if e.Upstream != "" {
		// No spec digest ("sha256:...") begins so.
		h.Write([]byte("upstream " + e.Upstream))
		h.Write([]byte{0})
		var d digest128
		copy(d[:], h.Sum(nil))
		return d
	}
	if e.Spec != nil {
		h.Write([]byte(spec.Digest(e.Spec)))
	}
	h.Write([]byte{0})
	if e.Err != nil {
		h.Write([]byte(e.Err.Error()))
	}
	var d digest128
	copy(d[:], h.Sum(nil))
	return d
}

func (a digest128) words() (hi, lo uint64) {
	return binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
}

func fromWords(hi, lo uint64) digest128 {
	var d digest128
	binary.BigEndian.PutUint64(d[:8], hi)
	binary.BigEndian.PutUint64(d[8:], lo)
	return d
}

func (a digest128) add(b digest128) digest128 {
	ah, al := a.words()
	bh, bl := b.words()
	lo, carry := bits.Add64(al, bl, 0)
	hi, _ := bits.Add64(ah, bh, carry)
	return fromWords(hi, lo)
}

func (a digest128) sub(b digest128) digest128 {
	ah, al := a.words()
	bh, bl := b.words()
	lo, borrow := bits.Sub64(al, bl, 0)
	hi, _ := bits.Sub64(ah, bh, borrow)
	return fromWords(hi, lo)
}

func (a digest128) listing() string { return listingDigestPrefix + hex.EncodeToString(a[:]) }

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
	// Referrer says the push is of a manifest that refers to another in
	// the repository (a cosign signature or attestation, by its
	// sha256-<hex>.sig tag or as an OCI 1.1 referrer pushed without a
	// tag): it moves no tag the source reads, but may make the
	// repository's entry verify. A source that verifies selects that
	// entry, whatever Tag says; one that does not, ignores it.
	Referrer bool
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
