package emulatortest

import "github.com/specsync/specsync/pkg/api"

// The Firestore costs the tests count exactly, stated once. The tests
// that count them (store.Ops or Billing) assert these values, and the
// repository's docs test (cost_docs_test.go at the root) fails when
// docs/BENCHMARKS.md, docs/events.md, docs/deploy.md or docs/design.md
// quote a different figure: a cost that changes is changed here, and the
// tests say which sentences to update.

// What one event of one entry costs (pkg/worker's
// TestWorkerRunsAnEventsEntries, pkg/reconcile's
// TestTargetedRunCostIsTheEntrysNotTheRegistrys), at any registry size.
var (
	// EventStatusRead is the worker's one read of the registry's status
	// before it decides to run.
	EventStatusRead = api.Counts{Reads: 1}
	// EventRunChanged is the targeted run of an entry that changed: the
	// lease (1 read, 1 write), the entry's manifest shard, its spec, the
	// query counting its instances, the spec and its change written, the
	// record (1 read; the status and the shard).
	EventRunChanged = api.Counts{Reads: 5, Writes: 5}
	// EventCommit is the commit of that one change: the pending changes
	// and meta/catalog read, both written.
	EventCommit = api.Counts{Reads: 2, Writes: 2}
	// EventRunAdded is the targeted run of an entry new upstream.
	EventRunAdded = api.Counts{Reads: 5, Writes: 5}
	// EventRunUnchanged is the targeted run of an entry that did not
	// change (a replay no run covered): the lease, the shard, the record.
	EventRunUnchanged = api.Counts{Reads: 3, Writes: 2}
	// Event is one event of one changed entry, all told.
	Event = Sum(EventStatusRead, EventRunChanged, EventCommit)
)

// What a bootstrap costs (pkg/worker's TestBootstrapCostModel), counted
// on the wire: an unchanged world of n registries is BootstrapFixed plus
// n times BootstrapPerRegistry; one spec changed in one of them adds
// BootstrapOneSpecChanged.
var (
	BootstrapFixed          = api.Counts{Reads: 7, Writes: 3}
	BootstrapPerRegistry    = api.Counts{Reads: 3, Writes: 1}
	BootstrapOneSpecChanged = api.Counts{Reads: 8, Writes: 8}
)

// What a full run of an OCI registry costs on a new instance with one
// repository moved (pkg/reconcile's TestColdRunCostsOneHeadARepository,
// hints or not): the status, the lease's transaction, the manifest's
// shard, the moved spec, the query counting its instances; the lease,
// the spec and its change, the record (the status with its shard).
var FullRunOneMoved = api.Counts{Reads: 5, Writes: 5}

// UnchangedBootstrap is what a bootstrap of n unchanged registries costs.
func UnchangedBootstrap(n int64) api.Counts {
	return api.Counts{
		Reads:  BootstrapFixed.Reads + n*BootstrapPerRegistry.Reads,
		Writes: BootstrapFixed.Writes + n*BootstrapPerRegistry.Writes,
	}
}

// Sum adds costs.
func Sum(cs ...api.Counts) api.Counts {
	var out api.Counts
	for _, c := range cs {
		out.Reads += c.Reads
		out.Writes += c.Writes
		out.Deletes += c.Deletes
	}
	return out
}
