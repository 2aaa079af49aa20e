package reconcile_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
)

// How the benchmark commits (the one file of it that differs from the
// code before the committer, where each run committed its own changes):
// every run asks for a commit at its end, and one committer in the
// benchmark's process handles the requests one at a time, in order, as
// the ordered push subscription delivers them (without Pub/Sub's own
// latency).
type benchCommits interface {
	// wait blocks until every commit asked for so far is done and returns
	// what the commits cost since the last wait.
	wait(b *testing.B) store.Counts
}

type serialCommits struct {
	committer *reconcile.Committer
	mu        sync.Mutex
	cond      *sync.Cond
	asked     int
	done      int
	queue     chan queue.CommitRequest
	err       error
	ops       store.Counts
}

func newBenchRunner(b *testing.B, st *store.Store, lease time.Duration) (*reconcile.Runner, benchCommits) {
	c := &serialCommits{committer: &reconcile.Committer{Store: st, Logger: quiet}, queue: make(chan queue.CommitRequest, 1000)}
	c.cond = sync.NewCond(&c.mu)
	go func() {
		for range c.queue {
			res, err := c.committer.Commit(context.Background())
			c.mu.Lock()
			c.done++
			c.ops.Reads += res.Ops.Reads
			c.ops.Writes += res.Ops.Writes
			c.ops.Deletes += res.Ops.Deletes
			if err != nil && c.err == nil {
				c.err = err
			}
			c.cond.Broadcast()
			c.mu.Unlock()
		}
	}()
	b.Cleanup(func() { close(c.queue) })
	return &reconcile.Runner{Store: st, Logger: quiet, LeaseTTL: lease, Commits: c}, c
}

func (c *serialCommits) RequestCommit(_ context.Context, r queue.CommitRequest) error {
	c.mu.Lock()
	c.asked++
	c.mu.Unlock()
	c.queue <- r
	return nil
}

func (c *serialCommits) wait(b *testing.B) store.Counts {
	b.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.done < c.asked {
		c.cond.Wait()
	}
	if c.err != nil {
		b.Fatalf("commit: %v", c.err)
	}
	ops := c.ops
	c.ops = store.Counts{}
	return ops
}
