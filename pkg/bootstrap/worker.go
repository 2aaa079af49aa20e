package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
)

// Worker handles one reconcile message: it runs the engine for the named
// registry and reports the result into the operation.
type Worker struct {
	Operations *Operations
	Runner     *reconcile.Runner
	// Lookup finds a configured registry by name.
	Lookup func(name string) (reconcile.Registry, bool)
	Logger *slog.Logger
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
		log.Error("dropping a malformed reconcile message", "error", err)
		return nil
	}
	op, err := w.Operations.Get(ctx, m.Operation)
	switch {
	case failure.Is(err, failure.NotFound):
		log.Warn("dropping a message for an unknown or expired operation")
		return nil
	case err != nil:
		return err
	}
	if _, done := op.Results[m.Registry]; done || op.State != InProgress {
		// A redelivery or duplicate: this registry already counted.
		log.Info("duplicate reconcile message ignored", "state", op.State)
		return nil
	}
	reg, ok := w.Lookup(m.Registry)
	if !ok {
		return w.report(ctx, log, m, RegistryResult{State: Failed, Result: "unknown_registry",
			Error: fmt.Sprintf("registry %q is not in this deployment's registries file", m.Registry)})
	}
	reconcileOrPlan := w.Runner.Reconcile
	if op.DryRun {
		reconcileOrPlan = w.Runner.DryRun
	}
	run, err := reconcileOrPlan(ctx, reg)
	if err != nil {
		if failure.Retryable(err) {
			log.Warn("reconcile will be retried", "error", err, "result", run.Result)
			return err
		}
		return w.report(ctx, log, m, RegistryResult{State: Failed, Result: run.Result, Counts: run.Counts, Error: err.Error(), RunID: run.ID})
	}
	state := Succeeded
	switch run.Result {
	case reconcile.ResultSucceeded, reconcile.ResultUnchanged, reconcile.ResultDryRun:
	default:
		state = Failed
	}
	res := RegistryResult{State: state, Result: run.Result, Counts: run.Counts, Firestore: run.Ops, Error: run.Error, RunID: run.ID}
	if run.Guard != "" && res.Error == "" {
		res.Error = run.Guard
	}
	return w.report(ctx, log, m, res)
}

// reportAttempts bounds the in-process retries of a report: the run is
// done, and a redelivery would re-run it and report what the re-run did
// (for a run that already wrote, nothing), so a store blip is worth
// waiting out here first.
var reportAttempts = []time.Duration{0, 200 * time.Millisecond, time.Second}

func (w *Worker) report(ctx context.Context, log *slog.Logger, m queue.Message, res RegistryResult) error {
	var op *Operation
	var err error
	for _, wait := range reportAttempts {
		if wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		op, err = w.Operations.Report(ctx, m.Operation, m.Registry, res)
		if err == nil || !failure.Retryable(err) {
			break
		}
		log.Warn("report failed; trying again", "error", err)
	}
	switch {
	case failure.Is(err, failure.NotFound), failure.Is(err, failure.Invalid):
		log.Warn("result not recorded: operation gone or registry not part of it", "error", err)
		return nil
	case err != nil:
		// The reconcile itself is done; redelivery re-runs it cheaply (the
		// listing digest makes it a one-read run) and reports again.
		return err
	}
	log.Info("registry reported", "result", res.Result, "operation_state", op.State)
	return nil
}
