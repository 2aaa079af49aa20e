// Package bootstrap is the asynchronous bootstrap: an operation that fans
// one reconcile per registry out and collects their results, polled like
// OSB's last_operation. Operations live in Firestore (operations/{id});
// meta/bootstrap names the one in progress so concurrent bootstraps
// coalesce onto it.
package bootstrap

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/store"
)

// Operation states, spelled as OSB's last_operation spells them.
const (
	InProgress = "in progress"
	Succeeded  = "succeeded"
	Failed     = "failed"
)

// Collections and documents.
const (
	OperationsCollection = "operations"
	currentDoc           = "bootstrap" // in store.MetaCollection
)

// RegistryResult is what one registry's reconcile reported.
type RegistryResult struct {
	State      string          `json:"state" firestore:"state"` // succeeded | failed
	Result     string          `json:"result" firestore:"result"`
	Counts     store.RunCounts `json:"counts" firestore:"counts"`
	Firestore  store.Counts    `json:"firestore" firestore:"firestore"`
	Error      string          `json:"error,omitempty" firestore:"error,omitempty"`
	RunID      string          `json:"run_id,omitempty" firestore:"run_id,omitempty"`
	ReportedAt time.Time       `json:"reported_at" firestore:"reported_at"`
	// Planned is a dry run's plan by name (store.PlannedChange).
	Planned []store.PlannedChange `json:"planned,omitempty" firestore:"planned,omitempty"`
}

// Operation is one bootstrap.
type Operation struct {
	ID          string                    `json:"operation" firestore:"id"`
	State       string                    `json:"state" firestore:"state"`
	Description string                    `json:"description" firestore:"description"`
	DryRun      bool                      `json:"dry_run" firestore:"dry_run"`
	Registries  []string                  `json:"registries" firestore:"registries"`
	Results     map[string]RegistryResult `json:"results" firestore:"results"`
	CreatedAt   time.Time                 `json:"created_at" firestore:"created_at"`
	UpdatedAt   time.Time                 `json:"updated_at" firestore:"updated_at"`
	Deadline    time.Time                 `json:"deadline" firestore:"deadline"`
	// ExpiresAt is when a finished operation is forgotten (a Firestore TTL
	// policy on this field deletes it; reads treat it as gone already).
	ExpiresAt time.Time `json:"-" firestore:"expires_at"`
	// Commit is set when every registry has reported (never for a dry
	// run): the operation then waits, still in progress, for the
	// committer to number the changes its runs wrote, so it cannot
	// report succeeded before a catalog read could show them.
	Commit *store.OperationCommit `json:"commit,omitempty" firestore:"commit,omitempty"`
	// CatalogRevision is the catalog revision once the operation's
	// changes were committed (the current one if it changed nothing): a
	// catalog read that shows at least this revision reflects the
	// bootstrap. Set when the committer finishes the operation.
	CatalogRevision *int64 `json:"catalog_revision,omitempty" firestore:"catalog_revision,omitempty"`
}

// AwaitsCommit reports whether every registry reported and the operation
// waits for the committer.
func (op *Operation) AwaitsCommit() bool {
	return op.State == InProgress && op.Commit != nil && op.Commit.CommittedAt.IsZero()
}

// Operations stores bootstrap operations.
type Operations struct {
	client *firestore.Client
	// Deadline is how long an operation waits for all its registries
	// before it fails (a lost message, a crashed reconcile).
	Deadline time.Duration
	// Retention is how long a finished operation can still be polled.
	Retention time.Duration
	Now       func() time.Time

	mu       sync.Mutex
	starting map[bool]*startCall // by dry run
}

// NewOperations returns an operation store with the given limits.
func NewOperations(client *firestore.Client, deadline, retention time.Duration) *Operations {
	return &Operations{client: client, Deadline: deadline, Retention: retention, Now: time.Now}
}

func (o *Operations) now() time.Time { return o.Now().UTC() }

func (o *Operations) ops() *firestore.CollectionRef { return o.client.Collection(OperationsCollection) }

func (o *Operations) current() *firestore.DocumentRef {
	return o.client.Collection(store.MetaCollection).Doc(currentDoc)
}

func notFound(err error) bool { return status.Code(err) == codes.NotFound }

// Start begins a bootstrap of registries, or returns the one already in
// progress (started is then false): concurrent bootstraps coalesce. An
// in-progress operation past its deadline does not block a new one.
func (o *Operations) Start(ctx context.Context, registries []string, dryRun bool) (op *Operation, started bool, err error) {
	if len(registries) == 0 {
		return nil, false, failure.New(failure.Invalid, "bootstrap: no registries configured")
	}
	// The common case under load (a bootstrap in progress, many callers)
	// needs no transaction: two plain reads find the operation to coalesce
	// onto. A transaction per request would make every caller contend for
	// meta/bootstrap; at 100 requests a second almost all of them failed.
	if cur, err := o.inProgress(ctx, dryRun); err != nil {
		return nil, false, classify(err, "start bootstrap")
	} else if cur != nil {
		return cur, false, nil
	}
	// Callers of one instance that find none in progress share one start
	// transaction: a burst before the first operation exists would
	// otherwise be a burst of transactions on meta/bootstrap.
	o.mu.Lock()
	if c, ok := o.starting[dryRun]; ok {
		o.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, false, classify(ctx.Err(), "start bootstrap")
		}
		if c.err != nil {
			return nil, false, c.err
		}
		return c.op, false, nil
	}
	c := &startCall{done: make(chan struct{})}
	if o.starting == nil {
		o.starting = map[bool]*startCall{}
	}
	o.starting[dryRun] = c
	o.mu.Unlock()
	c.op, c.started, c.err = o.startTx(ctx, registries, dryRun)
	o.mu.Lock()
	delete(o.starting, dryRun)
	o.mu.Unlock()
	close(c.done)
	return c.op, c.started, c.err
}

// startCall is one start transaction other callers may wait for.
type startCall struct {
	done    chan struct{}
	op      *Operation
	started bool
	err     error
}

func (o *Operations) startTx(ctx context.Context, registries []string, dryRun bool) (op *Operation, started bool, err error) {
	err = o.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		op, started = nil, false
		now := o.now()
		cur, err := tx.Get(o.current())
		if err != nil && !notFound(err) {
			return err
		}
		if err == nil {
			if id, _ := cur.DataAt("operation"); id != nil {
				snap, err := tx.Get(o.ops().Doc(fmt.Sprint(id)))
				if err != nil && !notFound(err) {
					return err
				}
				if err == nil {
					var existing Operation
					if err := snap.DataTo(&existing); err != nil {
						return err
					}
					if existing.State == InProgress && now.Before(existing.Deadline) && existing.DryRun == dryRun {
						op = &existing
						return nil
					}
					if existing.State == InProgress && !now.Before(existing.Deadline) {
						// Superseded: say so rather than leave it in progress.
						if err := tx.Update(snap.Ref, []firestore.Update{
							{Path: "state", Value: Failed},
							{Path: "description", Value: "did not finish before its deadline; superseded by a new bootstrap"},
							{Path: "updated_at", Value: now},
							{Path: "expires_at", Value: now.Add(o.Retention)},
						}); err != nil {
							return err
						}
					}
				}
			}
		}
		regs := append([]string(nil), registries...)
		sort.Strings(regs)
		op = &Operation{
			ID: uuid.NewString(), State: InProgress, DryRun: dryRun, Registries: regs,
			Description: "reconciling " + countRegistries(len(regs)),
			Results:     map[string]RegistryResult{},
			CreatedAt:   now, UpdatedAt: now, Deadline: now.Add(o.Deadline), ExpiresAt: now.Add(o.Deadline + o.Retention),
		}
		started = true
		if err := tx.Create(o.ops().Doc(op.ID), op); err != nil {
			return err
		}
		return tx.Set(o.current(), map[string]any{"operation": op.ID, "updated_at": now})
	})
	if err != nil {
		return nil, false, classify(err, "start bootstrap")
	}
	return op, started, nil
}

// inProgress returns the operation in progress that a start with dryRun
// coalesces onto, or nil.
func (o *Operations) inProgress(ctx context.Context, dryRun bool) (*Operation, error) {
	cur, err := o.current().Get(ctx)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	id, _ := cur.DataAt("operation")
	if id == nil {
		return nil, nil
	}
	snap, err := o.ops().Doc(fmt.Sprint(id)).Get(ctx)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var op Operation
	if err := snap.DataTo(&op); err != nil {
		return nil, err
	}
	if op.State == InProgress && o.now().Before(op.Deadline) && op.DryRun == dryRun {
		return &op, nil
	}
	return nil, nil
}

// Fail ends an operation as failed with a description (publishing failed).
func (o *Operations) Fail(ctx context.Context, id, description string) error {
	now := o.now()
	_, err := o.ops().Doc(id).Update(ctx, []firestore.Update{
		{Path: "state", Value: Failed},
		{Path: "description", Value: description},
		{Path: "updated_at", Value: now},
		{Path: "expires_at", Value: now.Add(o.Retention)},
	})
	return classify(err, "fail operation %s", id)
}

// Report records one registry's result. Redelivered reports change
// nothing: a registry's first result is the one that counts. When every
// registry has reported, the operation finishes.
func (o *Operations) Report(ctx context.Context, id, registry string, res RegistryResult) (*Operation, error) {
	ref := o.ops().Doc(id)
	var op Operation
	err := o.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if notFound(err) {
			return failure.New(failure.NotFound, "operation %s does not exist (expired or never started)", id)
		}
		if err != nil {
			return err
		}
		op = Operation{}
		if err := snap.DataTo(&op); err != nil {
			return err
		}
		if !contains(op.Registries, registry) {
			return failure.New(failure.Invalid, "operation %s does not include registry %q", id, registry)
		}
		if _, done := op.Results[registry]; done || op.State != InProgress {
			return nil
		}
		now := o.now()
		res.ReportedAt = now
		if op.Results == nil {
			op.Results = map[string]RegistryResult{}
		}
		op.Results[registry] = res
		updates := []firestore.Update{
			{FieldPath: firestore.FieldPath{"results", registry}, Value: res},
			{Path: "updated_at", Value: now},
		}
		switch {
		case len(op.Results) == len(op.Registries) && op.DryRun:
			// A dry run wrote nothing: there is nothing to commit.
			op.State, op.Description = summarize(&op)
			updates = append(updates,
				firestore.Update{Path: "state", Value: op.State},
				firestore.Update{Path: "description", Value: op.Description},
				firestore.Update{Path: "expires_at", Value: now.Add(o.Retention)})
		case len(op.Results) == len(op.Registries):
			// The last report: the caller asks the committer, which
			// finishes the operation (Committed).
			state, desc := summarize(&op)
			changes := 0
			for _, r := range op.Results {
				changes += r.Counts.Changes
			}
			op.Commit = &store.OperationCommit{Changes: changes, RequestedAt: now, State: state, Description: desc}
			op.Description = committingDescription(len(op.Registries), changes)
			updates = append(updates,
				firestore.Update{Path: "commit", Value: op.Commit},
				firestore.Update{Path: "description", Value: op.Description})
		default:
			op.Description = fmt.Sprintf("%d of %s reported", len(op.Results), countRegistries(len(op.Registries)))
			updates = append(updates, firestore.Update{Path: "description", Value: op.Description})
		}
		return tx.Update(ref, updates)
	})
	if err != nil {
		return nil, classify(err, "report %s to operation %s", registry, id)
	}
	return &op, nil
}

// Committed finishes an operation that awaits the committer: every
// change its runs wrote is committed, and revision is the catalog
// revision at that point. It takes the outcome of its runs. Anything else
// (finished already, still waiting for registries, gone) changes nothing,
// so a redelivered commit request is harmless.
func (o *Operations) Committed(ctx context.Context, id string, revision int64) (*Operation, error) {
	ref := o.ops().Doc(id)
	var op Operation
	err := o.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if notFound(err) {
			return failure.New(failure.NotFound, "operation %s does not exist (expired or never started)", id)
		}
		if err != nil {
			return err
		}
		op = Operation{}
		if err := snap.DataTo(&op); err != nil {
			return err
		}
		if !op.AwaitsCommit() {
			return nil
		}
		now := o.now()
		op.State = op.Commit.State
		op.Description = op.Commit.Description + "; " + committedDescription(op.Commit.Changes, revision)
		op.Commit.CommittedAt = now
		op.CatalogRevision = &revision
		return tx.Update(ref, []firestore.Update{
			{Path: "state", Value: op.State},
			{Path: "description", Value: op.Description},
			{Path: "commit.committed_at", Value: now},
			{Path: "catalog_revision", Value: revision},
			{Path: "updated_at", Value: now},
			{Path: "expires_at", Value: now.Add(o.Retention)},
		})
	})
	if err != nil {
		return nil, classify(err, "finish operation %s at catalog revision %d", id, revision)
	}
	return &op, nil
}

// Get reads an operation. One still in progress past its deadline is
// failed now, naming the registries that never reported; one finished and
// past its retention is reported as not found.
func (o *Operations) Get(ctx context.Context, id string) (*Operation, error) {
	snap, err := o.ops().Doc(id).Get(ctx)
	if notFound(err) {
		return nil, failure.New(failure.NotFound, "operation %s does not exist", id)
	}
	if err != nil {
		return nil, classify(err, "read operation %s", id)
	}
	var op Operation
	if err := snap.DataTo(&op); err != nil {
		return nil, classify(err, "decode operation %s", id)
	}
	now := o.now()
	if op.State != InProgress && now.After(op.ExpiresAt) {
		return nil, failure.New(failure.NotFound, "operation %s has expired", id)
	}
	if op.State == InProgress && now.After(op.Deadline) {
		var missing []string
		for _, r := range op.Registries {
			if _, ok := op.Results[r]; !ok {
				missing = append(missing, r)
			}
		}
		within := op.Deadline.Sub(op.CreatedAt)
		desc := fmt.Sprintf("registries %s did not report within %s", strings.Join(missing, ", "), within)
		if op.Commit != nil {
			desc = fmt.Sprintf("%s, but the %s their runs wrote were not committed within %s: the committer did not finish (see the commit subscription and its dead letters); the changes stay pending for the next commit",
				op.Commit.Description, countChanges(op.Commit.Changes), within)
		}
		if err := o.Fail(ctx, id, desc); err != nil {
			return nil, err
		}
		op.State, op.Description = Failed, desc
	}
	return &op, nil
}

func summarize(op *Operation) (string, string) {
	var failed []string
	for _, r := range op.Registries {
		if op.Results[r].State != Succeeded {
			failed = append(failed, r)
		}
	}
	if len(failed) == 0 {
		if len(op.Registries) == 1 {
			return Succeeded, "the registry reconciled"
		}
		return Succeeded, fmt.Sprintf("all %s reconciled", countRegistries(len(op.Registries)))
	}
	return Failed, fmt.Sprintf("%d of %s failed: %s", len(failed), countRegistries(len(op.Registries)), strings.Join(failed, ", "))
}

// committingDescription is what an operation says while it waits for
// the committer.
func committingDescription(registries, changes int) string {
	reported := fmt.Sprintf("all %s reported", countRegistries(registries))
	if registries == 1 {
		reported = "the registry reported"
	}
	if changes == 0 {
		return reported + "; no change to commit, reading the catalog revision"
	}
	return reported + "; committing " + countChanges(changes)
}

// committedDescription is what a finished operation adds to its outcome.
func committedDescription(changes int, revision int64) string {
	if changes == 0 {
		return fmt.Sprintf("no catalog change, catalog at revision %d", revision)
	}
	return fmt.Sprintf("%s committed, catalog at revision %d", countChanges(changes), revision)
}

// countChanges counts catalog changes in English.
func countChanges(n int) string {
	if n == 1 {
		return "1 change"
	}
	return fmt.Sprintf("%d changes", n)
}

// countRegistries counts registries in English, for descriptions people read.
func countRegistries(n int) string {
	if n == 1 {
		return "1 registry"
	}
	return fmt.Sprintf("%d registries", n)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

var classify = failure.Annotate
