package api

// RunKind is what a reconcile run was asked to do, as its summary log
// line labels it: the alerts count full runs apart from event runs, and
// dry runs not at all (docs/operations.md).
type RunKind string

// Run kinds.
const (
	// KindFull is a run of the whole registry: a bootstrap's, or an
	// event's run that had to read it all (its backstop).
	KindFull RunKind = "full"
	// KindEvent is a targeted run: the entries an event named.
	KindEvent RunKind = "event"
	// KindDry is a dry run: planned, nothing written.
	KindDry RunKind = "dry"
)

// RunKinds are every run kind.
var RunKinds = []RunKind{KindFull, KindEvent, KindDry}

// KindOf is the kind of a run: dry, targeted (an event's) or full.
func KindOf(targeted, dry bool) RunKind {
	switch {
	case dry:
		return KindDry
	case targeted:
		return KindEvent
	default:
		return KindFull
	}
}
