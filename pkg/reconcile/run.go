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
	ops := &store.Ops{}
	st := r.Store.WithOps(ops)
	runID := uuid.NewString()
	if r.NewRunID != nil {
		runID = r.NewRunID()
	}
	run := store.Run{ID: runID, StartedAt: r.now().UTC()}
	log := r.logger().With("registry", reg.Name, "run", runID)

	// finish stamps the run; closures would capture one copy of it, so
	// it takes the run explicitly.
	finish := func(run *store.Run, result api.RunResult) {
		run.Result = result
		run.FinishedAt = r.now().UTC()
		run.DurationMS = run.FinishedAt.Sub(run.StartedAt).Milliseconds()
		run.Ops = ops.Snapshot()
	}

	status, err := st.RegistryStatus(ctx, reg.Name)
	if err != nil {
		finish(&run, api.ResultError)
		run.Error = err.Error()
		return run, fmt.Errorf("reconcile %s: %w", reg.Name, err)
	}

	// Step 1: fetch. Any failure stops the run before the store is read.
	listing, err := reg.Source.Fetch(ctx, registry.FetchOptions{ETag: status.ETag, PreviousDigest: status.ListingDigest})
	if err != nil {
		run.Error = err.Error()
		finish(&run, api.ResultFetchFailed)
		run.Ops.Writes++ // the status write below
		log.Warn("registry fetch failed; nothing changed", "error", err)
		if rerr := st.RecordRun(ctx, reg.Name, run, false, "", "", status.Marked); rerr != nil {
			return run, fmt.Errorf("reconcile %s: %w", reg.Name, rerr)
		}
		return run, nil
	}

	baseline := status.ListingDigest != "" &&
		(status.LastRun.Result == api.ResultSucceeded || status.LastRun.Result == api.ResultUnchanged) &&
		len(status.LastRun.Conflicts) == 0 &&
		// A lease left behind, or a writer that never recorded, is a run
		// that died part-way: its writes (and pending changes) are not
		// described by the recorded listing.
		status.Lease == nil && !status.Interrupted() &&
		// A held-back version may be adoptable now that instances went.
		len(status.LastRun.HeldBack) == 0
	if baseline && (listing.NotModified || listing.Digest == status.ListingDigest) {
		if status.Marked == 0 {
			finish(&run, api.ResultUnchanged)
			log.Info("registry unchanged", "firestore_reads", run.Ops.Reads)
			return run, nil
		}
		return r.deleteOnly(ctx, st, reg, status, run, finish, log)
	}

	// The lease also says this run writes the registry's specs now (see
	// began below).
	began := false
	if r.LeaseTTL > 0 {
		if err := st.AcquireLease(ctx, reg.Name, runID, r.LeaseTTL); err != nil {
			run.Error = err.Error()
			finish(&run, api.ResultBusy)
			return run, fmt.Errorf("reconcile %s: %w", reg.Name, err)
		}
		defer func() {
			// A fresh context: the run's may be done, the lease must still go.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := st.ReleaseLease(rctx, reg.Name, runID); err != nil {
				log.Warn("lease not released; it expires by itself", "error", err)
			}
		}()
		began = true
	}

	// A run after one that did not finish: what that run wrote may still
	// be pending, and, if it ran the version before the committer, marked
	// the old way.
	recovering := status.Lease != nil || status.Interrupted() || status.LastRun.Result == api.ResultError
	if recovering {
		if n, err := st.AdoptLegacyPending(ctx, reg.Name); err != nil {
			return r.failed(ctx, st, reg, status, run, finish, err)
		} else if n > 0 {
			log.Warn("adopted changes a crashed run of the previous version left pending", "changes", n)
		}
	}

	// Step 2: what the store holds for this registry: from the manifest
	// when it can be trusted, then in full only the specs the plan needs.
	candidates := Candidates(reg.Name, listing.Entries)
	k, err := r.known(ctx, st, reg, status, candidates)
	if err != nil {
		return r.failed(ctx, st, reg, status, run, finish, err)
	}
	stored, plan := k.stored, k.plan
	wasMarked := map[string]bool{}
	for _, s := range stored {
		wasMarked[s.ID] = s.State == api.SpecMarked
	}
	run.Guard = plan.Guarded
	man := newManifest(stored)

	// How many specs stay marked after this run: drives the short path of
	// the next run with an unchanged listing.
	markedAfter := 0
	for _, s := range stored {
		if s.State == api.SpecMarked {
			markedAfter++
		}
	}

	// Before its first spec write the run says it writes now (with a
	// lease, the lease said so), so that the last run's manifest is no
	// longer trusted should this one die part-way.
	if !began && plan.Writes() {
		if err := st.BeginWriting(ctx, reg.Name, runID); err != nil {
			return r.failed(ctx, st, reg, status, run, finish, err)
		}
		began = true
	}

	// Step 3: delete what an earlier run marked and nothing references.
	for _, kept := range plan.Keep {
		run.Counts.Kept++
		run.Kept = append(run.Kept, store.KeptSpec{SpecID: kept.ID, Name: kept.Name, Instances: int64(kept.Instances)})
	}
	for _, d := range plan.Delete {
		outcome, refs, err := st.DeleteMarked(ctx, reg.Name, d.ID, runID, status.LastSuccessAt)
		if err != nil {
			return r.failed(ctx, st, reg, status, run, finish, err)
		}
		switch outcome {
		case store.Deleted:
			run.Counts.Deleted++
			markedAfter--
			man.remove(d.ID)
		case store.Referenced:
			run.Counts.Kept++
			run.Kept = append(run.Kept, store.KeptSpec{SpecID: d.ID, Name: d.Name, Instances: refs})
		}
	}

	// Step 4: upsert what is offered.
	var conflicts []store.SpecConflict
	entryErrors := planErrors(plan)
	run.Counts.Unchanged = plan.Unchanged
	// New specs (not among the ones the run knows) are created fifty to a
	// commit, without reading them first; specs the run read are written
	// fifty to a commit on condition that they are as read. The commits
	// touch distinct documents, so a couple run at once. Outcomes are
	// counted in plan order.
	offer := func(c Candidate) store.Offer {
		return store.Offer{Registry: reg.Name, Entry: c.Entry, Ref: c.Ref, Spec: c.Spec, Digest: c.Digest, Run: runID}
	}
	creates := make([]store.Offer, len(plan.Create))
	for i, c := range plan.Create {
		creates[i] = offer(c)
	}
	batches, err := store.CreateBatches(creates)
	if err != nil {
		return r.failed(ctx, st, reg, status, run, finish, err)
	}
	// A batch is fifty specs in one request: two in flight keep the
	// store busy, and more would only hold more of them in memory.
	created, err := inParallel(ctx, min(r.concurrency(), createBatchesInFlight), batches, st.CreateSpecs)
	if err != nil {
		return r.failed(ctx, st, reg, status, run, finish, err)
	}
	upserts := slices.Concat(plan.Update, plan.Unmark, plan.Repair)
	var updates [][]store.SpecUpdate
	for i, c := range upserts {
		if i%writeBatch == 0 {
			updates = append(updates, nil)
		}
		updates[len(updates)-1] = append(updates[len(updates)-1], store.SpecUpdate{Offer: offer(c), Read: k.full[c.ID]})
	}
	upserted, err := inParallel(ctx, min(r.concurrency(), createBatchesInFlight), updates, st.UpdateSpecs)
	if err != nil {
		return r.failed(ctx, st, reg, status, run, finish, err)
	}
	offers := slices.Concat(plan.Create, upserts)
	results := slices.Concat(slices.Concat(created...), slices.Concat(upserted...))
	for i, c := range offers {
		res := results[i]
		man.offered(c, res.Outcome)
		switch res.Outcome {
		case store.Created:
			run.Counts.Created++
		case store.Updated:
			run.Counts.Updated++
		case store.Unmarked:
			run.Counts.Unmarked++
		case store.Repaired:
			run.Counts.Repaired++
		case store.Unchanged:
			run.Counts.Unchanged++
		case store.Conflict:
			run.Counts.Conflicts++
			conflicts = append(conflicts, store.SpecConflict{SpecID: c.ID, Entry: c.Entry, Owner: res.Owner})
			entryErrors = append(entryErrors, store.EntryError{Entry: c.Entry, Ref: c.Ref, SpecID: c.ID,
				Message: fmt.Sprintf("spec id %s is already owned by registry %q; the owner keeps it", c.ID, res.Owner)})
		}
		if (res.Outcome == store.Updated || res.Outcome == store.Unmarked) && wasMarked[c.ID] {
			markedAfter--
		}
	}
	// A new version that would strand instances is recorded as held back;
	// the served version stays (and is unmarked if it was marked: the
	// registry offers the spec).
	held := heldBackRecords(plan.HoldBack)
	if err := blockingInstances(ctx, st, plan.HoldBack, held); err != nil {
		return r.failed(ctx, st, reg, status, run, finish, err)
	}
	heldNew := 0
	for _, h := range held {
		outcome, err := st.HoldBack(ctx, reg.Name, h, runID)
		if err != nil {
			return r.failed(ctx, st, reg, status, run, finish, err)
		}
		if outcome == store.HeldNew {
			heldNew++
		}
		man.held(h.SpecID, outcome)
		if outcome == store.HeldUnmarked {
			run.Counts.Unmarked++
			if wasMarked[h.SpecID] {
				markedAfter--
			}
		}
	}
	for _, e := range plan.ErrorOn {
		if err := st.RecordEntryError(ctx, e.SpecID, e.Message); err != nil {
			return r.failed(ctx, st, reg, status, run, finish, err)
		}
		man.dirty(e.SpecID)
	}

	// Step 5: mark what is no longer offered (unless the guard withheld
	// it), on condition that each is as read.
	toMark := make([]store.SpecRecord, len(plan.Mark))
	for i, m := range plan.Mark {
		toMark[i] = k.full[m.ID]
	}
	marks, err := st.MarkSpecs(ctx, reg.Name, runID, toMark)
	if err != nil {
		return r.failed(ctx, st, reg, status, run, finish, err)
	}
	for i, ok := range marks {
		man.marked(plan.Mark[i].ID, ok)
		if ok {
			run.Counts.Marked++
			markedAfter++
		}
	}
	// Every visible change above left a pending change; the committer
	// numbers them. A run after one that did not finish asks too: that
	// run may have left pending changes and died before asking.
	run.Counts.Changes = run.Counts.Created + run.Counts.Updated + run.Counts.Unmarked + run.Counts.Marked + run.Counts.Deleted + heldNew
	if err := r.requestCommit(ctx, reg.Name, &run, recovering, log); err != nil {
		return r.failed(ctx, st, reg, status, run, finish, err)
	}
	if err := r.recordConflicts(ctx, st, reg.Name, status.LastRun.Conflicts, conflicts); err != nil {
		return r.failed(ctx, st, reg, status, run, finish, err)
	}

	recordErrors(&run, entryErrors)
	run.Conflicts = conflicts
	run.HeldBack = held
	run.Counts.HeldBack = len(plan.HoldBack)
	if len(plan.HoldBack) > 0 {
		log.Warn("new versions held back: they would strand instances", "held_back", run.HeldBack)
	}

	result := api.ResultSucceeded
	if plan.Guarded != "" {
		result = api.ResultGuarded
		log.Warn("mass-deletion guard withheld marking", "reason", plan.Guarded)
	}
	finish(&run, result)
	if markedAfter < 0 {
		markedAfter = 0
	}
	if !began && k.fromManifest && k.gone == 0 {
		// It wrote no spec: the manifest it started from still describes
		// the store, and stays.
		run.Ops.Writes++ // the status write below
		if err := st.RecordRun(ctx, reg.Name, run, result == api.ResultSucceeded, listing.Digest, listing.ETag, markedAfter); err != nil {
			return run, fmt.Errorf("reconcile %s: %w", reg.Name, err)
		}
	} else {
		// (It adds what recording costs to the run's counts.)
		written, err := st.RecordRunWithManifest(ctx, reg.Name, &run, result == api.ResultSucceeded, listing.Digest, listing.ETag, markedAfter,
			store.Seen{LastRun: status.LastRun.ID, Writer: status.Writer, Began: began}, man.entries())
		if err != nil {
			return run, fmt.Errorf("reconcile %s: %w", reg.Name, err)
		}
		if !written {
			log.Warn("another run of the registry ran meanwhile: no manifest recorded, the next run reads every spec")
		}
	}
	log.Info("registry reconciled", "result", result, "counts", run.Counts, "firestore", run.Ops, "duration_ms", run.DurationMS, "manifest", k.fromManifest, "specs_read", k.read)
	return run, nil
}

// deleteOnly is the run for an unchanged listing while marked specs wait:
// only step 3 has anything to do, so only the marked specs are read.
func (r *Runner) deleteOnly(ctx context.Context, st *store.Store, reg Registry, status *store.RegistryStatus, run store.Run, finish func(*store.Run, api.RunResult), log *slog.Logger) (store.Run, error) {
	marked, err := st.MarkedSpecs(ctx, reg.Name)
	if err != nil {
		return r.failed(ctx, st, reg, status, run, finish, err)
	}
	remaining := 0
	for _, m := range marked {
		outcome, refs, err := st.DeleteMarked(ctx, reg.Name, m.ID, run.ID, status.LastSuccessAt)
		if err != nil {
			return r.failed(ctx, st, reg, status, run, finish, err)
		}
		switch outcome {
		case store.Deleted:
			run.Counts.Deleted++
		case store.Referenced:
			remaining++
			run.Counts.Kept++
			run.Kept = append(run.Kept, store.KeptSpec{SpecID: m.ID, Name: m.Name, Instances: refs})
		default:
			remaining++
		}
	}
	run.Counts.Changes = run.Counts.Deleted
	if err := r.requestCommit(ctx, reg.Name, &run, false, log); err != nil {
		return r.failed(ctx, st, reg, status, run, finish, err)
	}
	run.Errors, run.ErrorsTotal, run.Counts.EntryErrors = status.LastRun.Errors, status.LastRun.ErrorsTotal, status.LastRun.Counts.EntryErrors
	if run.Counts.Deleted == 0 && sameKept(run.Kept, status.LastRun.Kept) {
		// Nothing changed: do not pay a write to say so.
		finish(&run, api.ResultUnchanged)
		log.Info("registry unchanged; marked specs still referenced", "kept", run.Counts.Kept)
		return run, nil
	}
	finish(&run, api.ResultSucceeded)
	run.Ops.Writes++
	if err := st.RecordRun(ctx, reg.Name, run, true, status.ListingDigest, status.ETag, remaining); err != nil {
		return run, fmt.Errorf("reconcile %s: %w", reg.Name, err)
	}
	log.Info("registry unchanged; deleted unreferenced marked specs", "deleted", run.Counts.Deleted, "kept", run.Counts.Kept)
	return run, nil
}

// requestCommit asks the committer for a commit when the run left
// pending changes (or may have found some left: recovering). Without a
// requester the caller commits after its runs.
func (r *Runner) requestCommit(ctx context.Context, registry string, run *store.Run, recovering bool, log *slog.Logger) error {
	if r.Commits == nil || (run.Counts.Changes == 0 && !recovering) {
		return nil
	}
	if err := r.Commits.RequestCommit(ctx, queue.CommitRequest{Registry: registry, Run: run.ID}); err != nil {
		return fmt.Errorf("the run's %d changes are written but not committed: %w", run.Counts.Changes, err)
	}
	log.Info("commit requested", "changes", run.Counts.Changes)
	return nil
}

// failed records a run the store broke off and returns the error.
func (r *Runner) failed(ctx context.Context, st *store.Store, reg Registry, status *store.RegistryStatus, run store.Run, finish func(*store.Run, api.RunResult), cause error) (store.Run, error) {
	run.Error = cause.Error()
	finish(&run, api.ResultError)
	run.Ops.Writes++
	r.logger().Error("reconcile failed part-way; it is safe to run again", "registry", reg.Name, "run", run.ID, "error", cause)
	// Best effort: the store that just failed may fail again.
	_ = st.RecordRun(ctx, reg.Name, run, false, "", "", status.Marked)
	return run, fmt.Errorf("reconcile %s: %w", reg.Name, cause)
}

// recordConflicts tells each owner which of its spec ids this registry
// offers too, and withdraws what it said last time and is no longer true.
func (r *Runner) recordConflicts(ctx context.Context, st *store.Store, name string, before, now []store.SpecConflict) error {
	byOwner := map[string][]string{}
	for _, c := range now {
		byOwner[c.Owner] = append(byOwner[c.Owner], c.SpecID)
	}
	for _, c := range before {
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
		if err := st.SetContested(ctx, o, name, ids); err != nil {
			return err
		}
	}
	return nil
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
	ops := &store.Ops{}
	st := r.Store.WithOps(ops)
	run := store.Run{ID: "dry-run", StartedAt: r.now().UTC()}
	stamp := func(result api.RunResult) {
		run.Result = result
		run.FinishedAt = r.now().UTC()
		run.DurationMS = run.FinishedAt.Sub(run.StartedAt).Milliseconds()
		run.Ops = ops.Snapshot()
	}
	// No validators: a 304 would leave nothing to plan with.
	listing, err := reg.Source.Fetch(ctx, registry.FetchOptions{})
	if err != nil {
		run.Error = err.Error()
		stamp(api.ResultFetchFailed)
		return run, nil
	}
	records, err := st.OwnedSpecs(ctx, reg.Name)
	if err != nil {
		run.Error = err.Error()
		stamp(api.ResultError)
		return run, fmt.Errorf("dry run %s: %w", reg.Name, err)
	}
	plan := MakePlan(Candidates(reg.Name, listing.Entries), storedFrom(records), reg.Policy)
	run.Guard = plan.Guarded
	run.Counts = store.RunCounts{
		Created: len(plan.Create), Updated: len(plan.Update), Unchanged: plan.Unchanged,
		Unmarked: len(plan.Unmark), Repaired: len(plan.Repair), Marked: len(plan.Mark),
		Deleted: len(plan.Delete), Kept: len(plan.Keep), EntryErrors: len(plan.Errors), HeldBack: len(plan.HoldBack),
	}
	run.HeldBack = heldBackRecords(plan.HoldBack)
	if err := blockingInstances(ctx, st, plan.HoldBack, run.HeldBack); err != nil {
		run.Error = err.Error()
		stamp(api.ResultError)
		return run, fmt.Errorf("dry run %s: %w", reg.Name, err)
	}
	for _, k := range plan.Keep {
		run.Kept = append(run.Kept, store.KeptSpec{SpecID: k.ID, Name: k.Name, Instances: int64(k.Instances)})
	}
	recordErrors(&run, planErrors(plan))
	run.Planned = plannedChanges(plan) // planned.go: the plan by name, for the operator's diff
	stamp(api.ResultDryRun)
	return run, nil
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
