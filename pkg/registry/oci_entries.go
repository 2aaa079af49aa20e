package registry

import (
	"context"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// FetchEntries fetches the named entries only: no catalog (or Lister)
// request, one tag lookup per named repository, and its manifest and
// config where neither the cache nor the run's hint (opts.Hints) of the
// entry at the same upstream digest gives them. See EntryFetcher.
//
// A name whose repository or tag is gone (404, NAME_UNKNOWN,
// MANIFEST_UNKNOWN), or whose image offers no spec, is absent from the
// listing: gone upstream. A name the source does not select
// (SelectsEntry) is absent too, and listed in Listing.Refused: nothing
// was asked about it. A repository that cannot be read is that entry's
// error, unless every named repository fails, which fails the fetch (the
// registry is down or refuses the credentials), exactly as a full fetch
// does. The cache is not pruned: the entries not named are still the
// registry's.
func (o *OCI) FetchEntries(ctx context.Context, names []string, opts FetchOptions) (*Listing, error) {
	var selected, refused []string
	for _, n := range names {
		switch {
		case slices.Contains(selected, n) || slices.Contains(refused, n):
		case o.SelectsEntry(n):
			selected = append(selected, n)
		default:
			refused = append(refused, n)
		}
	}
	if len(selected) == 0 {
		return &Listing{Entries: []Entry{}, Digest: ListingDigest(nil), Refused: refused}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
	defer cancel()
	c, err := o.connect(ctx)
	if err != nil {
		return nil, err
	}
	l, err := o.fetchEntries(ctx, c, selected, false, FetchOptions{Hints: opts.Hints})
	if err != nil {
		return nil, err
	}
	l.Refused = refused
	return l, nil
}

// SelectsEntry reports whether the source selects an entry name: a
// repository path relative to the prefix, in the configured repository
// list if there is one, allowed by the filter. It asks nothing upstream.
// See EntrySelector.
func (o *OCI) SelectsEntry(entry string) bool {
	if entry == "" || strings.HasPrefix(entry, "/") || strings.HasSuffix(entry, "/") {
		return false
	}
	if _, err := name.NewRepository(o.cfg.Host+"/"+o.path(entry), o.nameOpts...); err != nil {
		return false
	}
	if len(o.cfg.Repositories) > 0 && !slices.Contains(o.cfg.Repositories, entry) {
		return false
	}
	return o.cfg.Filter.Allows(entry)
}
