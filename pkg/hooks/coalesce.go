package hooks

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/specsync/specsync/pkg/queue"
)

// publishTimeout bounds the publish of a window's message: it runs for
// every request that joined the window, whichever of them gave up.
const publishTimeout = time.Minute

// request is what one webhook request asks to have reconciled.
type request struct {
	whole   bool
	entries []string
	// at is when the request was received.
	at time.Time
}

// outcome is what became of a request.
type outcome struct {
	// coalesced says its message carries other requests' events too.
	coalesced bool
}

// coalescer turns a burst of one registry's webhooks into a few
// messages. A function instance cannot work after it has answered (Cloud
// Functions throttles its CPU), so nothing is deferred past a response:
// the first event of a registry is published at once (a single push is
// reconciled in about a second) and opens a window; the events that
// arrive during it join one batch, which the first of them publishes when
// the window closes, while the others wait for that publish: each
// request is answered only once its event is in a published message, or
// with the error if publishing failed. That publish opens the next
// window, so a sustained burst makes one message per window. Nothing is
// shared between instances: a burst that several instances share makes a
// few messages on each, which the worker's coalescing (a run that started
// after an event covers it) and cooldown take over from.
type coalescer struct {
	window time.Duration
	pub    Publisher

	mu    sync.Mutex
	lanes map[string]*lane // by registry: configured names, a bounded set
}

// lane is one registry's state.
type lane struct {
	// quietUntil is the end of the current window: an event before it
	// joins the pending batch instead of publishing at once.
	quietUntil time.Time
	pending    *batch
}

// batch is the events of one window.
type batch struct {
	flushAt time.Time
	whole   bool
	// entries maps each entry to when the newest event naming it was
	// received; newest is the newest of all.
	entries  map[string]time.Time
	newest   time.Time
	requests int

	done chan struct{} // closed once published (or failed)
	err  error
}

func newCoalescer(window time.Duration, pub Publisher) *coalescer {
	return &coalescer{window: window, pub: pub, lanes: map[string]*lane{}}
}

func (b *batch) add(req request) {
	b.requests++
	b.whole = b.whole || req.whole
	for _, e := range req.entries {
		if req.at.After(b.entries[e]) {
			b.entries[e] = req.at
		}
	}
	if req.at.After(b.newest) {
		b.newest = req.at
	}
}

// submit publishes what req asks for, alone or with the other requests
// of its window, and returns once it is published.
func (c *coalescer) submit(ctx context.Context, registry string, req request) (outcome, error) {
	c.mu.Lock()
	l := c.lanes[registry]
	if l == nil {
		l = &lane{}
		c.lanes[registry] = l
	}
	now := time.Now()
	if l.pending == nil && !now.Before(l.quietUntil) {
		// The leading edge: publish at once, and open a window.
		l.quietUntil = now.Add(c.window)
		c.mu.Unlock()
		b := &batch{entries: map[string]time.Time{}}
		b.add(req)
		return outcome{}, c.pub.Publish(ctx, b.messages(registry))
	}
	b := l.pending
	flusher := b == nil
	if flusher {
		b = &batch{flushAt: l.quietUntil, entries: map[string]time.Time{}, done: make(chan struct{})}
		l.pending = b
	}
	b.add(req)
	c.mu.Unlock()
	if flusher {
		c.flush(ctx, registry, l, b)
	}
	select {
	case <-b.done:
		return outcome{coalesced: b.requests > 1}, b.err
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	}
}

// flush waits for the window to close, then takes the batch and
// publishes it. It runs in the request that opened the batch, which stays
// in flight (and its instance's CPU allocated) until it is done; the wait
// is not cut short when that request's caller gives up, because the
// batch's other requests wait for this publish.
func (c *coalescer) flush(ctx context.Context, registry string, l *lane, b *batch) {
	if d := time.Until(b.flushAt); d > 0 {
		t := time.NewTimer(d)
		<-t.C
	}
	c.mu.Lock()
	if l.pending == b {
		l.pending = nil
	}
	l.quietUntil = time.Now().Add(c.window)
	msgs := b.messages(registry)
	c.mu.Unlock()
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	b.err = c.pub.Publish(pctx, msgs)
	cancel()
	close(b.done)
}

// messages are the event messages of a batch: one for the whole registry
// if any of its events asked for it, else its entries, sorted, at most
// queue.MaxEntries to a message. Each message's EventAt is the newest
// receive time of the events it carries.
func (b *batch) messages(registry string) []queue.Message {
	if b.whole || len(b.entries) == 0 {
		return []queue.Message{{Registry: registry, EventAt: b.newest}}
	}
	names := slices.Sorted(maps.Keys(b.entries))
	var out []queue.Message
	for chunk := range slices.Chunk(names, queue.MaxEntries) {
		var at time.Time
		for _, e := range chunk {
			if b.entries[e].After(at) {
				at = b.entries[e]
			}
		}
		out = append(out, queue.Message{Registry: registry, Entries: chunk, EventAt: at})
	}
	return out
}
