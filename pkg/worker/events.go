package worker

import (
	"fmt"
	"slices"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/queue"
)

// How an event's message coalesces with the runs of its registry: the
// decision is pure, made from the registry's status (the one read the
// worker makes for it) and the clock.

// Event coalescing defaults (the reconcile function's settings,
// SPECSYNC_EVENT_COOLDOWN and SPECSYNC_EVENT_CLOCK_SKEW, set them).
const (
	DefaultEventCooldown  = time.Second
	DefaultEventClockSkew = time.Second
)

// EventVerdict is what to do with an event's message.
type EventVerdict int

const (
	// EventRun: run the registry (the entries the message names).
	EventRun EventVerdict = iota
	// EventCovered: a run that started after the event and read what it
	// names finished (or holds the lease now): the message is done.
	EventCovered
	// EventBusy: another run holds the registry's lease and does not
	// cover the event: retry later (Pub/Sub redelivers with backoff; the
	// redelivery will likely find itself covered).
	EventBusy
	// EventCoolingDown: a run of the registry started less than a cooldown
	// ago: retry later, so that a storm makes one run a cooldown at most.
	EventCoolingDown
)

// EventDecision is a verdict and why, for the log and the retry's error.
type EventDecision struct {
	Verdict EventVerdict
	Reason  string
	// Wait, when cooling down, is how long the cooldown has left.
	Wait time.Duration
}

// DecideEvent decides what to do with an event's message m, given its
// registry's status st as read now. A run covers the message when it
// started at least skew after m.EventAt (the clocks of the instance that
// stamped the event and of the one that ran may disagree by that much)
// and read everything m names: a full run that fetched and finished
// (last_run succeeded or guarded, or checked_at: a run for an event that
// found the registry unchanged), or, for each entry m names, a targeted
// run that reconciled it (covered). Such a run read upstream after the
// event, so running again would read the same or newer. A run holding
// the lease covers it the same way if it started late enough and reads
// what m names (a run that then fails is retried by its own message);
// otherwise a held lease is busy. A registry whose last run started less
// than cooldown ago cools down. Anything else runs.
func DecideEvent(st *api.RegistryStatus, m queue.Message, now time.Time, cooldown, skew time.Duration) EventDecision {
	after := m.EventAt.Add(skew)
	if by, ok := coveredBy(st, m.Entries, after); ok {
		return EventDecision{Verdict: EventCovered, Reason: by}
	}
	if l := st.Lease; l != nil && now.Before(l.ExpiresAt) {
		if !l.StartedAt.Before(after) && readsAll(l.Entries, m.Entries) {
			return EventDecision{Verdict: EventCovered, Reason: fmt.Sprintf("run %s, which started at %s, holds the lease and reads what the event names", l.Holder, l.StartedAt.Format(time.RFC3339Nano))}
		}
		return EventDecision{Verdict: EventBusy, Reason: fmt.Sprintf("registry %s is being reconciled by %s until %s, which started before the event or reads other entries", st.Name, l.Holder, l.ExpiresAt.Format(time.RFC3339))}
	}
	last := st.LastRun.StartedAt
	if t := st.LastTargeted; t != nil && t.StartedAt.After(last) {
		last = t.StartedAt
	}
	if st.CheckedAt.After(last) {
		last = st.CheckedAt
	}
	if since := now.Sub(last); since >= 0 && since < cooldown {
		return EventDecision{EventCoolingDown, fmt.Sprintf("registry %s ran %s ago, less than the event cooldown %s", st.Name, since.Round(time.Millisecond), cooldown), cooldown - since}
	}
	return EventDecision{Verdict: EventRun}
}

// coveredBy says which finished run covers entries (none: the whole
// registry) from after on, if one does.
func coveredBy(st *api.RegistryStatus, entries []string, after time.Time) (string, bool) {
	full := time.Time{}
	switch st.LastRun.Result {
	case api.ResultSucceeded, api.ResultGuarded, api.ResultUnchanged:
		full = st.LastRun.StartedAt
	}
	if st.CheckedAt.After(full) {
		full = st.CheckedAt
	}
	if !full.IsZero() && !full.Before(after) {
		return fmt.Sprintf("a full run that started at %s", full.Format(time.RFC3339Nano)), true
	}
	if len(entries) == 0 {
		return "", false
	}
	for _, e := range entries {
		i := slices.IndexFunc(st.Covered, func(c api.CoveredEntry) bool { return c.Entry == e })
		if i < 0 || st.Covered[i].At.Before(after) {
			return "", false
		}
	}
	return "targeted runs that started after the event", true
}

// readsAll reports whether a run that reads held (none: the whole
// registry) reads everything named (none: the whole registry) names.
func readsAll(held, named []string) bool {
	if len(held) == 0 {
		return true
	}
	if len(named) == 0 {
		return false
	}
	for _, n := range named {
		if !slices.Contains(held, n) {
			return false
		}
	}
	return true
}
