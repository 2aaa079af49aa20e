// Package worker takes the queue's messages, the reconcile function's,
// and does them. A reconcile message of a bootstrap runs its registry and
// reports the result on the commit topic; a registry event's message runs
// the entries it names, coalesced with the registry's other runs
// (events.go); a commit request, and the report it may carry, is recorded
// in its bootstrap operation (pkg/bootstrap's Operations) and committed.
// pkg/bootstrap starts the operations; this package finishes them.
package worker

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
)

// Worker handles the reconcile function's messages. A reconcile message:
// it runs the engine for the named registry and publishes the result as a
// report on the commit topic. A commit request: it runs the committer and
// finishes the operation the request names; one that carries a report
// records it in the operation first, and commits only if it was the last.
// The commit topic's ordered subscription hands the reports over one at a
// time, so they never contend on the operation's one document.
type Worker struct {
	Operations *bootstrap.Operations
	Runner     *reconcile.Runner
	// Lookup finds a configured registry by name.
	Lookup func(name string) (reconcile.Registry, bool)
	// Commits sends commit requests and reports (the commit topic);
	// HandleCommit, with Committer, handles them.
	Commits   reconcile.CommitRequester
	Committer *reconcile.Committer
	Logger    *slog.Logger
	// EventCooldown and EventClockSkew say how events coalesce
	// (DecideEvent; defaults DefaultEventCooldown, DefaultEventClockSkew).
	EventCooldown, EventClockSkew time.Duration
	// Now is the clock events are judged by (time.Now when nil), and
	// After the one an event waits out the rest of a cooldown by
	// (time.After when nil).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

func (w *Worker) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.Default()
}

// Handle processes a message. It returns an error only when retrying can
// help (the store is unavailable, another run holds the registry's lease):
// the caller hands it back to Pub/Sub for redelivery. Permanent problems
// (a malformed message, an unknown registry or operation) are recorded and
// logged, and nil is returned so the message is acknowledged.
func (w *Worker) Handle(ctx context.Context, m queue.Message) error {
	log := w.logger().With("operation", m.Operation, "registry", m.Registry)
	if err := m.Validate(); err != nil {
		log.ErrorContext(ctx, "dropping a malformed reconcile message", "error", err)
		return nil
	}
	if m.Event() {
		return w.handleEvent(ctx, m)
	}
	op, err := w.Operations.Get(ctx, m.Operation)
	switch {
	case failure.Is(err, failure.NotFound):
		log.WarnContext(ctx, "dropping a message for an unknown or expired operation")
		return nil
	case err != nil:
		return err
	}
	if _, done := op.Results[m.Registry]; done || op.State != api.InProgress {
		// A redelivery or duplicate: this registry already counted. If
		// the operation still waits for its commit, the commit after its
		// last report may never have finished (dead-lettered, say): ask
		// again; a commit request more changes nothing.
		if op.AwaitsCommit() {
			return w.requestCommit(ctx, log, op, m.Registry)
		}
		log.InfoContext(ctx, "duplicate reconcile message ignored", "state", op.State)
		return nil
	}
	reg, ok := w.Lookup(m.Registry)
	if !ok {
		return w.report(ctx, log, m, api.RegistryResult{State: api.Failed, Result: api.ResultUnknownRegistry,
			Error: fmt.Sprintf("registry %q is not in this deployment's registries file", m.Registry)})
	}
	reconcileOrPlan := w.Runner.Reconcile
	if op.DryRun {
		reconcileOrPlan = w.Runner.DryRun
	}
	run, err := reconcileOrPlan(ctx, reg)
	if err != nil {
		if failure.Retryable(err) {
			log.WarnContext(ctx, "reconcile will be retried", "error", err, "result", run.Result)
			return err
		}
		return w.report(ctx, log, m, api.RegistryResult{State: api.Failed, Result: run.Result, Counts: run.Counts, Error: err.Error(), RunID: run.ID,
			DurationMS: run.DurationMS, Source: run.Source})
	}
	result := run.Result
	state := api.Succeeded
	if !result.OK() {
		state = api.Failed
	}
	res := api.RegistryResult{State: state, Result: result, Counts: run.Counts, Firestore: run.Ops, Error: run.Error, RunID: run.ID, Planned: run.Planned,
		DurationMS: run.DurationMS, Source: run.Source}
	if result == api.ResultDryRun {
		// The operator's diff names every broken entry and why; a real
		// run's are on the registry's status (GET /registries).
		res.EntryErrors = run.Errors
	}
	if run.Guard != "" && res.Error == "" {
		res.Error = run.Guard
	}
	return w.report(ctx, log, m, res)
}

// handleEvent handles an event's message, outside any bootstrap: nothing
// reports to an operation, and a run asks for its own commit
// (Runner.Commits). It reads the registry's status once and decides
// (DecideEvent): a message a run already covers is acknowledged without a
// run; one that finds another run holding the registry, or the registry
// run less than a cooldown ago, is handed back to Pub/Sub (a retryable
// error), which redelivers it with backoff; otherwise the entries it
// names are run (Runner.ReconcileEntries: a targeted run, or a full one
// when it names none or the source cannot fetch single entries). An
// unknown registry is logged and acknowledged (the configuration changed
// since the event was sent), and so is a registry that could not be
// fetched: the next run, scheduled or for an event, catches up.
func (w *Worker) handleEvent(ctx context.Context, m queue.Message) error {
	log := w.logger().With("registry", m.Registry, "event_at", m.EventAt, "entries", m.Entries)
	reg, ok := w.Lookup(m.Registry)
	if !ok {
		log.WarnContext(ctx, "dropping an event for a registry this deployment does not configure")
		return nil
	}
	cooldown := cmp.Or(w.EventCooldown, DefaultEventCooldown)
	decide := func() (EventDecision, error) {
		st, err := w.Runner.Store.RegistryStatus(ctx, m.Registry)
		if err != nil {
			log.WarnContext(ctx, "reading the registry's status failed; the event will be retried", "error", err)
			return EventDecision{}, err
		}
		return DecideEvent(st, m, w.now(), cooldown, cmp.Or(w.EventClockSkew, DefaultEventClockSkew)), nil
	}
	d, err := decide()
	if err != nil {
		return err
	}
	if d.Verdict == EventCoolingDown && d.Wait <= cooldown {
		// The rest of the cooldown is waited out here, once, and the
		// event decided again: handed back, it would wait for Pub/Sub's
		// redelivery (its minimum backoff, 10 s as deployed) though the
		// registry is free within a second. A storm still makes one run a
		// cooldown: the events that waited together meet the run the
		// first of them started (covered, busy or cooling down again,
		// and then handed back).
		log.DebugContext(ctx, "event waits out the registry's cooldown", "wait", d.Wait.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.after(d.Wait):
		}
		if d, err = decide(); err != nil {
			return err
		}
	}
	switch d.Verdict {
	case EventCovered:
		log.InfoContext(ctx, "event already covered; no run", "by", d.Reason)
		return nil
	case EventBusy, EventCoolingDown:
		log.InfoContext(ctx, "event deferred; Pub/Sub delivers it again", "because", d.Reason)
		return failure.New(failure.Precondition, "%s", d.Reason)
	}
	run, err := w.Runner.ReconcileEvent(ctx, reg, m.Entries, m.EventAt)
	if err != nil {
		if failure.Retryable(err) {
			log.WarnContext(ctx, "event's run will be retried", "error", err, "result", run.Result)
			return err
		}
		log.ErrorContext(ctx, "event's run failed and retrying cannot help", "error", err, "result", run.Result)
		return nil
	}
	log.InfoContext(ctx, "event's run done", "result", run.Result, "run", run.ID, "targeted", run.Entries != nil, "backstop", run.Backstop)
	return nil
}

// after is time.After, or the test clock's (AfterFunc).
func (w *Worker) after(d time.Duration) <-chan time.Time {
	if w.After != nil {
		return w.After(d)
	}
	return time.After(d)
}

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// reportAttempts bounds the in-process retries of publishing a report:
// the run is done, and a redelivery would re-run it and report what the
// re-run did (for a run that already wrote, nothing), so a Pub/Sub blip
// is worth waiting out here first.
var reportAttempts = []time.Duration{0, 200 * time.Millisecond, time.Second}

// report publishes registry's result for the operation on the commit
// topic (HandleCommit records it). Publishing, not writing the operation
// here, is what keeps runs that finish together from contending on the
// operation's document: the ordered subscription applies the reports one
// at a time. A report that could not be published is returned, so Pub/Sub
// redelivers the reconcile message, which runs and reports again; that
// includes a topic that is missing (acknowledging would lose the report
// while the deployment is broken, as a failed cold start does).
func (w *Worker) report(ctx context.Context, log *slog.Logger, m queue.Message, res api.RegistryResult) error {
	if w.Commits == nil {
		return failure.New(failure.Invalid, "operation %s: this deployment has no commit topic to report %s through", m.Operation, m.Registry)
	}
	req := queue.CommitRequest{Operation: m.Operation, Registry: m.Registry, Report: &res}
	var err error
	for _, wait := range reportAttempts {
		if wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		if err = w.Commits.RequestCommit(ctx, req); err == nil || !failure.Retryable(err) {
			break
		}
		log.WarnContext(ctx, "publishing the report failed; trying again", "error", err)
	}
	if err != nil {
		log.WarnContext(ctx, "report not published; the message will be retried", "error", err)
		return err
	}
	log.InfoContext(ctx, "report published", "result", res.Result, "run", res.RunID)
	return nil
}

// requestCommit asks the committer to commit and finish op. A failure is
// returned, so Pub/Sub redelivers the reconcile message, which asks again
// (Handle); meanwhile the operation stays in progress, and fails at its
// deadline if no commit ever finishes it.
func (w *Worker) requestCommit(ctx context.Context, log *slog.Logger, op *api.Operation, registry string) error {
	if w.Commits == nil {
		return failure.New(failure.Invalid, "operation %s: this deployment has no commit topic to finish it through", op.ID)
	}
	if err := w.Commits.RequestCommit(ctx, queue.CommitRequest{Operation: op.ID, Registry: registry}); err != nil {
		log.WarnContext(ctx, "commit request failed; the message will be retried", "error", err)
		return err
	}
	log.InfoContext(ctx, "commit requested for the operation", "changes", op.Commit.Changes)
	return nil
}

// HandleCommit handles a commit request: it numbers every pending change
// and publishes them (Committer.Commit), then finishes the operation the
// request names, at the revision the commit reached. A request with a
// report records it first (Operations.Report: the registry's first report
// counts, a duplicate changes nothing); unless that leaves the operation
// awaiting its commit (the last report, or a redelivery of it), it is
// done: a report does not commit. It returns an error only when retrying
// can help; Pub/Sub then redelivers the request, and the redelivery
// records nothing twice, commits what is left and finishes the operation,
// or finds all of it done.
func (w *Worker) HandleCommit(ctx context.Context, req queue.CommitRequest) error {
	log := w.logger().With("commit_for_operation", req.Operation, "commit_for_registry", req.Registry, "commit_for_run", req.Run)
	if err := req.Validate(); err != nil {
		log.ErrorContext(ctx, "dropping a malformed commit request", "error", err)
		return nil
	}
	if req.Report != nil {
		op, err := w.Operations.Report(ctx, req.Operation, req.Registry, *req.Report)
		switch {
		case failure.Is(err, failure.NotFound), failure.Is(err, failure.Invalid):
			log.WarnContext(ctx, "report not recorded: operation gone or registry not part of it", "error", err)
			return nil
		case err != nil:
			log.WarnContext(ctx, "recording the report failed; it will be retried", "error", err)
			return err
		}
		log.InfoContext(ctx, "report recorded", "result", req.Report.Result, "run", req.Report.RunID, "operation_state", op.State, "operation_description", op.Description)
		if !op.AwaitsCommit() {
			if op.State != api.InProgress && op.DryRun {
				bootstrap.LogEnded(logging.WithContext(log, ctx), op, w.now()) // a dry run ends with its last report
			}
			return nil
		}
		// The last report: the operation finishes when the committer has
		// numbered what its runs wrote, here, without a message more.
	}
	res, err := w.Committer.Commit(ctx)
	if err != nil {
		if failure.Retryable(err) {
			log.WarnContext(ctx, "commit failed; it will be retried", "error", err, "committed", res.Changes)
			return err
		}
		// The changes stay pending for the next commit; an operation
		// waiting for this one fails at its deadline, saying so.
		log.ErrorContext(ctx, "commit failed and retrying cannot help", "error", err, "committed", res.Changes)
		return nil
	}
	freshnessOfEvent(ctx, log, req, res.Revision, w.now())
	if req.Operation == "" {
		return nil
	}
	op, err := w.Operations.Committed(ctx, req.Operation, res.Revision)
	switch {
	case failure.Is(err, failure.NotFound):
		log.WarnContext(ctx, "committed, but the operation to finish is gone", "error", err)
		return nil
	case err != nil:
		return err
	}
	bootstrap.LogEnded(logging.WithContext(log.With(logging.FieldChanges, res.Changes), ctx), op, w.now())
	freshnessOfBootstrap(ctx, log, op, res.Revision, w.now())
	return nil
}
