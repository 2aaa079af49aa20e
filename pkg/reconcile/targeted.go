package reconcile

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
)

// DefaultLeaseTTL is the lease a targeted run takes when the runner sets
// none (LeaseTTL 0: the local tools, tests): a targeted run always holds
// the lease, which makes it the one writer of the registry while it
// rewrites part of the manifest.
const DefaultLeaseTTL = 10 * time.Minute

// targeting is what a targeted run knows besides what every run does.
type targeting struct {
	// asked are the entries the event named; names those the source
	// selects (and did not refuse): the run's scope.
	asked, names []string
	fetcher      registry.EntryFetcher
	// parts are the manifest shards that hold the named entries, as read.
	parts map[int]*store.ManifestPart
	// contested says an entry offers an id or a name an entry outside the
	// scope holds (Scope.takenBy): the listing digest is left to the next
	// full run.
	contested bool
}

func (t *targeting) named() map[string]bool {
	out := make(map[string]bool, len(t.names))
	for _, n := range t.names {
		out[n] = true
	}
	return out
}

// ReconcileEntries is the run an event asks for. With names, a targeted
// run: the same steps as Reconcile over the entries the event named,
// fetched alone (registry.EntryFetcher). It holds the registry's lease
// like any run (DefaultLeaseTTL when the runner has none) and takes it
// first, so what it fetches is never older than what another run wrote;
// it needs a manifest it trusts, and reads and writes only the shards
// that hold its entries; it upserts, holds back, records entry errors
// and marks (an entry gone upstream is marked under a full run's
// guards), but never deletes, and never marks an entry it was not told
// about. It records itself as the registry's last targeted run
// (LastTargeted), never as its last run, with the entries it covered, and
// asks for a commit when it wrote changes.
//
// Names the source does not select are left out (without a lease when
// none is left). Without names, or for a source that cannot fetch single
// entries, or a registry whose manifest cannot be trusted (a run did not
// finish, an older layout, a shard nearly full), it is a full run (the
// backstop; with names, the reason is in its record, Run.Backstop, and
// log), which takes the lease first too, and records that it found the
// registry unchanged (CheckedAt) when it did: the events before it are
// done.
func (r *Runner) ReconcileEntries(ctx context.Context, reg Registry, names []string) (store.Run, error) {
	return r.ReconcileEvent(ctx, reg, names, time.Time{})
}

// ReconcileEvent is ReconcileEntries for an event received at eventAt
// (its message's EventAt): the run's commit request carries it, so that
// the committer can log how long the change took from the event to the
// catalog (the freshness objective, docs/operations.md).
func (r *Runner) ReconcileEvent(ctx context.Context, reg Registry, names []string, eventAt time.Time) (store.Run, error) {
	run := r.newRun(reg, "")
	run.event, run.eventAt = true, eventAt
	span := run.startSpan(&ctx, "reconcile entries")
	defer run.releaseLease(ctx)
	fetcher, ok := reg.Source.(registry.EntryFetcher)
	if len(names) == 0 || !ok {
		if len(names) > 0 {
			run.rec.Backstop = "the source cannot fetch single entries; it lists the registry whole"
			run.log.InfoContext(ctx, "an event's entries are reconciled by a full run", "because", run.rec.Backstop, "entries", names)
		}
		err := run.do(ctx, run.leaseFirst, run.full)
		return span.end(run.traceRecord(ctx, err))
	}
	run.t = &targeting{asked: names, fetcher: fetcher}
	err := run.do(ctx,
		run.selectEntries,
		run.leaseFirst,
		run.trustManifest,
		run.traced(stepFetch, run.fetchEntries), // step 1, of the named entries
		run.recoverLastRun,
		run.traced(stepKnow, run.knowEntries), // step 2, of their specs
		run.begin,
		// no step 3: deleting is the full runs'
		run.traced(stepUpsert, run.upsert), // step 4
		run.findBlockers,
		run.traced(stepHoldBack, run.holdBack),
		run.recordEntryErrors,
		run.traced(stepMark, run.mark), // step 5, of the named entries only
		run.requestCommit,
	)
	return span.end(run.traceRecord(ctx, err))
}

// selectEntries keeps the names the source selects, each once; with none
// left the run ends here, having written nothing.
func (r *run) selectEntries(ctx context.Context) (bool, error) {
	sel, canTell := r.reg.Source.(registry.EntrySelector)
	var names []string
	for _, n := range r.t.asked {
		if !slices.Contains(names, n) && (!canTell || sel.SelectsEntry(n)) {
			names = append(names, n)
		}
	}
	r.t.names, r.rec.Entries = names, names
	if len(names) == 0 {
		r.log.InfoContext(ctx, "no entry the event names is one this registry selects; nothing to do", "entries", r.t.asked)
		r.ended = api.ResultUnchanged
		return true, nil
	}
	return false, nil
}

// leaseFirst takes the registry's lease before anything else, and works
// from the status as the lease found it: no run records while it holds
// it, and it fetches after every run before it wrote. Events come in
// storms, so it claims the lease without a transaction (ClaimLease):
// runs that try at once are busy at once, instead of queueing on the
// status document's lock.
func (r *run) leaseFirst(ctx context.Context) (bool, error) {
	ttl := r.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	var entries []string // none: the whole registry
	if r.t != nil {
		entries = r.t.names
	}
	before, err := r.st.ClaimLease(ctx, r.reg.Name, store.Lease{Holder: r.rec.ID, StartedAt: r.rec.StartedAt, Entries: entries}, ttl)
	if err != nil {
		r.ended = api.ResultBusy
		return false, err
	}
	r.status, r.leased, r.began = before, true, true
	return false, nil
}

// trustManifest reads the manifest shards that hold the named entries;
// without a manifest it can trust (and of the by-entry layout, with room
// in those shards) the run becomes a full one.
func (r *run) trustManifest(ctx context.Context) (bool, error) {
	st := r.status
	var why string
	switch {
	case !st.ManifestTrusted():
		why = "no manifest describes the registry's specs (none recorded, or a run after it did not finish)"
	case st.Manifest.Layout != api.ManifestByEntry:
		why = "the manifest is of the layout before shards by entry"
	}
	if why == "" {
		parts, err := r.st.ReadManifestShards(ctx, r.reg.Name, st.Manifest, r.t.names)
		if err != nil {
			return false, err
		}
		for _, p := range parts {
			if !p.Roomy() {
				why = fmt.Sprintf("shard %d of the manifest is nearly full; a full run shards it again", p.Shard)
			}
		}
		if parts == nil {
			why = "a shard of the manifest is not the one its header names"
		}
		r.t.parts = parts
	}
	if why != "" {
		return r.backstop(ctx, why)
	}
	return false, nil
}

// backstop carries the run on as a full run, holding the lease it took.
func (r *run) backstop(ctx context.Context, why string) (bool, error) {
	r.log.InfoContext(ctx, "an event's entries are reconciled by a full run", "because", why, "entries", r.t.names)
	r.t, r.rec.Entries, r.rec.Backstop = nil, nil, why
	return r.full(ctx)
}

// fetchEntries fetches the named entries. A failure ends the run before
// the store is read: recorded, not an error, nothing marked. Names the
// source refused leave the scope: nothing is concluded of them.
func (r *run) fetchEntries(ctx context.Context) (bool, error) {
	var opts registry.FetchOptions
	if !r.noHints {
		// The shards it read: no read more.
		opts.Hints = func(context.Context) (map[string]registry.Hint, error) {
			var m store.Manifest
			for _, p := range r.t.parts {
				m.Entries = append(m.Entries, p.Entries...)
			}
			m.Listing = map[string]store.ListingPart{}
			for _, p := range r.t.parts {
				maps.Copy(m.Listing, p.Listing)
			}
			return hintsFrom(m), nil
		}
	}
	listing, err := r.t.fetcher.FetchEntries(ctx, r.t.names, opts)
	if err != nil {
		r.ended, r.rec.Error = api.ResultFetchFailed, err.Error()
		return true, nil
	}
	if len(listing.Refused) > 0 {
		r.log.InfoContext(ctx, "the source does not select some of the entries named", "refused", listing.Refused)
		r.t.names = slices.DeleteFunc(slices.Clone(r.t.names), func(n string) bool { return slices.Contains(listing.Refused, n) })
		r.rec.Entries = r.t.names
	}
	named := r.t.named()
	// Only what was asked for: an entry the source adds unasked is not
	// this run's.
	l := *listing
	l.Entries = slices.DeleteFunc(slices.Clone(listing.Entries), func(e registry.Entry) bool { return !named[e.Name] })
	l.Quiet = slices.DeleteFunc(slices.Clone(listing.Quiet), func(e registry.Entry) bool { return !named[e.Name] })
	r.listing = &l
	return false, nil
}

// knowEntries reads what the run needs of the named entries' specs: the
// manifest shards say which specs they hold; the changed, broken, marked
// and unclean ones are read in full, as in a full run. An offered id the
// named entries do not hold is read too (one read each: whose is it?),
// and an offered name that is new to its entry is looked up among the
// registry's specs (one query): an id or a name another entry of the
// registry holds is that entry's, not this run's to take (Scope).
func (r *run) knowEntries(ctx context.Context) (bool, error) {
	named := r.t.named()
	k := knowledge{full: map[string]store.SpecRecord{}, fromManifest: true}
	for _, i := range slices.Sorted(maps.Keys(r.t.parts)) {
		for _, e := range r.t.parts[i].Entries {
			if named[e.Entry] {
				k.stored = append(k.stored, partialRecords([]store.ManifestEntry{e})...)
			}
		}
	}
	candidates := Candidates(r.reg.Name, r.listing.Entries)
	scope := Scope{Entries: r.t.names, Active: r.status.Manifest.Active, TakenIDs: map[string]string{}, TakenNames: map[string]string{}}
	first := MakeTargetedPlan(candidates, k.stored, r.reg.Policy, scope)

	known := map[string]Stored{}
	for _, s := range k.stored {
		known[s.ID] = s
	}
	read := slices.Clone(first.Read)
	for _, c := range candidates {
		if c.offers() && !slices.Contains(read, c.ID) {
			if _, ok := known[c.ID]; !ok {
				read = append(read, c.ID)
			}
		}
	}
	sort.Strings(read)
	records, err := r.st.SpecsByID(ctx, read)
	if err != nil {
		return false, err
	}
	k.read = len(read)
	var own, extra []store.SpecRecord
	for _, rec := range records {
		switch {
		case rec.Registry != r.reg.Name:
			// Another registry's: the create's precondition finds the
			// conflict, as in a full run.
		case named[rec.Entry]:
			own = append(own, rec)
			if _, ok := known[rec.ID]; !ok {
				extra = append(extra, rec)
			}
		default:
			scope.TakenIDs[rec.ID] = rec.Entry
		}
	}
	k.readIn(own, first.Read)
	k.stored = append(k.stored, storedFrom(extra)...)

	for _, c := range candidates {
		if !c.offers() {
			continue
		}
		if s, ok := known[c.ID]; ok && s.unchangedBy(c) {
			continue // unchanged: its name is what it was
		}
		if rec, ok := k.full[c.ID]; ok && named[rec.Entry] && rec.Name == c.Name {
			continue // its own spec, under the same name
		}
		same, err := r.st.RegistrySpecsNamed(ctx, r.reg.Name, c.Name)
		if err != nil {
			return false, err
		}
		k.read += max(len(same), 1)
		for _, rec := range same {
			if !named[rec.Entry] && rec.State == api.SpecActive && rec.ID != c.ID {
				scope.TakenNames[c.Name] = rec.Entry
			}
		}
	}
	for _, c := range candidates {
		if scope.takenBy(c) != nil {
			r.t.contested = true
		}
	}
	k.candidates = candidates
	if err := k.settle(r.reg.Policy, &scope); err != nil {
		return false, err
	}
	r.k = k
	return false, nil
}

// recordTargeted ends a targeted run: it records it in the registry's
// status (RecordTargetedRun), with the manifest shards it changed, the
// listing digest worked out for the entries it saw, and the entries it
// covered, and releases its lease in the same write.
func (r *run) recordTargeted(ctx context.Context, rec store.Run, err error) (store.Run, error) {
	wrap := func(err error) error { return fmt.Errorf("reconcile %s (entries %v): %w", r.reg.Name, r.t.names, err) }
	t := store.TargetedRecord{Saw: r.status, Read: r.t.parts, Digest: r.status.ListingDigest}
	switch {
	case err != nil:
		// What it wrote is not known for sure: no manifest, no digest.
		r.log.ErrorContext(ctx, "targeted reconcile failed part-way; it is safe to run again", "error", err)
		t.Digest = ""
	case rec.Result == api.ResultFetchFailed:
		// Nothing written: the manifest and the digest still hold.
		t.Manifest = true
		r.log.WarnContext(ctx, "fetching the event's entries failed; nothing changed", "error", rec.Error)
	default:
		parts, ok := r.partsAfter()
		t.Manifest, t.Parts = ok, parts
		t.Digest = r.digestAfter(rec)
		t.Marked = markedAfter(r.k.stored, r.done) - markedAfter(r.k.stored, outcomes{})
		t.Covered = r.t.names
		if !ok {
			r.log.WarnContext(ctx, "the run's specs are not all in the manifest shards it read; no manifest recorded, the next run reads every spec")
		}
	}
	written, rerr := r.st.RecordTargetedRun(ctx, r.reg.Name, &rec, t)
	if rerr == nil {
		r.leased = false // released with the record
	}
	switch {
	case err != nil:
		return rec, wrap(err)
	case rerr != nil:
		return rec, wrap(rerr)
	case !written && t.Manifest:
		r.log.WarnContext(ctx, "another run of the registry ran meanwhile: no manifest recorded, the next run reads every spec")
	}
	if rec.Result != api.ResultFetchFailed {
		// Result, counts and cost are in the summary line (summarize).
		r.log.InfoContext(ctx, "entries reconciled", "entries", r.t.names, "digest_kept", t.Digest != "")
	}
	return rec, nil
}

// partsAfter are the manifest shards the run changed, each whole as the
// run leaves it: the entries of other names as read, the named entries'
// specs as the run left them (manifestAfter), and the named entries'
// listing parts as fetched (listingParts). It reports false when a spec of the named
// entries belongs in a shard the run did not read (it cannot: the
// entries' own shards were read).
func (r *run) partsAfter() (map[int]store.Manifest, bool) {
	named := r.t.named()
	shards := r.status.Manifest.Shards
	next := map[int]store.Manifest{}
	for i, p := range r.t.parts {
		m := store.Manifest{Listing: map[string]store.ListingPart{}}
		for _, e := range p.Entries {
			if !named[e.Entry] {
				m.Entries = append(m.Entries, e)
			}
		}
		for entry, d := range p.Listing {
			if !named[entry] {
				m.Listing[entry] = d
			}
		}
		next[i] = m
	}
	after := manifestAfter(r.k, r.done)
	for _, e := range after.entries() {
		i := store.ManifestShardOf(e.Entry, shards)
		m, ok := next[i]
		if !ok {
			return nil, false
		}
		m.Entries = append(m.Entries, e)
		next[i] = m
	}
	for entry, p := range listingParts(r.listing, r.k.candidates, after) {
		m, ok := next[store.ManifestShardOf(entry, shards)]
		if !ok {
			return nil, false
		}
		m.Listing[entry] = p
	}
	for i, m := range next {
		if sameManifest(m, r.t.parts[i].Manifest) {
			delete(next, i)
		}
	}
	return next, true
}

// digestAfter is the registry's listing digest after the run: the last
// one with the named entries' parts replaced by what they are now, when
// the last one described the store (baseline) and the run leaves the
// store as a full run over that listing would; otherwise none, and the
// next full run does the full work (which the manifest keeps cheap).
func (r *run) digestAfter(rec store.Run) string {
	if !baseline(r.status) || rec.Result != api.ResultSucceeded || len(rec.HeldBack) > 0 || len(rec.Conflicts) > 0 || r.t.contested {
		return ""
	}
	var was []string
	for _, n := range r.t.names {
		p := r.t.parts[store.ManifestShardOf(n, r.status.Manifest.Shards)]
		if p == nil {
			return ""
		}
		if d, ok := p.Listing[n]; ok {
			was = append(was, d.Digest)
		}
	}
	var now []string
	for _, p := range listingParts(r.listing, r.k.candidates, nil) {
		now = append(now, p.Digest)
	}
	d, _ := registry.AdjustDigest(r.status.ListingDigest, was, now)
	return d
}

// sameManifest reports whether two parts of a manifest say the same.
func sameManifest(a, b store.Manifest) bool {
	sorted := func(es []store.ManifestEntry) []store.ManifestEntry {
		out := slices.Clone(es)
		sort.Slice(out, func(i, j int) bool {
			if out[i].Entry != out[j].Entry {
				return out[i].Entry < out[j].Entry
			}
			return out[i].SpecID < out[j].SpecID
		})
		return out
	}
	return slices.Equal(sorted(a.Entries), sorted(b.Entries)) && maps.Equal(a.Listing, b.Listing)
}
