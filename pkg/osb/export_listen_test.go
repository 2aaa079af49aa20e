package osb

import (
	"log/slog"
	"time"
)

// ListenerStats is what a broker's revision listener did so far.
type ListenerStats struct {
	// Waiters is how many long polls wait on it now.
	Waiters int
	// Live: a listen runs and has heard its first snapshot; Revision is
	// the revision it heard last.
	Live     bool
	Revision int64
	// Started is how many listens were started, Running how many
	// goroutines run one now (0 or 1), Failures how many listens failed.
	Started, Running, Failures int64
	// Reads is the Firestore reads of its listens (one per snapshot).
	Reads int64
}

// Listener says what the broker's revision listener did so far.
func (b *Broker) Listener() ListenerStats {
	l := b.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	return ListenerStats{Waiters: l.waiters, Live: l.cur.live, Revision: l.cur.rev,
		Started: l.started.Load(), Running: l.running.Load(), Failures: l.failures.Load(), Reads: l.ops.Snapshot().Reads}
}

// TuneListener sets how long the listener outlives the last waiter and
// the pauses before a failed listen is started again. Call it before the
// first long poll waits.
func (b *Broker) TuneListener(linger, retryMin, retryMax time.Duration) {
	l := b.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	l.linger, l.retryMin, l.retryMax = linger, retryMin, retryMax
}

// ListenerLogger makes the revision listener log to log.
func (b *Broker) ListenerLogger(log *slog.Logger) {
	b.listen.mu.Lock()
	defer b.listen.mu.Unlock()
	b.listen.log = log
}

// TuneWaiterFallback sets how often a waiting long poll looks at the
// cached revision when the listener does not wake it (poll), and the
// longest wait a long poll may ask for (maxWait). Call it before the
// first long poll waits.
func (b *Broker) TuneWaiterFallback(poll, maxWait time.Duration) {
	b.listen.mu.Lock()
	b.listen.poll = poll
	b.listen.mu.Unlock()
	b.cfg.MaxWait = maxWait
}
