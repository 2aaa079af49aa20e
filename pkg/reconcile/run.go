package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
)

// Reconcile runs the five steps for one registry and returns the run as
// recorded. A registry that cannot be fetched is a recorded, successful
// outcome (nil error): the catalog is untouched and the next bootstrap
// tries again. An error is returned only when the store failed, and it is
// classified (see package failure) so a caller can decide to retry; every
// step is idempotent, so running again is always safe.
func (r *Runner) Reconcile(ctx context.Context, reg Registry) (store.Run, error) {
	run := r.newRun(reg, "")
	span := run.startSpan(&ctx, "reconcile")
	defer run.releaseLease(ctx)
	err := run.do(ctx, run.readStatus, run.full)
	return span.end(run.traceRecord(ctx, err))
}

// full is a run over every entry of the registry, from its status on.
func (r *run) full(ctx context.Context) (bool, error) {
	return true, r.do(ctx,
		r.traced(stepFetch, r.fetch), // step 1
		r.unchangedListing,
		r.lease,
		r.recoverLastRun,
		r.traced(stepKnow, r.know), // step 2
		r.begin,                    // before the first spec write
		r.traced(stepDeleteMarked, r.deleteMarked), // step 3
		r.traced(stepUpsert, r.upsert),             // step 4
		r.findBlockers,
		r.traced(stepHoldBack, r.holdBack),
		r.recordEntryErrors,
		r.traced(stepMark, r.mark), // step 5
		r.requestCommit,
		r.recordConflicts,
	)
}

// run is one run of one registry as it goes: what it read and planned,
// and what each step did (done). Its steps are methods, carried out in
// order (do) until one fails or ends the run; record then writes the run
// once.
type run struct {
	*Runner
	reg Registry
	st  *store.Store // the store, counting the run's operations in ops
	ops *store.Ops
	log *slog.Logger
	// rec is the run as it will be recorded: its id and start now, the
	// rest when it ends (report).
	rec store.Run
	// dry says the run plans only (DryRun): it reads no status and writes
	// nothing. event says an event asked for it (ReconcileEntries).
	dry, event bool
	// eventAt is when the event that asked for it was received (zero:
	// unknown, or no event).
	eventAt time.Time

	status  *store.RegistryStatus // as read when the run started
	listing *registry.Listing
	// ended is the result of a step that ended the run early: the
	// registry could not be fetched, its listing is unchanged with
	// nothing marked, or another run holds its lease.
	ended api.RunResult
	// short says the listing is the last successful one's while marked
	// specs wait: the run only deletes those nothing references any more.
	// graceWaits says one of them was marked after the last successful
	// run (by a targeted run): this run, recorded, starts its grace.
	short, graceWaits bool
	// leased says the run holds the registry's lease (released when it
	// ends); began says it recorded that it writes the registry's specs
	// (the lease says so too); wroteNothing, that it ends without a spec
	// write or a record, so the writer it found goes back with the lease.
	leased, began, wroteNothing bool
	// recovering says the last run did not finish: what it wrote may
	// still be pending.
	recovering bool
	k          knowledge // the stored specs and the plan over them
	// manifest is the trusted manifest as read (trustedManifest).
	manifest *manifestRead
	done     outcomes
	// t is a targeted run's own (nil for a full run, and once a targeted
	// run turned into a full one: Backstop).
	t *targeting
}

// newRun starts a run of reg with id; "" is a new run's id (NewRunID's,
// else a random UUID).
func (r *Runner) newRun(reg Registry, id string) *run {
	if id == "" {
		id = uuid.NewString()
		if r.NewRunID != nil {
			id = r.NewRunID()
		}
	}
	ops := &store.Ops{}
	rec := store.Run{ID: id, StartedAt: r.now().UTC()}
	if reg.Describes.Type != "" {
		src := reg.Describes
		rec.Source = &src
	}
	return &run{Runner: r, reg: reg, st: r.Store.WithOps(ops), ops: ops,
		log: r.logger().With(logging.FieldRegistry, reg.Name, logging.FieldRun, id), rec: rec}
}

// A step is one part of a run: done ends the run with nothing more to
// do, an error ends it failed.
type step func(context.Context) (done bool, err error)

// do carries out steps in order until one fails or says the run is done.
func (r *run) do(ctx context.Context, steps ...step) error {
	for _, s := range steps {
		if done, err := s(ctx); done || err != nil {
			return err
		}
	}
	return nil
}

// readStatus reads the registry's status: what the last run left, which
// this one compares with and, should it fail, records against.
func (r *run) readStatus(ctx context.Context) (bool, error) {
	status, err := r.st.RegistryStatus(ctx, r.reg.Name)
	r.status = status
	return false, err
}

// fetch lists the registry. Any failure ends the run before the store is
// read: recorded, but not an error (the catalog is untouched).
func (r *run) fetch(ctx context.Context) (bool, error) {
	// Validators only while the last run is a baseline: a 304 says the
	// listing is the one that run saw, and leaves nothing to plan with,
	// so it is of use only when the run may then stop (unchangedListing).
	// After a run that held a version back, died or met a conflict, the
	// run must plan over the listing itself. A dry run never sends them.
	var opts registry.FetchOptions
	if !r.dry && baseline(r.status) {
		opts = registry.FetchOptions{ETag: r.status.ETag, PreviousDigest: r.status.ListingDigest}
	}
	// What the run recorded of each entry, if the source asks: only
	// when it would read an entry, so an unchanged listing costs no read.
	if !r.dry && !r.noHints {
		opts.Hints = r.hints(r.status)
	}
	if r.noHints {
		opts.PreviousDigest = ""
	}
	listing, err := r.reg.Source.Fetch(ctx, opts)
	if r.manifest != nil && r.manifest.err != nil {
		// The store failed answering the source: the run's failure, not
		// the registry's.
		return false, r.manifest.err
	}
	if err != nil {
		r.ended, r.rec.Error = api.ResultFetchFailed, err.Error()
		return true, nil
	}
	r.listing = listing
	return false, nil
}

// unchangedListing ends a run whose listing is the last successful one's:
// with nothing marked there is nothing to do; otherwise only step 3 has
// work, so only the marked specs are read.
func (r *run) unchangedListing(ctx context.Context) (bool, error) {
	st := r.status
	if r.listing.NotModified && !baseline(st) {
		// A source answers so only to validators, which it is given only
		// with a baseline (fetch); planning over no entries would mark
		// everything.
		r.ended, r.rec.Error = api.ResultFetchFailed, "the source says the listing is unchanged, and there is no baseline to compare it with"
		return true, nil
	}
	if !baseline(st) || !(r.listing.NotModified || r.listing.Digest == st.ListingDigest) {
		return false, nil
	}
	if st.Marked == 0 {
		r.ended = api.ResultUnchanged
		return true, nil
	}
	r.short = true
	return true, r.do(ctx, r.readMarked, r.traced(stepDeleteMarked, r.deleteMarked), r.requestCommit)
}

// baseline reports whether the status' listing digest describes the
// store: the last full run succeeded (or found it unchanged) with no
// conflict and nothing held back, and no run died after it.
func baseline(st *store.RegistryStatus) bool {
	return st.ListingDigest != "" &&
		(st.LastRun.Result == api.ResultSucceeded || st.LastRun.Result == api.ResultUnchanged) &&
		len(st.LastRun.Conflicts) == 0 &&
		// A lease left behind, or a writer that never recorded, is a run
		// that died part-way: its writes (and pending changes) are not
		// described by the recorded listing.
		st.Lease == nil && !st.Interrupted() &&
		// A held-back version may be adoptable now that instances went.
		len(st.LastRun.HeldBack) == 0
}

// readMarked is what the short run knows: the marked specs, each kept if
// instances use it (as the full run's plan keeps it) or else to delete if
// nothing references it by then (DeleteMarked checks again in its
// transaction). One marked after the last successful run (a targeted run
// marks between full runs) is not deleted yet, and this run records
// itself so that its grace starts (graceWaits); it goes to DeleteMarked
// even if used, which skips it, so it is not reported kept.
func (r *run) readMarked(ctx context.Context) (bool, error) {
	marked, err := r.st.MarkedSpecs(ctx, r.reg.Name)
	if err != nil {
		return false, err
	}
	stored := storedFrom(marked)
	var plan Plan
	for i, m := range marked {
		waits := !m.MarkedAt.Before(r.status.LastSuccessAt)
		if waits {
			r.graceWaits = true
		}
		if !waits && stored[i].Instances > 0 {
			plan.Keep = append(plan.Keep, stored[i])
		} else {
			plan.Delete = append(plan.Delete, stored[i])
		}
	}
	r.k = knowledge{stored: stored, plan: plan}
	return false, nil
}

// lease takes the registry's lease, when the runner uses one: it also
// says this run writes the registry's specs now (began). A lease another
// run holds ends the run busy, with a failure.Precondition error.
//
// A run of the registry that recorded (or began writing) between this
// run's status read and its lease may have written what upstream said
// after this run fetched: carried on, this run would write an older
// state over it. So the run starts again from the fetch, holding the
// lease, from the status as the lease found it.
func (r *run) lease(ctx context.Context) (bool, error) {
	if r.leased || r.LeaseTTL <= 0 {
		return false, nil
	}
	before, err := r.st.TakeLease(ctx, r.reg.Name, store.Lease{Holder: r.rec.ID, StartedAt: r.rec.StartedAt}, r.LeaseTTL)
	if err != nil {
		r.ended = api.ResultBusy
		return false, err
	}
	r.leased, r.began = true, true
	if overtaken(r.status, before) {
		r.log.InfoContext(ctx, "another run of the registry ran since this one read its status; fetching again")
		r.status = before
		return r.full(ctx)
	}
	return false, nil
}

// overtaken reports whether a run recorded, or began writing, between two
// reads of a registry's status.
func overtaken(was, now *store.RegistryStatus) bool {
	return was.LastRun.ID != now.LastRun.ID || targetedID(was) != targetedID(now) || was.Writer != now.Writer
}

func targetedID(st *store.RegistryStatus) string {
	if st.LastTargeted == nil {
		return ""
	}
	return st.LastTargeted.ID
}

// releaseLease gives the lease up when the run ends.
func (r *run) releaseLease(ctx context.Context) {
	if !r.leased {
		return
	}
	// A fresh context: the run's may be done, the lease must still go.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	release := func() error { return r.st.ReleaseLease(rctx, r.reg.Name, r.rec.ID) }
	if r.wroteNothing {
		release = func() error { return r.st.ReleaseLeaseWriting(rctx, r.reg.Name, r.rec.ID, r.status.Writer) }
	}
	if err := release(); err != nil {
		r.log.WarnContext(ctx, "lease not released; it expires by itself", "error", err)
	}
}

// recoverLastRun follows a run that did not finish: what that run wrote
// may still be pending, and, if it ran the version before the committer,
// marked the old way.
func (r *run) recoverLastRun(ctx context.Context) (bool, error) {
	st := r.status
	r.recovering = st.Lease != nil || st.Interrupted() || st.LastRun.Result == api.ResultError ||
		// A targeted run that failed after the last full run.
		(st.LastTargeted != nil && st.LastTargeted.Result == api.ResultError && st.LastTargeted.StartedAt.After(st.LastRun.StartedAt))
	if !r.recovering {
		return false, nil
	}
	n, err := r.st.AdoptLegacyPending(ctx, r.reg.Name)
	if err != nil {
		return false, err
	}
	if n > 0 {
		r.log.WarnContext(ctx, "adopted changes a crashed run of the previous version left pending", "changes", n)
	}
	return false, nil
}

// know reads what the store holds for the registry (from the manifest
// when it can be trusted, then in full only the specs the plan needs) and
// plans the run.
func (r *run) know(ctx context.Context) (bool, error) {
	k, err := r.known(ctx, Candidates(r.reg.Name, r.listing.Entries))
	if err != nil {
		return false, err
	}
	r.k = k
	return false, nil
}

// begin records, before the run's first spec write, that it writes now
// (with a lease, the lease said so), so that the last run's manifest is no
// longer trusted should this one die part-way.
func (r *run) begin(ctx context.Context) (bool, error) {
	if r.began || !r.k.plan.Writes() {
		return false, nil
	}
	if err := r.st.BeginWriting(ctx, r.reg.Name, r.rec.ID); err != nil {
		return false, err
	}
	r.began = true
	return false, nil
}

// deleteMarked deletes what an earlier run marked and nothing references;
// the rest of the marked specs are kept.
func (r *run) deleteMarked(ctx context.Context) (bool, error) {
	r.done.keep = r.k.plan.Keep
	for _, d := range r.k.plan.Delete {
		outcome, refs, err := r.st.DeleteMarked(ctx, r.reg.Name, d.ID, r.rec.ID, r.status.LastSuccessAt)
		if err != nil {
			return false, err
		}
		r.done.deletes = append(r.done.deletes, deletion{spec: d, outcome: outcome, refs: refs})
	}
	return false, nil
}

// upsert writes what is offered. New specs (not among the ones the run
// knows) are created fifty to a commit, without reading them first; specs
// the run read are written fifty to a commit on condition that they are
// as read. The commits touch distinct documents, so a couple run at once.
// Outcomes are kept in plan order.
func (r *run) upsert(ctx context.Context) (bool, error) {
	plan := r.k.plan
	r.done.unchanged = plan.Unchanged
	offer := func(c Candidate) store.Offer {
		return store.Offer{Registry: r.reg.Name, Entry: c.Entry, Ref: c.Ref, Spec: c.Spec, Digest: c.Digest, Run: r.rec.ID}
	}
	creates := make([]store.Offer, len(plan.Create))
	for i, c := range plan.Create {
		creates[i] = offer(c)
	}
	batches, err := store.CreateBatches(creates)
	if err != nil {
		return false, err
	}
	// A batch is fifty specs in one request: two in flight keep the
	// store busy, and more would only hold more of them in memory.
	created, err := inParallel(ctx, min(r.concurrency(), createBatchesInFlight), batches, r.st.CreateSpecs)
	if err != nil {
		return false, err
	}
	upserts := slices.Concat(plan.Update, plan.Unmark, plan.Repair)
	var updates [][]store.SpecUpdate
	for i, c := range upserts {
		if i%writeBatch == 0 {
			updates = append(updates, nil)
		}
		updates[len(updates)-1] = append(updates[len(updates)-1], store.SpecUpdate{Offer: offer(c), Read: r.k.full[c.ID]})
	}
	upserted, err := inParallel(ctx, min(r.concurrency(), createBatchesInFlight), updates, r.st.UpdateSpecs)
	if err != nil {
		return false, err
	}
	results := slices.Concat(slices.Concat(created...), slices.Concat(upserted...))
	for i, c := range slices.Concat(plan.Create, upserts) {
		r.done.offers = append(r.done.offers, offering{c: c, res: results[i]})
	}
	return false, nil
}

// findBlockers names, on each new version the plan holds back, the
// instances it would strand.
func (r *run) findBlockers(ctx context.Context) (bool, error) {
	held := heldBackRecords(r.k.plan.HoldBack)
	if err := blockingInstances(ctx, r.st, r.k.plan.HoldBack, held); err != nil {
		return false, err
	}
	r.done.held = held
	return false, nil
}

// holdBack records each new version that would strand instances as held
// back; the served version stays (and is unmarked if it was marked: the
// registry offers the spec).
func (r *run) holdBack(ctx context.Context) (bool, error) {
	for _, h := range r.done.held {
		outcome, err := r.st.HoldBack(ctx, r.reg.Name, h, r.rec.ID)
		if err != nil {
			return false, err
		}
		r.done.holds = append(r.done.holds, outcome)
	}
	return false, nil
}

// recordEntryErrors records each broken entry's error on the stored spec
// it protects.
func (r *run) recordEntryErrors(ctx context.Context) (bool, error) {
	for _, e := range r.k.plan.ErrorOn {
		if err := r.st.RecordEntryError(ctx, e.SpecID, e.Message); err != nil {
			return false, err
		}
		r.done.errorsOn = append(r.done.errorsOn, e.SpecID)
	}
	return false, nil
}

// mark marks what is no longer offered (unless the guard withheld it), on
// condition that each is as read.
func (r *run) mark(ctx context.Context) (bool, error) {
	toMark := make([]store.SpecRecord, len(r.k.plan.Mark))
	for i, m := range r.k.plan.Mark {
		toMark[i] = r.k.full[m.ID]
	}
	marks, err := r.st.MarkSpecs(ctx, r.reg.Name, r.rec.ID, toMark)
	if err != nil {
		return false, err
	}
	r.done.marks = marks
	return false, nil
}

// requestCommit counts the changes the run wrote, every write being done,
// and asks the committer to number them. A run after one that did not
// finish asks too: that run may have left pending changes and died before
// asking. Without a requester the caller commits after its runs.
func (r *run) requestCommit(ctx context.Context) (bool, error) {
	r.done.changes = changesWritten(r.done)
	if r.Commits == nil || (r.done.changes == 0 && !r.recovering) {
		return false, nil
	}
	if err := r.Commits.RequestCommit(ctx, queue.CommitRequest{Registry: r.reg.Name, Run: r.rec.ID, EventAt: r.eventAt}); err != nil {
		return false, fmt.Errorf("the run's %d changes are written but not committed: %w", r.done.changes, err)
	}
	r.log.InfoContext(ctx, "commit requested", "changes", r.done.changes)
	return false, nil
}

// recordConflicts tells each owner which of its spec ids this registry
// offers too, and withdraws what it said last time and is no longer true.
//
// A targeted run does not: it knows the conflicts of its entries only,
// and an owner's record is of all the registry's. Its conflicts are in
// its status and its entry errors, and it leaves the listing digest to
// the next full run, which records them.
func (r *run) recordConflicts(ctx context.Context) (bool, error) {
	if r.t != nil {
		return false, nil
	}
	byOwner := map[string][]string{}
	for _, c := range conflicts(r.done) {
		byOwner[c.Owner] = append(byOwner[c.Owner], c.SpecID)
	}
	for _, c := range r.status.LastRun.Conflicts {
		if _, still := byOwner[c.Owner]; !still {
			byOwner[c.Owner] = nil
		}
	}
	owners := make([]string, 0, len(byOwner))
	for o := range byOwner {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	for _, o := range owners {
		ids := byOwner[o]
		sort.Strings(ids)
		if err := r.st.SetContested(ctx, o, r.reg.Name, ids); err != nil {
			return false, err
		}
	}
	return false, nil
}
