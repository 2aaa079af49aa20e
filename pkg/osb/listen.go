package osb

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/specsync/specsync/pkg/store"
)

// How the revision listener behaves (see revisionListener).
const (
	// listenLinger is how long the listener outlives the last waiter. A
	// watcher that got its answer asks again at once (since=next, or the
	// same since after an empty wait): a round trip later, far inside
	// this. So steady watchers, even one alone, keep one listener, and a
	// restart (a new listen: its setup round trip and the read of its
	// first snapshot) happens only when nobody has watched for a while.
	// Kept short because an instance that serves no request may get
	// little or no CPU (Cloud Run's default), so an idle listener buys
	// nothing, and a listen nobody needs should not be held open.
	listenLinger = 5 * time.Second
	// A listen that fails is started again after a pause that doubles
	// from listenRetryMin up to listenRetryMax (with jitter), and is back
	// at the minimum once a listen has heard a snapshot.
	listenRetryMin = 500 * time.Millisecond
	listenRetryMax = 30 * time.Second
)

// revisionListener tells the change feed's waiting long polls of a new
// catalog revision the moment Firestore has it, without polling: one
// snapshot listener on meta/catalog (store.WatchRevision) per warm
// instance, started by the first waiter, shared by all of them, stopped
// when the last one has left and listenLinger passed without another.
// Whatever waits costs one read per write of meta/catalog (plus one per
// listen started), however many watchers wait.
//
// A listen that fails (permission denied, a stream the client library
// gave up on) never fails a waiter: the waiters are woken and go back to
// the cached revision, polled as before the listener existed, while the
// listener is started again with backoff. The failure is logged once, by
// the listener, until a listen hears a snapshot again.
type revisionListener struct {
	st  *store.Store // counts its reads into ops
	log *slog.Logger
	ops store.Ops

	// Set before the first waiter (tests shorten them).
	linger             time.Duration
	retryMin, retryMax time.Duration
	// poll is how often a waiter looks at the cached revision without
	// being woken (0: the refresh window, at most a second). Tests
	// lengthen it to minutes so that a wake-up the listener missed
	// cannot pass for one it gave.
	poll time.Duration

	mu      sync.Mutex
	waiters int
	run     *listenRun // the listen running, nil when none
	idleGen int        // numbers the linger timers; a stale one does nothing
	cur     heard
	next    chan struct{} // cur.next, closable
	failing bool          // a listen failed and none has heard a snapshot since

	// For tests and logs.
	started, failures, running atomic.Int64
}

// heard is what a waiter knows from the listener: the revision it last
// heard, whether that is live (a listen is running and has heard its
// first snapshot), and a channel closed when either changes.
type heard struct {
	rev  int64
	live bool
	next <-chan struct{}
}

// listenRun is one running listen.
type listenRun struct{ cancel context.CancelFunc }

func newRevisionListener(st *store.Store, log *slog.Logger) *revisionListener {
	l := &revisionListener{log: log, linger: listenLinger, retryMin: listenRetryMin, retryMax: listenRetryMax, next: make(chan struct{})}
	l.st = st.WithOps(&l.ops)
	l.cur.next = l.next
	return l
}

// join counts a waiter in, starting the listener if none runs. The
// waiter must leave.
func (l *revisionListener) join() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiters++
	l.idleGen++ // cancels a linger in progress
	if l.run == nil {
		ctx, cancel := context.WithCancel(context.Background())
		run := &listenRun{cancel: cancel}
		l.run = run
		l.started.Add(1)
		l.running.Add(1)
		go l.listen(ctx, run)
	}
}

// leave counts a waiter out; the last one starts the linger.
func (l *revisionListener) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiters--
	if l.waiters > 0 || l.run == nil {
		return
	}
	if l.linger <= 0 {
		l.stopLocked()
		return
	}
	l.idleGen++
	gen := l.idleGen
	time.AfterFunc(l.linger, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.idleGen == gen && l.waiters == 0 && l.run != nil {
			l.stopLocked()
		}
	})
}

// pollEvery is how often a waiter looks at the cached revision (and at
// what the listener heard) when nothing wakes it: the cache's refresh
// window, at most a second, unless a test set poll.
func (l *revisionListener) pollEvery(window time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.poll > 0 {
		return l.poll
	}
	if window <= 0 || window > time.Second {
		return time.Second
	}
	return window
}

// now is what the listener knows now.
func (l *revisionListener) now() heard {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

func (l *revisionListener) stopLocked() {
	l.run.cancel()
	l.run = nil
	l.setLocked(l.cur.rev, false)
}

// setLocked records what the listener knows and wakes the waiters if
// that changed.
func (l *revisionListener) setLocked(rev int64, live bool) {
	if l.cur.rev == rev && l.cur.live == live {
		return
	}
	close(l.next)
	l.next = make(chan struct{})
	l.cur = heard{rev: rev, live: live, next: l.next}
}

// listen runs listens until ctx ends, pausing after each failure.
func (l *revisionListener) listen(ctx context.Context, run *listenRun) {
	defer l.running.Add(-1)
	retry := l.retryMin
	for {
		err := l.st.WatchRevision(ctx, func(rev int64) {
			retry = l.retryMin
			l.hear(run, rev)
		})
		if ctx.Err() != nil {
			return // stopped (stopLocked said so to the waiters)
		}
		l.failures.Add(1)
		l.mu.Lock()
		if l.run != run {
			l.mu.Unlock()
			return
		}
		l.setLocked(l.cur.rev, false) // the waiters go back to the cached revision
		if l.waiters == 0 {
			// Lingering: nobody to start it again for; the next waiter
			// starts a new one.
			l.run = nil
			run.cancel()
			l.mu.Unlock()
			l.log.Debug("catalog revision listener failed with nobody waiting; stopped", "error", err)
			return
		}
		first := !l.failing
		l.failing = true
		l.mu.Unlock()
		pause := retry/2 + rand.N(retry/2+1)
		if first {
			l.log.Warn("catalog revision listener failed: waiting long polls fall back to the catalog refresh window until it is back",
				"error", err, "retry_in", pause.String())
		} else {
			l.log.Debug("catalog revision listener failed again", "error", err, "retry_in", pause.String())
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		retry = min(retry*2, l.retryMax)
	}
}

// hear records a revision the listen of run heard.
func (l *revisionListener) hear(run *listenRun, rev int64) {
	l.mu.Lock()
	if l.run != run {
		l.mu.Unlock()
		return
	}
	back := l.failing
	l.failing = false
	l.setLocked(rev, true)
	l.mu.Unlock()
	if back {
		l.log.Info("catalog revision listener is back", "revision", rev)
	}
}
