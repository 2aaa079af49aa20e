package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/specsync/specsync/pkg/api"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// MaxRecordedErrors bounds the entry errors a status keeps (sorted, so the
// same ones are kept every time).
const MaxRecordedErrors = 100

// Registry is one configured registry as the runner needs it.
type Registry struct {
	Name   string
	Source registry.Source
	Policy Policy
}

// Runner reconciles registries into a store.
type Runner struct {
	Store  *store.Store
	Logger *slog.Logger
	// LeaseTTL, when set, makes every run that will write take the
	// registry's lease first, so two runs of one registry never
	// interleave; a run that finds it held fails with a
	// failure.Precondition error, to be retried later. The lease outlives
	// a crashed holder by at most this long.
	LeaseTTL time.Duration
	// Commits, when set, is asked for a commit after every run that left
	// pending changes (the commit topic in production): no run numbers
	// changes or writes meta/catalog itself, the one Committer does. When
	// nil the caller commits (Committer.Commit) after its runs: the local
	// tools and the tests.
	Commits CommitRequester
	// Concurrency bounds the spec writes of a run in flight at once
	// (default DefaultConcurrency).
	Concurrency int
	// Now and NewRunID are replaceable for tests.
	Now      func() time.Time
	NewRunID func() string
}

// CommitRequester asks the committer to number the pending changes
// (queue.CommitPublisher in production).
type CommitRequester interface {
	RequestCommit(ctx context.Context, req queue.CommitRequest) error
}

// DefaultConcurrency is how many spec writes a run has in flight.
const DefaultConcurrency = 8

// createBatchesInFlight bounds the batched creates a run has in flight.
const createBatchesInFlight = 2

func (r *Runner) concurrency() int {
	if r.Concurrency > 0 {
		return r.Concurrency
	}
	return DefaultConcurrency
}

// inParallel calls f on every item, at most n at a time, and returns the
// results in item order; the first error cancels the rest and is returned.
func inParallel[T, R any](ctx context.Context, n int, items []T, f func(context.Context, T) (R, error)) ([]R, error) {
	out := make([]R, len(items))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for i, it := range items {
		g.Go(func() error {
			r, err := f(gctx, it)
			out[i] = r
			return err
		})
	}
	return out, g.Wait()
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// Reconcile runs the five steps for one registry and returns the run as
// recorded. A registry that cannot be fetched is a recorded, successful
// outcome (nil error): the catalog is untouched and the next bootstrap
// tries again. An error is returned only when the store failed, and it is
// classified (see package failure) so a caller can decide to retry; every
// step is idempotent, so running again is always safe.
func (r *Runner) Reconcile(ctx context.Context, reg Registry) (store.Run, error) {
	runID := uuid.NewString()
	if r.NewRunID != nil {
		runID = r.NewRunID()
	}
	run := r.newRun(reg, runID)
	defer run.releaseLease(ctx)
	err := run.do(ctx,
		run.readStatus,
		run.fetch, // step 1
		run.unchangedListing,
		run.lease,
		run.recover,
		run.know,         // step 2
		run.begin,        // before the first spec write
		run.deleteMarked, // step 3
		run.upsert,       // step 4
		run.findBlockers,
		run.holdBack,
		run.recordEntryErrors,
		run.mark, // step 5
		run.requestCommit,
		run.recordConflicts,
	)
	return run.record(ctx, err)
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
	// nothing.
	dry bool

	status  *store.RegistryStatus // as read when the run started
	listing *registry.Listing
	// ended is the result of a step that ended the run early: the
	// registry could not be fetched, its listing is unchanged with
	// nothing marked, or another run holds its lease.
	ended api.RunResult
	// short says the listing is the last successful one's while marked
	// specs wait: the run only deletes those nothing references any more.
	short bool
	// leased says the run holds the registry's lease (released when it
	// ends); began says it recorded that it writes the registry's specs
	// (the lease says so too).
	leased, began bool
	// recovering says the last run did not finish: what it wrote may
	// still be pending.
	recovering bool
	k          knowledge // the stored specs and the plan over them
	done       outcomes
}

func (r *Runner) newRun(reg Registry, id string) *run {
	ops := &store.Ops{}
	return &run{Runner: r, reg: reg, st: r.Store.WithOps(ops), ops: ops,
		log: r.logger().With("registry", reg.Name, "run", id),
		rec: store.Run{ID: id, StartedAt: r.now().UTC()}}
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

func (r *run) readStatus(ctx context.Context) (bool, error) {
	status, err := r.st.RegistryStatus(ctx, r.reg.Name)
	r.status = status
	return false, err
}

// fetch lists the registry. Any failure ends the run before the store is
// read: recorded, but not an error (the catalog is untouched).
func (r *run) fetch(ctx context.Context) (bool, error) {
	// A dry run sends no validators: a 304 would leave nothing to plan with.
	var opts registry.FetchOptions
	if !r.dry {
		opts = registry.FetchOptions{ETag: r.status.ETag, PreviousDigest: r.status.ListingDigest}
	}
	listing, err := r.reg.Source.Fetch(ctx, opts)
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
	baseline := st.ListingDigest != "" &&
		(st.LastRun.Result == api.ResultSucceeded || st.LastRun.Result == api.ResultUnchanged) &&
		len(st.LastRun.Conflicts) == 0 &&
		// A lease left behind, or a writer that never recorded, is a run
		// that died part-way: its writes (and pending changes) are not
		// described by the recorded listing.
		st.Lease == nil && !st.Interrupted() &&
		// A held-back version may be adoptable now that instances went.
		len(st.LastRun.HeldBack) == 0
	if !baseline || !(r.listing.NotModified || r.listing.Digest == st.ListingDigest) {
		return false, nil
	}
	if st.Marked == 0 {
		r.ended = api.ResultUnchanged
		return true, nil
	}
	r.short = true
	return true, r.do(ctx, r.readMarked, r.deleteMarked, r.requestCommit)
}

// readMarked is what the short run knows: the marked specs, all to delete
// if nothing references them.
func (r *run) readMarked(ctx context.Context) (bool, error) {
	marked, err := r.st.MarkedSpecs(ctx, r.reg.Name)
	if err != nil {
		return false, err
	}
	stored := storedFrom(marked)
	r.k = knowledge{stored: stored, plan: Plan{Delete: stored}}
	return false, nil
}

// lease takes the registry's lease, when the runner uses one: it also
// says this run writes the registry's specs now (began). A lease another
// run holds ends the run busy, with a failure.Precondition error.
func (r *run) lease(ctx context.Context) (bool, error) {
	if r.LeaseTTL <= 0 {
		return false, nil
	}
	if err := r.st.AcquireLease(ctx, r.reg.Name, r.rec.ID, r.LeaseTTL); err != nil {
		r.ended = api.ResultBusy
		return false, err
	}
	r.leased, r.began = true, true
	return false, nil
}

// releaseLease gives the lease up when the run ends.
func (r *run) releaseLease(ctx context.Context) {
	if !r.leased {
		return
	}
	// A fresh context: the run's may be done, the lease must still go.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.st.ReleaseLease(rctx, r.reg.Name, r.rec.ID); err != nil {
		r.log.Warn("lease not released; it expires by itself", "error", err)
	}
}

// recover follows a run that did not finish: what that run wrote may still
// be pending, and, if it ran the version before the committer, marked the
// old way.
func (r *run) recover(ctx context.Context) (bool, error) {
	st := r.status
	r.recovering = st.Lease != nil || st.Interrupted() || st.LastRun.Result == api.ResultError
	if !r.recovering {
		return false, nil
	}
	n, err := r.st.AdoptLegacyPending(ctx, r.reg.Name)
	if n > 0 {
		r.log.Warn("adopted changes a crashed run of the previous version left pending", "changes", n)
	}
	return false, err
}

// know reads what the store holds for the registry (from the manifest
// when it can be trusted, then in full only the specs the plan needs) and
// plans the run.
func (r *run) know(ctx context.Context) (bool, error) {
	k, err := r.known(ctx, r.st, r.reg, r.status, Candidates(r.reg.Name, r.listing.Entries))
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
	if err := r.Commits.RequestCommit(ctx, queue.CommitRequest{Registry: r.reg.Name, Run: r.rec.ID}); err != nil {
		return false, fmt.Errorf("the run's %d changes are written but not committed: %w", r.done.changes, err)
	}
	r.log.Info("commit requested", "changes", r.done.changes)
	return false, nil
}

// recordConflicts tells each owner which of its spec ids this registry
// offers too, and withdraws what it said last time and is no longer true.
func (r *run) recordConflicts(ctx context.Context) (bool, error) {
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

// result is how the run ended, err being the step that failed, if one did.
func (r *run) result(err error, counts store.RunCounts, kept []store.KeptSpec) api.RunResult {
	switch {
	case r.ended != "":
		return r.ended
	case err != nil:
		return api.ResultError
	case r.dry:
		return api.ResultDryRun
	case r.short && counts.Deleted == 0 && sameKept(kept, r.status.LastRun.Kept):
		return api.ResultUnchanged // every marked spec is still referenced, as last time
	case r.k.plan.Guarded != "":
		return api.ResultGuarded
	}
	return api.ResultSucceeded
}

// report is the run as it ended, err being the step that failed, if one
// did. Its counts are what the steps did; a run that failed part-way
// counts the writes it made, and only a run that finished lists (and
// counts) its entry errors, conflicts and held-back versions.
func (r *run) report(err error) store.Run {
	rec := r.rec
	if err != nil {
		rec.Error = err.Error()
	}
	rec.Guard = r.k.plan.Guarded
	rec.Counts = runCounts(r.done)
	rec.Kept = keptSpecs(r.done)
	rec.Result = r.result(err, rec.Counts, rec.Kept)
	switch finished := err == nil && r.ended == ""; {
	case finished && r.short:
		// The listing, and so its entry errors, are the last run's.
		last := r.status.LastRun
		rec.Errors, rec.ErrorsTotal, rec.Counts.EntryErrors = last.Errors, last.ErrorsTotal, last.Counts.EntryErrors
	case finished:
		recordErrors(&rec, entryErrors(r.k.plan, r.done))
		rec.Conflicts = conflicts(r.done)
		rec.HeldBack = r.done.held
		rec.Counts.HeldBack = len(r.k.plan.HoldBack)
	}
	rec.FinishedAt = r.now().UTC()
	rec.DurationMS = rec.FinishedAt.Sub(rec.StartedAt).Milliseconds()
	rec.Ops = r.ops.Snapshot()
	return rec
}

// record ends the run: it reports it, writes it to the registry's status
// (the one write that says how the run went) and returns it with the
// run's error, if it has one.
func (r *run) record(ctx context.Context, err error) (store.Run, error) {
	rec := r.report(err)
	wrap := func(err error) error { return fmt.Errorf("reconcile %s: %w", r.reg.Name, err) }
	switch {
	case r.status == nil || rec.Result == api.ResultBusy:
		// No status to record against, or another run's turn: it records.
		return rec, wrap(err)
	case rec.Result == api.ResultUnchanged:
		// Nothing changed: do not pay a write to say so.
		if r.short {
			r.log.Info("registry unchanged; marked specs still referenced", "kept", rec.Counts.Kept)
		} else {
			r.log.Info("registry unchanged", "firestore_reads", rec.Ops.Reads)
		}
		return rec, nil
	}

	// What becomes of the registry's baseline (the listing a later run
	// compares with), and how many specs stay marked: a run that failed
	// or could not fetch keeps the old baseline, so the next run does the
	// full work again.
	full := err == nil && r.ended == "" && !r.short // it planned over every spec and carried the plan out
	success, digest, etag, marked := false, "", "", r.status.Marked
	switch {
	case err != nil:
		r.log.Error("reconcile failed part-way; it is safe to run again", "error", err)
	case rec.Result == api.ResultFetchFailed:
		r.log.Warn("registry fetch failed; nothing changed", "error", rec.Error)
	case r.short:
		success, digest, etag, marked = true, r.status.ListingDigest, r.status.ETag, markedAfter(r.k.stored, r.done)
	default:
		success, digest, etag, marked = rec.Result == api.ResultSucceeded, r.listing.Digest, r.listing.ETag, markedAfter(r.k.stored, r.done)
		if rec.Guard != "" {
			r.log.Warn("mass-deletion guard withheld marking", "reason", rec.Guard)
		}
		if len(rec.HeldBack) > 0 {
			r.log.Warn("new versions held back: they would strand instances", "held_back", rec.HeldBack)
		}
	}

	// A full run records with its status the manifest of what it left,
	// unless it wrote no spec and started from a manifest that still
	// describes the store.
	var rerr error
	if full && (r.began || !r.k.fromManifest || r.k.gone > 0) {
		// (It adds what recording costs to the run's counts.)
		var written bool
		written, rerr = r.st.RecordRunWithManifest(ctx, r.reg.Name, &rec, success, digest, etag, marked,
			store.Seen{LastRun: r.status.LastRun.ID, Writer: r.status.Writer, Began: r.began}, manifestAfter(r.k, r.done).entries())
		if rerr == nil && !written {
			r.log.Warn("another run of the registry ran meanwhile: no manifest recorded, the next run reads every spec")
		}
	} else {
		rec.Ops.Writes++ // the status write below
		rerr = r.st.RecordRun(ctx, r.reg.Name, rec, success, digest, etag, marked)
	}
	switch {
	case err != nil:
		// Recording it was best effort: the store that just failed may
		// fail again.
		return rec, wrap(err)
	case rerr != nil:
		return rec, wrap(rerr)
	case r.short:
		r.log.Info("registry unchanged; deleted unreferenced marked specs", "deleted", rec.Counts.Deleted, "kept", rec.Counts.Kept)
	case full:
		r.log.Info("registry reconciled", "result", rec.Result, "counts", rec.Counts, "firestore", rec.Ops, "duration_ms", rec.DurationMS, "manifest", r.k.fromManifest, "specs_read", r.k.read)
	}
	return rec, nil
}

// Candidates turns listing entries into planning candidates: a private
// copy of each spec (sources may cache theirs) with ids assigned for the
// registry and its digest computed.
func Candidates(registryName string, entries []registry.Entry) []Candidate {
	out := make([]Candidate, 0, len(entries))
	for _, e := range entries {
		c := Candidate{Entry: e.Name, Ref: e.Ref, Err: e.Err}
		if e.Err == nil && e.Spec != nil {
			s, err := cloneSpec(e.Spec)
			if err != nil {
				c.Err = err
			} else {
				spec.AssignIDs(s, registryName)
				c.Spec, c.ID, c.Digest = s, s.ID, spec.Digest(s)
			}
		}
		out = append(out, c)
	}
	return out
}

func cloneSpec(s *spec.Spec) (*spec.Spec, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("spec %s: encode: %w", s.Name, err)
	}
	var c spec.Spec
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("spec %s: decode: %w", s.Name, err)
	}
	return &c, nil
}

// planErrors are the plan's entry errors in the store's shape.
func planErrors(plan Plan) []store.EntryError {
	out := make([]store.EntryError, 0, len(plan.Errors))
	for _, e := range plan.Errors {
		out = append(out, store.EntryError(e))
	}
	return out
}

// recordErrors puts entry errors on a run: sorted, counted in full, and
// capped at MaxRecordedErrors so a status document stays small.
func recordErrors(run *store.Run, errs []store.EntryError) {
	sortEntryErrors(errs)
	run.Counts.EntryErrors = len(errs)
	run.ErrorsTotal = len(errs)
	if len(errs) > MaxRecordedErrors {
		errs = errs[:MaxRecordedErrors]
	}
	run.Errors = errs
}

func sortEntryErrors(es []store.EntryError) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].Entry != es[j].Entry {
			return es[i].Entry < es[j].Entry
		}
		return es[i].Message < es[j].Message
	})
}

func sameKept(a, b []store.KeptSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// DryRun fetches the registry and plans a run without writing anything:
// no spec, no status, no lease, no revision. Its counts are what a real
// run would do now (created, updated, unmarked, repaired, marked, deleted,
// kept); a failed fetch is reported as it would be, without being
// recorded.
func (r *Runner) DryRun(ctx context.Context, reg Registry) (store.Run, error) {
	run := r.newRun(reg, "dry-run")
	run.dry = true
	err := run.do(ctx, run.fetch, run.know, run.assumePlanned, run.findBlockers)
	rec := run.report(err)
	if err != nil {
		return rec, fmt.Errorf("dry run %s: %w", reg.Name, err)
	}
	if rec.Result == api.ResultDryRun {
		rec.Planned = plannedChanges(run.k.plan) // planned.go: the plan by name, for the operator's diff
	}
	return rec, nil
}

// assumePlanned is, for a dry run, what the writes would do if each went
// as planned.
func (r *run) assumePlanned(context.Context) (bool, error) {
	r.done = plannedOutcomes(r.k.plan)
	return false, nil
}

// plannedOutcomes are the outcomes of carrying out p with every write
// going as planned: no conflict, no spec gone or changed meanwhile, every
// marked spec unreferenced still.
func plannedOutcomes(p Plan) outcomes {
	o := outcomes{keep: p.Keep, unchanged: p.Unchanged, marks: make([]bool, len(p.Mark))}
	for _, d := range p.Delete {
		o.deletes = append(o.deletes, deletion{spec: d, outcome: store.Deleted})
	}
	as := func(cs []Candidate, outcome store.UpsertOutcome) {
		for _, c := range cs {
			o.offers = append(o.offers, offering{c: c, res: store.UpsertResult{Outcome: outcome}})
		}
	}
	as(p.Create, store.Created)
	as(p.Update, store.Updated)
	as(p.Unmark, store.Unmarked)
	as(p.Repair, store.Repaired)
	for i := range o.marks {
		o.marks[i] = true
	}
	return o
}

// storedFrom is what planning needs of the stored records.
func storedFrom(records []store.SpecRecord) []Stored {
	out := make([]Stored, len(records))
	for i, rec := range records {
		out[i] = Stored{ID: rec.ID, Entry: rec.Entry, Name: rec.Name, Digest: rec.Digest, State: rec.State, Instances: int(rec.Instances), EntryError: rec.EntryError,
			HeldBack: rec.HeldBack != nil, PlansInUse: counts(rec.PlanInstances), PlatformsInUse: counts(rec.PlatformInstances)}
	}
	return out
}

func counts(m map[string]int64) map[string]int {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

func heldBackRecords(hs []HeldBack) []store.HeldBackSpec {
	var out []store.HeldBackSpec
	for _, h := range hs {
		out = append(out, store.HeldBackSpec{SpecID: h.Candidate.ID, Name: h.Candidate.Spec.Name, Digest: h.Candidate.Digest, Blockers: h.Blockers})
	}
	return out
}

// blockingInstances names, on each held-back record, the instances the
// new version would strand: one query per held-back spec, which is rare.
func blockingInstances(ctx context.Context, st *store.Store, hs []HeldBack, records []store.HeldBackSpec) error {
	for i, h := range hs {
		insts, err := st.SpecInstances(ctx, h.Candidate.ID, 10*store.MaxBlockingInstances)
		if err != nil {
			return err
		}
		var ids []string
		for _, in := range insts {
			if Strands(h.Candidate.Spec, in.PlanID, in.Platform) {
				ids = append(ids, in.ID)
			}
		}
		sort.Strings(ids)
		if len(ids) > store.MaxBlockingInstances {
			ids = ids[:store.MaxBlockingInstances]
		}
		records[i].Instances = ids
	}
	return nil
}

// outcomes are what a run's steps did, each step adding its own as it
// goes: a run that failed part-way holds those of the writes it made. The
// run's counts, the specs it kept, the specs that stay marked and the
// manifest it leaves are all worked out from them.
type outcomes struct {
	keep      []Stored   // step 3: the marked specs the plan keeps (instances use them)
	deletes   []deletion // step 3: each delete, in plan order
	unchanged int        // step 4: the entries the plan found unchanged (nothing to write)
	offers    []offering // step 4: each create and upsert, in plan order
	// held are the new versions held back, with the instances each would
	// strand; holds is what recording each did (HoldBack), in order.
	held     []store.HeldBackSpec
	holds    []store.HoldOutcome
	errorsOn []string // the specs an entry error was recorded on
	marks    []bool   // step 5: whether each spec the plan marks was marked
	// changes is how many catalog changes the run wrote, counted when all
	// its writes are done (changesWritten).
	changes int
}

// deletion is what deleting a marked spec did; refs are the instances
// that still use it when it was kept.
type deletion struct {
	spec    Stored
	outcome store.DeleteOutcome
	refs    int64
}

// offering is what writing an offered candidate did.
type offering struct {
	c   Candidate
	res store.UpsertResult
}

// runCounts are a run's counts, from what its steps did.
func runCounts(o outcomes) store.RunCounts {
	c := store.RunCounts{Unchanged: o.unchanged, Kept: len(keptSpecs(o)), Changes: o.changes}
	for _, d := range o.deletes {
		if d.outcome == store.Deleted {
			c.Deleted++
		}
	}
	for _, u := range o.offers {
		switch u.res.Outcome {
		case store.Created:
			c.Created++
		case store.Updated:
			c.Updated++
		case store.Unmarked:
			c.Unmarked++
		case store.Repaired:
			c.Repaired++
		case store.Unchanged:
			c.Unchanged++
		case store.Conflict:
			c.Conflicts++
		}
	}
	for _, h := range o.holds {
		if h == store.HeldUnmarked {
			c.Unmarked++
		}
	}
	for _, ok := range o.marks {
		if ok {
			c.Marked++
		}
	}
	return c
}

// changesWritten is how many catalog changes the writes made: every
// create, update, unmark, mark and delete, and each version held back for
// the first time. Each left a pending change for the committer to number.
func changesWritten(o outcomes) int {
	c := runCounts(o)
	n := c.Created + c.Updated + c.Unmarked + c.Marked + c.Deleted
	for _, h := range o.holds {
		if h == store.HeldNew {
			n++
		}
	}
	return n
}

// keptSpecs are the marked specs the run kept because instances use them:
// the plan's, then those a delete found referenced.
func keptSpecs(o outcomes) []store.KeptSpec {
	var out []store.KeptSpec
	for _, s := range o.keep {
		out = append(out, store.KeptSpec{SpecID: s.ID, Name: s.Name, Instances: int64(s.Instances)})
	}
	for _, d := range o.deletes {
		if d.outcome == store.Referenced {
			out = append(out, store.KeptSpec{SpecID: d.spec.ID, Name: d.spec.Name, Instances: d.refs})
		}
	}
	return out
}

// conflicts are the offered spec ids another registry owns.
func conflicts(o outcomes) []store.SpecConflict {
	var out []store.SpecConflict
	for _, u := range o.offers {
		if u.res.Outcome == store.Conflict {
			out = append(out, store.SpecConflict{SpecID: u.c.ID, Entry: u.c.Entry, Owner: u.res.Owner})
		}
	}
	return out
}

// entryErrors are the run's entry errors: the plan's, then one for each
// conflict (the entry offers a spec it cannot have).
func entryErrors(plan Plan, o outcomes) []store.EntryError {
	out := planErrors(plan)
	for _, u := range o.offers {
		if u.res.Outcome == store.Conflict {
			out = append(out, store.EntryError{Entry: u.c.Entry, Ref: u.c.Ref, SpecID: u.c.ID,
				Message: fmt.Sprintf("spec id %s is already owned by registry %q; the owner keeps it", u.c.ID, u.res.Owner)})
		}
	}
	return out
}

// markedAfter is how many of the registry's specs stay marked after the
// run, from those it knew (stored) and what it did: it drives the short
// path of the next run with an unchanged listing.
func markedAfter(stored []Stored, o outcomes) int {
	n := 0
	wasMarked := map[string]bool{}
	for _, s := range stored {
		if s.State == api.SpecMarked {
			n++
			wasMarked[s.ID] = true
		}
	}
	for _, d := range o.deletes {
		if d.outcome == store.Deleted {
			n--
		}
	}
	for _, u := range o.offers {
		if (u.res.Outcome == store.Updated || u.res.Outcome == store.Unmarked) && wasMarked[u.c.ID] {
			n--
		}
	}
	for i, h := range o.holds {
		if h == store.HeldUnmarked && wasMarked[o.held[i].SpecID] {
			n--
		}
	}
	for _, ok := range o.marks {
		if ok {
			n++
		}
	}
	return max(n, 0)
}

// manifestAfter is the registry's manifest as the run leaves it: what it
// knew of every spec, followed through each of its writes in order.
func manifestAfter(k knowledge, o outcomes) manifest {
	m := newManifest(k.stored)
	for _, d := range o.deletes {
		if d.outcome == store.Deleted {
			m.remove(d.spec.ID)
		}
	}
	for _, u := range o.offers {
		m.offered(u.c, u.res.Outcome)
	}
	for i, h := range o.holds {
		m.held(o.held[i].SpecID, h)
	}
	for _, id := range o.errorsOn {
		m.dirty(id)
	}
	for i, ok := range o.marks {
		m.marked(k.plan.Mark[i].ID, ok)
	}
	return m
}
