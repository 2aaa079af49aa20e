package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"maps"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/store"
)

// result is how the run ended, err being the step that failed, if one did.
func (r *run) result(err error, counts store.RunCounts, kept []store.KeptSpec) api.RunResult {
	switch {
	case r.ended != "":
		return r.ended
	case err != nil:
		return api.ResultError
	case r.dry:
		return api.ResultDryRun
	case r.short && counts.Deleted == 0 && sameKept(kept, r.status.LastRun.Kept) && !r.graceWaits:
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
	if err == nil && (r.ended == api.ResultUnchanged || r.short) {
		// The run stopped at the listing: it compared no spec, yet every
		// active one is as the baseline left it, and an operator reads
		// "unchanged 0" as "nothing here".
		rec.Counts.Unchanged = activeSpecs(r.status)
	}
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
// (the one write that says how the run went), logs its summary line and
// returns it with the run's error, if it has one.
func (r *run) record(ctx context.Context, err error) (store.Run, error) {
	rec, err := r.recordRun(ctx, err)
	r.summarize(rec)
	return rec, err
}

// recordRun writes the run, as reported, to the registry's status.
func (r *run) recordRun(ctx context.Context, err error) (store.Run, error) {
	rec := r.report(err)
	wrap := func(err error) error { return fmt.Errorf("reconcile %s: %w", r.reg.Name, err) }
	switch {
	case r.status == nil || rec.Result == api.ResultBusy:
		// No status to record against, or another run's turn: it records.
		if err == nil {
			return rec, nil
		}
		return rec, wrap(err)
	case r.t != nil:
		return r.recordTargeted(ctx, rec, err)
	case rec.Result == api.ResultUnchanged && r.event:
		// The events before it are done: one write says so (and gives
		// the lease up, and the writer back: it wrote nothing).
		if rerr := r.st.RecordChecked(ctx, r.reg.Name, rec, r.status.Writer); rerr != nil {
			return rec, wrap(rerr)
		}
		r.leased = false
		rec.Ops.Reads++
		rec.Ops.Writes++
		r.log.Info("registry unchanged, for an event", "firestore_reads", rec.Ops.Reads)
		return rec, nil
	case rec.Result == api.ResultUnchanged:
		// Nothing changed: do not pay a write to say so. A run that took
		// the lease (found overtaken, it fetched again) gives the writer
		// back with it.
		r.wroteNothing = true
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
	// describes the store and its listing.
	var rerr error
	var listing map[string]store.ListingPart
	var after manifest
	if full {
		after = manifestAfter(r.k, r.done)
		listing = listingParts(r.listing, r.k.candidates, after)
	}
	if full && (r.began || !r.k.fromManifest || r.k.gone > 0 || r.k.stale || !maps.Equal(listing, r.k.listing)) {
		// (It adds what recording costs to the run's counts.)
		var written bool
		written, rerr = r.st.RecordRunWithManifest(ctx, r.reg.Name, &rec, success, digest, etag, marked,
			store.Seen{LastRun: r.status.LastRun.ID, Writer: r.status.Writer, Began: r.began},
			store.Manifest{Entries: after.entries(), Listing: listing})
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
		// The counts are in the summary line (summarize).
		r.log.Debug("registry reconciled", "manifest", r.k.fromManifest)
	}
	return rec, nil
}

// activeSpecs is how many active specs the baseline status describes:
// its manifest's count, else what its last run left offered.
func activeSpecs(st *store.RegistryStatus) int {
	if st == nil {
		return 0
	}
	if st.Manifest != nil {
		return st.Manifest.Active
	}
	c := st.LastRun.Counts
	return c.Created + c.Updated + c.Unchanged + c.Unmarked + c.Repaired
}

// summarize logs the run's summary line (logging.EventRunSummary): one
// per run, however it ended, with the same fields every time, so the
// log-based metrics of terraform/monitoring.tf can count runs by registry
// and result and read their counts and cost (docs/operations.md). Its
// severity follows the result: a run that could not do its work is a
// warning, one whose store failed an error. Its kind (full, event, dry)
// keeps the alerts on a registry's full runs from being reset by its
// event runs (an event's backstop, which reads the whole registry, is
// full).
func (r *run) summarize(rec store.Run) {
	level := slog.LevelInfo
	switch {
	case rec.Result == api.ResultError:
		level = slog.LevelError
	case rec.Result.Failed() || rec.Result == api.ResultGuarded || rec.Result == api.ResultBusy:
		level = slog.LevelWarn
	}
	c := rec.Counts
	r.log.LogAttrs(context.Background(), level, "reconcile run",
		slog.String(logging.FieldEvent, logging.EventRunSummary),
		slog.String(logging.FieldResult, string(rec.Result)),
		slog.String(logging.FieldKind, string(api.KindOf(r.t != nil, r.dry))),
		slog.Bool(logging.FieldTargeted, r.t != nil),
		slog.Bool(logging.FieldDryRun, r.dry),
		slog.Int(logging.FieldCreated, c.Created),
		slog.Int(logging.FieldUpdated, c.Updated),
		slog.Int(logging.FieldUnchanged, c.Unchanged),
		slog.Int(logging.FieldUnmarked, c.Unmarked),
		slog.Int(logging.FieldMarked, c.Marked),
		slog.Int(logging.FieldDeleted, c.Deleted),
		slog.Int(logging.FieldKept, c.Kept),
		slog.Int(logging.FieldHeldBack, c.HeldBack),
		slog.Int(logging.FieldEntryErrors, c.EntryErrors),
		slog.Int(logging.FieldConflicts, c.Conflicts),
		slog.Int(logging.FieldChanges, c.Changes),
		slog.Int64(logging.FieldDuration, rec.DurationMS),
		slog.Int64(logging.FieldReads, rec.Ops.Reads),
		slog.Int64(logging.FieldWrites, rec.Ops.Writes),
		slog.Int64(logging.FieldDeletes, rec.Ops.Deletes),
		slog.Int(logging.FieldSpecsRead, r.k.read),
	)
}
