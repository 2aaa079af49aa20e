package reconcile

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
)

// Registry is one configured registry as the runner needs it.
type Registry struct {
	Name   string
	Source registry.Source
	Policy Policy
	// Describes says where Source reads, for people (config's Describe);
	// each run records it. Empty: not said (a test's source).
	Describes api.Source
}

// Runner reconciles registries into a store.
type Runner struct {
	Store  *store.Store
	Logger *slog.Logger
	// LeaseTTL, when set, makes every run that will write take the
	// registry's lease first, so two runs of one registry never
	// interleave; a run that finds it held fails with a
	// failure.Precondition error, to be retried later. The lease outlives
	// a crashed holder by at most this long.
	LeaseTTL time.Duration
	// Commits, when set, is asked for a commit after every run that left
	// pending changes (the commit topic in production): no run numbers
	// changes or writes meta/catalog itself, the one Committer does. When
	// nil the caller commits (Committer.Commit) after its runs: the local
	// tools and the tests.
	Commits CommitRequester
	// Concurrency bounds the spec writes of a run in flight at once
	// (default DefaultConcurrency).
	Concurrency int
	// Now and NewRunID are replaceable for tests.
	Now      func() time.Time
	NewRunID func() string
	// noHints makes runs hand sources neither hints nor the previous
	// listing digest (WithoutHints, tests only): a source then reads
	// every entry its cache does not know, as before the manifest kept
	// upstream digests, so a benchmark can compare both in one process.
	noHints bool
}

// CommitRequester asks the committer to number the pending changes
// (queue.CommitPublisher in production).
type CommitRequester interface {
	RequestCommit(ctx context.Context, req queue.CommitRequest) error
}

// DefaultConcurrency is how many spec writes a run has in flight.
const DefaultConcurrency = 8

// createBatchesInFlight bounds the batched creates a run has in flight.
const createBatchesInFlight = 2

func (r *Runner) concurrency() int {
	if r.Concurrency > 0 {
		return r.Concurrency
	}
	return DefaultConcurrency
}

// inParallel calls f on every item, at most n at a time, and returns the
// results in item order; the first error cancels the rest and is returned.
func inParallel[T, R any](ctx context.Context, n int, items []T, f func(context.Context, T) (R, error)) ([]R, error) {
	out := make([]R, len(items))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for i, it := range items {
		g.Go(func() error {
			r, err := f(gctx, it)
			out[i] = r
			return err
		})
	}
	return out, g.Wait()
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}
