package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/store"
)

// Committer is the change feed's one committer: it numbers every
// registry's pending changes (store.CommitPending), which moves
// meta/catalog, and publishes what it committed to the changes topic.
// Runs only write pending changes and ask for a commit; the commit
// requests reach the Committer one at a time (a push subscription with
// message ordering on one key), so meta/catalog has one writer and runs
// that finish together no longer abort each other there. Two commits at
// once (a request redelivered past its ack deadline) are harmless: each
// change is numbered under a precondition (see CommitPending).
type Committer struct {
	Store  *store.Store
	Logger *slog.Logger
	// Retention is how long committed changes stay in the feed (default
	// DefaultChangeRetention).
	Retention time.Duration
	// Publisher, when set, receives every committed change (the changes
	// topic in production). Publishing is at least once: a change whose
	// publish failed goes out with the next commit (meta/catalog.published
	// says what went out).
	Publisher ChangePublisher
}

// ChangePublisher pushes committed changes, in revision order.
type ChangePublisher interface {
	PublishChanges(ctx context.Context, changes []store.Change) error
}

// DefaultChangeRetention is how long changes stay in the feed by default.
const DefaultChangeRetention = 7 * 24 * time.Hour

// publishPage bounds the changes published (and held in memory) at once.
const publishPage = 1000

// Commit is what one commit did.
type Commit struct {
	// Changes is how many pending changes it numbered.
	Changes int `json:"changes"`
	// Revision is the catalog revision after it: every change pending
	// when the commit began is at or below it.
	Revision int64 `json:"revision"`
	// Published is how many changes it published.
	Published int          `json:"published"`
	Ops       store.Counts `json:"firestore"`
}

func (c *Committer) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// Commit numbers every pending change, then publishes what is not
// published yet. Running it again changes nothing more. A failed publish
// is logged, not returned: the changes are committed and readable in the
// feed, and the next commit publishes them (failing the commit instead
// would hold every later commit request of the ordered key behind it).
func (c *Committer) Commit(ctx context.Context) (out Commit, err error) {
	ctx, span := tracer.Start(ctx, "commit")
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("specsync.changes", out.Changes), attribute.Int64("specsync.revision", out.Revision),
				attribute.Int("specsync.published", out.Published),
				attrReads.Int64(out.Ops.Reads), attrWrites.Int64(out.Ops.Writes), attrDeletes.Int64(out.Ops.Deletes))
			failed(span, err)
		}
		span.End()
	}()
	ops := &store.Ops{}
	st := c.Store.WithOps(ops)
	retention := c.Retention
	if retention <= 0 {
		retention = DefaultChangeRetention
	}
	done, err := st.CommitPending(ctx, retention)
	out = Commit{Changes: done.Changes, Revision: done.Revision}
	if err != nil {
		out.Ops = ops.Snapshot()
		return out, fmt.Errorf("commit the pending changes (%d numbered before the failure): %w", done.Changes, err)
	}
	published := done.Published
	for c.Publisher != nil && published < done.Revision {
		page, err := st.UnpublishedAfter(ctx, published, done.Revision, publishPage)
		if err == nil && len(page) > 0 {
			if err = c.publish(ctx, page); err == nil {
				err = st.MarkPublished(ctx, page[len(page)-1].Revision)
			}
		}
		if err != nil {
			c.logger().WarnContext(ctx, "catalog changes committed but not published; the next commit publishes them", "revision", done.Revision, "published", published, "error", err)
			break
		}
		if len(page) == 0 {
			break // pruned meanwhile: nothing left to send
		}
		out.Published += len(page)
		published = page[len(page)-1].Revision
	}
	out.Ops = ops.Snapshot()
	if out.Changes > 0 {
		// The catalog moved: the contract line (logging.EventCatalogCommit)
		// the catalog revision metric reads.
		c.logger().LogAttrs(ctx, slog.LevelInfo, "catalog changes committed",
			slog.String(logging.FieldEvent, logging.EventCatalogCommit),
			slog.Int64(logging.FieldRevision, out.Revision),
			slog.Int(logging.FieldChanges, out.Changes),
			slog.Int(logging.FieldPublished, out.Published),
			slog.Int64(logging.FieldReads, out.Ops.Reads),
			slog.Int64(logging.FieldWrites, out.Ops.Writes),
			slog.Int64(logging.FieldDeletes, out.Ops.Deletes))
	}
	return out, nil
}

// publish sends a page of committed changes inside a span of its own:
// the change publish of the commit's trace.
func (c *Committer) publish(ctx context.Context, page []store.Change) error {
	ctx, span := tracer.Start(ctx, "publish changes", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "gcp_pubsub"), attribute.Int("messaging.batch.message_count", len(page)),
			attribute.Int64("specsync.revision.first", page[0].Revision), attribute.Int64("specsync.revision.last", page[len(page)-1].Revision)))
	defer span.End()
	err := c.Publisher.PublishChanges(ctx, page)
	failed(span, err)
	return err
}
