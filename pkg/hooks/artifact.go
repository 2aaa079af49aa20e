package hooks

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/specsync/specsync/pkg/queue"
)

// Artifact hands an Artifact Registry notification ae (decoded by
// queue.FromEvent, with decodeErr its error) to run: one event message
// for every registry of regs that selects what it names (Route; its
// EventAt is at, the publish time, which a redelivery keeps, or now when
// at is zero). The gcr topic carries every push of the project, most of
// them none of specsync's business (another repository, another tag, a
// push by digest alone to a registry that does not verify), and anything
// unreadable on it is nobody's: those are acknowledged (nil) and logged
// at debug level, never retried. A failure of any run (run returns one
// only when retrying can help: the store, a lease held) is returned, so
// Pub/Sub redelivers the notification; the runs that succeeded run
// again, harmlessly. The reconcile function calls it with its worker's
// Handle.
func Artifact(ctx context.Context, log *slog.Logger, ae queue.ArtifactEvent, decodeErr error, regs []Registry, at time.Time, run func(context.Context, queue.Message) error) error {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("action", ae.Action, "tag", ae.Tag, "digest", ae.Digest)
	c, err := ae.Change() // checked by the decode too
	if decodeErr != nil {
		err = decodeErr
	}
	if err != nil {
		log.DebugContext(ctx, "ignoring an Artifact Registry message that is not one it sends", "error", err)
		return nil
	}
	if at.IsZero() {
		at = time.Now()
	}
	msgs := Route(c, regs, at)
	if len(msgs) == 0 {
		log.DebugContext(ctx, "ignoring an Artifact Registry event for nothing a registry selects")
		return nil
	}
	var retry error
	for _, m := range msgs {
		if err := run(ctx, m); err != nil {
			retry = errors.Join(retry, err)
		}
	}
	if retry != nil {
		log.WarnContext(ctx, "an Artifact Registry event's run will be retried", "error", retry)
		return retry
	}
	log.InfoContext(ctx, "Artifact Registry event handled", "registries", len(msgs))
	return nil
}
