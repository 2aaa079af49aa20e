// Package api is specsync's wire vocabulary: the JSON bodies its functions
// answer (the bootstrap, the admin endpoints, the change feed, error
// bodies) and the typed strings they are made of (run results, operation
// states, spec states, change kinds, planned changes). The functions encode
// these types, the specsync CLI and the tests decode them, and pkg/store
// stores the ones whose Firestore document has the same shape (hence the
// firestore tags beside the json ones).
//
// It depends on no cloud SDK, so the operator CLI can import it without
// pulling in Firestore, Pub/Sub or gRPC.
package api

// RunResult is how one reconcile run of a registry ended, as its status
// (GET /registries) and a bootstrap's result for it record it.
type RunResult string

// Run results.
const (
	ResultSucceeded   RunResult = "succeeded"
	ResultUnchanged   RunResult = "unchanged"    // listing equal to the last successful one; nothing read or written
	ResultFetchFailed RunResult = "fetch_failed" // the registry could not be listed; nothing changed
	ResultGuarded     RunResult = "guarded"      // the mass-deletion guard withheld marking
	ResultError       RunResult = "error"        // the store failed part-way; safe to run again
	ResultBusy        RunResult = "busy"         // another run holds the registry's lease; try again later
	ResultDryRun      RunResult = "dry_run"      // a dry run planned the registry; nothing written
	// ResultUnknownRegistry is a bootstrap result only: the operation named
	// a registry this deployment's registries file does not have.
	ResultUnknownRegistry RunResult = "unknown_registry"
)

// OK reports whether the run did what it was asked: reconciled, found
// nothing to do, or (a dry run) planned. Anything else fails its
// registry's part of a bootstrap.
func (r RunResult) OK() bool {
	return r == ResultSucceeded || r == ResultUnchanged || r == ResultDryRun
}

// Failed reports whether the run could not do its work at all: the
// registry could not be listed or the store failed. (A guarded run did its
// work except the marking it withheld.)
func (r RunResult) Failed() bool { return r == ResultFetchFailed || r == ResultError }

// OperationState is the state of a bootstrap operation and of each
// registry's result in it, spelled as OSB's last_operation spells them
// (the OSB endpoints' own last_operation answers use it too).
type OperationState string

// Operation states.
const (
	InProgress OperationState = "in progress"
	Succeeded  OperationState = "succeeded"
	Failed     OperationState = "failed"
)

// SpecState is the state of a stored spec.
type SpecState string

// Spec states.
const (
	// SpecActive is served in the catalog.
	SpecActive SpecState = "active"
	// SpecMarked is no longer offered upstream: out of the catalog, kept
	// (for instances that use it) until a later run deletes it.
	SpecMarked SpecState = "marked"
)

// ChangeKind is what happened to a spec, as the catalog's change feed
// tells it.
type ChangeKind string

// Change kinds.
const (
	ChangeCreated  ChangeKind = "created"
	ChangeUpdated  ChangeKind = "updated"   // a new version adopted
	ChangeUnmarked ChangeKind = "unmarked"  // offered again: back in the catalog
	ChangeMarked   ChangeKind = "marked"    // no longer offered: out of the catalog, kept until unreferenced
	ChangeDeleted  ChangeKind = "deleted"   // gone for good
	ChangeHeldBack ChangeKind = "held_back" // a new version not adopted; the served one is unchanged
)

// PlannedKind is what a dry run found a real run would do to one spec.
type PlannedKind string

// Planned changes.
const (
	PlannedCreate   PlannedKind = "create"
	PlannedUpdate   PlannedKind = "update"
	PlannedUnmark   PlannedKind = "unmark"
	PlannedRepair   PlannedKind = "repair" // clear a recorded entry error or hold
	PlannedMark     PlannedKind = "mark"
	PlannedDelete   PlannedKind = "delete"
	PlannedKeep     PlannedKind = "keep" // marked, not offered, still used by instances
	PlannedHoldBack PlannedKind = "hold_back"
)
