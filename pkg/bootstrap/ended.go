package bootstrap

import (
	"context"
	"log/slog"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/logging"
)

// LogEnded logs the line that says a bootstrap operation ended
// (logging.EventBootstrapOperation), with the same fields every time, so
// the log-based metrics of terraform/monitoring.tf count operations by
// result and an alert fires on a failed one (docs/operations.md). op is
// the operation as it ended. A redelivered commit request, or two readers
// failing an overdue operation at once, may log it twice: the line is at
// least once, as the messages are. pkg/worker logs it for an operation
// its commit (or a dry run's last report) finishes.
func LogEnded(log *slog.Logger, op *api.Operation, now time.Time) {
	level := slog.LevelInfo
	if op.State != api.Succeeded {
		level = slog.LevelError
	}
	failed := 0
	for _, r := range op.Registries {
		if res, ok := op.Results[r]; !ok || res.State != api.Succeeded {
			failed++ // failed, or never reported
		}
	}
	var revision int64
	if op.CatalogRevision != nil {
		revision = *op.CatalogRevision
	}
	log.LogAttrs(context.Background(), level, "bootstrap operation ended",
		slog.String(logging.FieldEvent, logging.EventBootstrapOperation),
		slog.String(logging.FieldOperation, op.ID),
		slog.String(logging.FieldResult, string(op.State)),
		slog.Bool(logging.FieldDryRun, op.DryRun),
		slog.Int(logging.FieldRegistries, len(op.Registries)),
		slog.Int(logging.FieldFailedRegistries, failed),
		slog.Int64(logging.FieldCatalogRevision, revision),
		slog.Int64(logging.FieldDuration, now.Sub(op.CreatedAt).Milliseconds()),
		slog.String("description", op.Description),
	)
}
