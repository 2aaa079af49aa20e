// Package bootstrap is the asynchronous bootstrap: an operation that fans
// one reconcile per registry out and collects their results, polled like
// OSB's last_operation. The operations are stored by pkg/store
// (operations/{id}, and meta/bootstrap naming the one in progress); this
// package holds their rules: a start coalesces onto the operation in
// progress, an operation fails at its deadline, a registry's first report
// counts, the last one makes it wait for its commit, and the commit
// finishes it. The rules are pure functions of an operation (rules.go),
// which the store runs inside its transactions. This package starts
// operations (POST /bootstrap, http.go); pkg/worker, which does the
// reconcile messages and commit requests, reports and finishes them.
package bootstrap

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/store"
)

// Operations keeps bootstrap operations.
type Operations struct {
	store *store.Store
	// Deadline is how long an operation waits for all its registries
	// before it fails (a lost message, a crashed reconcile).
	Deadline time.Duration
	// Retention is how long a finished operation can still be polled.
	Retention time.Duration
	Now       func() time.Time
	// Logger is where an operation failed for being overdue says so
	// (slog.Default() when nil).
	Logger *slog.Logger

	mu       sync.Mutex
	starting map[bool]*startCall // by dry run
}

// NewOperations returns the operations kept in st, with the given limits.
func NewOperations(st *store.Store, deadline, retention time.Duration) *Operations {
	return &Operations{store: st, Deadline: deadline, Retention: retention, Now: time.Now}
}

func (o *Operations) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

func (o *Operations) now() time.Time { return o.Now().UTC() }

func (o *Operations) rules() rules { return rules{deadline: o.Deadline, retention: o.Retention} }

// Start begins a bootstrap of registries, or returns the one already in
// progress (started is then false): concurrent bootstraps coalesce. An
// in-progress operation past its deadline does not block a new one.
func (o *Operations) Start(ctx context.Context, registries []string, dryRun bool) (op *api.Operation, started bool, err error) {
	if len(registries) == 0 {
		return nil, false, failure.New(failure.Invalid, "bootstrap: no registries configured")
	}
	// The common case under load (a bootstrap in progress, many callers)
	// needs no transaction: two plain reads find the operation to coalesce
	// onto. A transaction per request would make every caller contend for
	// meta/bootstrap; at 100 requests a second almost all of them failed.
	if cur, err := o.store.CurrentOperation(ctx); err != nil {
		return nil, false, classify(err, "start bootstrap")
	} else if joins(cur, o.now(), dryRun) {
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
	op      *api.Operation
	started bool
	err     error
}

func (o *Operations) startTx(ctx context.Context, registries []string, dryRun bool) (*api.Operation, bool, error) {
	id := uuid.NewString()
	res, err := o.store.StartOperation(ctx, func(current *api.Operation) store.OperationStart {
		return o.rules().start(current, o.now(), id, registries, dryRun)
	})
	if err != nil {
		return nil, false, err
	}
	if res.Join != nil {
		return res.Join, false, nil
	}
	if res.Supersede != nil {
		LogEnded(o.logger(), res.Supersede, res.Supersede.UpdatedAt) // failed: past its deadline
	}
	return res.Create, true, nil
}

// Fail ends an operation as failed with a description (publishing failed).
func (o *Operations) Fail(ctx context.Context, id, description string) error {
	now := o.now()
	return o.store.FailOperation(ctx, id, description, now, now.Add(o.Retention))
}

// Report records one registry's result. Redelivered reports change
// nothing: a registry's first result is the one that counts. When every
// registry has reported, the operation waits for its commit (a dry run,
// which has nothing to commit, finishes).
func (o *Operations) Report(ctx context.Context, id, registry string, res api.RegistryResult) (*api.Operation, error) {
	op, err := o.store.UpdateOperation(ctx, id, func(op *api.Operation) (bool, error) {
		return o.rules().report(op, registry, res, o.now())
	})
	if err != nil {
		return nil, classify(err, "report %s to operation %s", registry, id)
	}
	return op, nil
}

// Committed finishes an operation that awaits the committer: every
// change its runs wrote is committed, and revision is the catalog
// revision at that point. It takes the outcome of its runs. Anything else
// (finished already, still waiting for registries, gone) changes nothing,
// so a redelivered commit request is harmless.
func (o *Operations) Committed(ctx context.Context, id string, revision int64) (*api.Operation, error) {
	op, err := o.store.UpdateOperation(ctx, id, func(op *api.Operation) (bool, error) {
		return o.rules().committed(op, revision, o.now()), nil
	})
	if err != nil {
		return nil, classify(err, "finish operation %s at catalog revision %d", id, revision)
	}
	return op, nil
}

// Get reads an operation. One still in progress past its deadline is
// failed now, naming the registries that never reported; one finished and
// past its retention is reported as not found.
func (o *Operations) Get(ctx context.Context, id string) (*api.Operation, error) {
	op, err := o.store.GetOperation(ctx, id)
	if err != nil {
		return nil, err
	}
	now := o.now()
	if op.Expired(now) {
		return nil, failure.New(failure.NotFound, "operation %s has expired", id)
	}
	if desc, late := overdue(op, now); late {
		if err := o.Fail(ctx, id, desc); err != nil {
			return nil, err
		}
		op.State, op.Description = api.Failed, desc
		LogEnded(o.logger(), op, now)
	}
	return op, nil
}

var classify = failure.Annotate
