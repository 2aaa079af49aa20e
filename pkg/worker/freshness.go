package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/queue"
)

// The freshness objective reads how long a change takes to reach the
// catalog: from the event that announced it (the newest event of its
// message: a coalesced burst's earlier pushes waited up to the hook
// window more) or from the start of the bootstrap that found it, to the
// commit that numbered it. The committer logs one contract line
// (logging.EventFreshness) per event run's commit request and per
// bootstrap whose runs wrote changes, once they are committed; the
// log-based distributions and the SLO of terraform/monitoring.tf read
// it. A redelivered request may log it again, later: the objective
// errs on the slow side, never the fast one.

// freshnessOfEvent logs the line for an event run's commit request, now
// that everything pending, its changes among them, is committed.
func freshnessOfEvent(ctx context.Context, log *slog.Logger, req queue.CommitRequest, revision int64, now time.Time) {
	if req.EventAt.IsZero() {
		return // a bootstrap's run, or a run of the version before
	}
	logFreshness(ctx, log, api.KindEvent, now.Sub(req.EventAt), revision)
}

// freshnessOfBootstrap logs the line for a bootstrap the committer just
// finished, if its runs wrote changes: from its start to their commit.
func freshnessOfBootstrap(ctx context.Context, log *slog.Logger, op *api.Operation, revision int64, now time.Time) {
	if op == nil || op.DryRun || op.Commit == nil || op.Commit.Changes == 0 {
		return
	}
	at := op.Commit.CommittedAt
	if at.IsZero() {
		at = now
	}
	logFreshness(ctx, log, api.KindFull, at.Sub(op.CreatedAt), revision)
}

func logFreshness(ctx context.Context, log *slog.Logger, kind api.RunKind, latency time.Duration, revision int64) {
	log.LogAttrs(ctx, slog.LevelInfo, "changes reached the catalog",
		slog.String(logging.FieldEvent, logging.EventFreshness),
		slog.String(logging.FieldKind, string(kind)),
		slog.Int64(logging.FieldLatency, max(latency, 0).Milliseconds()),
		slog.Int64(logging.FieldRevision, revision),
	)
}
