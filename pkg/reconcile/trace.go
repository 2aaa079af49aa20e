package reconcile

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/store"
)

// tracer starts the runs' and the committer's spans. Which provider it
// uses (none, Cloud Trace, a test's) is the entry point's choice; the
// domain only names the work and counts it.
var tracer = otel.Tracer("github.com/specsync/specsync/pkg/reconcile")

// The attributes of the spans of a run: identities and counts only,
// never a spec's content, an entry's error text or a credential.
const (
	attrRegistry = attribute.Key("specsync.registry")
	attrRun      = attribute.Key("specsync.run")
	attrResult   = attribute.Key("specsync.result")
	attrReads    = attribute.Key("firestore.reads")
	attrWrites   = attribute.Key("firestore.writes")
	attrDeletes  = attribute.Key("firestore.deletes")
)

// runSpan is a run's span: started before its first step, ended with
// what the run recorded.
type runSpan struct {
	span trace.Span
	run  *run
}

// startSpan starts the run's span and puts it in *ctx, so every step's
// span, store call and log line is inside it.
func (r *run) startSpan(ctx *context.Context, name string) runSpan {
	var span trace.Span
	*ctx, span = tracer.Start(*ctx, name, trace.WithAttributes(
		attrRegistry.String(r.reg.Name), attrRun.String(r.rec.ID)))
	// The run's lines logged without a context name its span too.
	r.log = logging.WithContext(r.log, *ctx)
	return runSpan{span: span, run: r}
}

// end ends the span with the run as recorded, and passes the run on.
func (s runSpan) end(rec store.Run, err error) (store.Run, error) {
	if s.span.IsRecording() {
		c := rec.Counts
		s.span.SetAttributes(attrResult.String(string(rec.Result)),
			attribute.Int("specsync.created", c.Created), attribute.Int("specsync.updated", c.Updated),
			attribute.Int("specsync.unchanged", c.Unchanged), attribute.Int("specsync.marked", c.Marked),
			attribute.Int("specsync.deleted", c.Deleted), attribute.Int("specsync.held_back", c.HeldBack),
			attribute.Int("specsync.entry_errors", c.EntryErrors), attribute.Int("specsync.changes", c.Changes),
			attrReads.Int64(rec.Ops.Reads), attrWrites.Int64(rec.Ops.Writes), attrDeletes.Int64(rec.Ops.Deletes))
		failed(s.span, err)
	}
	s.span.End()
	return rec, err
}

// traced runs step s inside a span of its own, named name, with what the
// step did and the Firestore operations it used as attributes.
func (r *run) traced(name string, s step) step {
	return func(ctx context.Context) (bool, error) {
		ctx, span := tracer.Start(ctx, name)
		before := r.ops.Snapshot()
		done, err := s(ctx)
		if span.IsRecording() {
			after := r.ops.Snapshot()
			span.SetAttributes(attrReads.Int64(after.Reads-before.Reads), attrWrites.Int64(after.Writes-before.Writes),
				attrDeletes.Int64(after.Deletes-before.Deletes))
			span.SetAttributes(r.stepCounts(name)...)
			failed(span, err)
		}
		span.End()
		return done, err
	}
}

// Step names, as the design names the steps.
const (
	stepFetch        = "fetch"
	stepKnow         = "know"
	stepDeleteMarked = "delete marked"
	stepUpsert       = "upsert"
	stepHoldBack     = "hold back"
	stepMark         = "mark"
	stepRecord       = "record"
)

// stepCounts are what a step did, as counts.
func (r *run) stepCounts(name string) []attribute.KeyValue {
	switch name {
	case stepFetch:
		if r.listing == nil {
			return []attribute.KeyValue{attribute.Bool("specsync.fetched", false)}
		}
		return []attribute.KeyValue{attribute.Int("specsync.entries", len(r.listing.Entries)),
			attribute.Bool("specsync.not_modified", r.listing.NotModified)}
	case stepKnow:
		p := r.k.plan
		return []attribute.KeyValue{attribute.Int("specsync.specs_read", r.k.read), attribute.Bool("specsync.from_manifest", r.k.fromManifest),
			attribute.Int("specsync.plan.create", len(p.Create)), attribute.Int("specsync.plan.update", len(p.Update)),
			attribute.Int("specsync.plan.mark", len(p.Mark)), attribute.Int("specsync.plan.delete", len(p.Delete))}
	case stepDeleteMarked:
		c := runCounts(r.done)
		return []attribute.KeyValue{attribute.Int("specsync.deleted", c.Deleted), attribute.Int("specsync.kept", c.Kept)}
	case stepUpsert:
		c := runCounts(r.done)
		return []attribute.KeyValue{attribute.Int("specsync.created", c.Created), attribute.Int("specsync.updated", c.Updated),
			attribute.Int("specsync.unchanged", c.Unchanged), attribute.Int("specsync.unmarked", c.Unmarked)}
	case stepHoldBack:
		return []attribute.KeyValue{attribute.Int("specsync.held_back", len(r.done.held))}
	case stepMark:
		n := 0
		for _, m := range r.done.marks {
			if m {
				n++
			}
		}
		return []attribute.KeyValue{attribute.Int("specsync.marked", n)}
	}
	return nil
}

// traceRecord is record inside a span of its own.
func (r *run) traceRecord(ctx context.Context, err error) (store.Run, error) {
	ctx, span := tracer.Start(ctx, stepRecord)
	before := r.ops.Snapshot()
	rec, rerr := r.record(ctx, err)
	if span.IsRecording() {
		after := r.ops.Snapshot()
		span.SetAttributes(attrReads.Int64(after.Reads-before.Reads), attrWrites.Int64(after.Writes-before.Writes),
			attrDeletes.Int64(after.Deletes-before.Deletes), attrResult.String(string(rec.Result)))
	}
	span.End()
	return rec, rerr
}

// failed marks span failed with err's class, never its text: an error
// may quote what upstream sent.
func failed(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "failed")
		span.SetAttributes(attribute.String("error.type", failure.KindOf(err).String()))
	}
}
