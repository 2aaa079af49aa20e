package api

import "time"

// The bootstrap function's bodies (POST /bootstrap, GET
// /bootstrap/last_operation) and the operations/{id} document they are
// read from, which the catalog's GET /admin/operations also lists.

// Counts are billable Firestore operations: what a run, or a bootstrap,
// cost.
type Counts struct {
	Reads   int64 `json:"reads" firestore:"reads"`
	Writes  int64 `json:"writes" firestore:"writes"`
	Deletes int64 `json:"deletes" firestore:"deletes"`
}

// Add returns the sum of c and d.
func (c Counts) Add(d Counts) Counts {
	return Counts{Reads: c.Reads + d.Reads, Writes: c.Writes + d.Writes, Deletes: c.Deletes + d.Deletes}
}

// RunCounts are the per-run counters of one registry's reconcile.
type RunCounts struct {
	Created     int `json:"created" firestore:"created"`
	Updated     int `json:"updated" firestore:"updated"`
	Unchanged   int `json:"unchanged" firestore:"unchanged"`
	Unmarked    int `json:"unmarked" firestore:"unmarked"`
	Repaired    int `json:"repaired" firestore:"repaired"`
	Marked      int `json:"marked" firestore:"marked"`
	Deleted     int `json:"deleted" firestore:"deleted"`
	Kept        int `json:"kept_referenced" firestore:"kept_referenced"`
	EntryErrors int `json:"entry_errors" firestore:"entry_errors"`
	Conflicts   int `json:"conflicts" firestore:"conflicts"`
	HeldBack    int `json:"held_back" firestore:"held_back"`
	// Changes is how many catalog changes the run wrote; they are
	// pending until the committer numbers them.
	Changes int `json:"changes" firestore:"changes"`
}

// PlannedChange is one change a dry run found a real run would make, by
// name, so an operator sees the plan as a diff.
type PlannedChange struct {
	Change PlannedKind `json:"change" firestore:"change"`
	SpecID string      `json:"spec_id" firestore:"spec_id"`
	Name   string      `json:"name" firestore:"name"`
	Entry  string      `json:"entry,omitempty" firestore:"entry,omitempty"`
	Detail string      `json:"detail,omitempty" firestore:"detail,omitempty"`
}

// RegistryResult is what one registry's reconcile reported to a bootstrap.
type RegistryResult struct {
	// State is Succeeded when Result is OK, Failed otherwise.
	State      OperationState `json:"state" firestore:"state"`
	Result     RunResult      `json:"result" firestore:"result"`
	Counts     RunCounts      `json:"counts" firestore:"counts"`
	Firestore  Counts         `json:"firestore" firestore:"firestore"`
	Error      string         `json:"error,omitempty" firestore:"error,omitempty"`
	RunID      string         `json:"run_id,omitempty" firestore:"run_id,omitempty"`
	ReportedAt time.Time      `json:"reported_at" firestore:"reported_at"`
	// Planned is a dry run's plan by name (at most store.MaxPlannedChanges;
	// Counts are complete).
	Planned []PlannedChange `json:"planned,omitempty" firestore:"planned,omitempty"`
	// EntryErrors are a dry run's broken entries, each with why it does
	// not parse or validate (sorted by entry, at most
	// reconcile.MaxRecordedErrors; Counts.EntryErrors counts them all).
	EntryErrors []EntryError `json:"entry_errors,omitempty" firestore:"entry_errors,omitempty"`
}

// Operation is one bootstrap: an operations/{id} document, and an entry of
// GET /admin/operations.
type Operation struct {
	ID          string                    `json:"operation" firestore:"id"`
	State       OperationState            `json:"state" firestore:"state"`
	Description string                    `json:"description" firestore:"description"`
	DryRun      bool                      `json:"dry_run" firestore:"dry_run"`
	Registries  []string                  `json:"registries" firestore:"registries"`
	Results     map[string]RegistryResult `json:"results" firestore:"results"`
	CreatedAt   time.Time                 `json:"created_at" firestore:"created_at"`
	UpdatedAt   time.Time                 `json:"updated_at" firestore:"updated_at"`
	Deadline    time.Time                 `json:"deadline" firestore:"deadline"`
	// ExpiresAt is when a finished operation is forgotten (a Firestore TTL
	// policy on this field deletes it; reads treat it as gone already).
	ExpiresAt time.Time `json:"-" firestore:"expires_at"`
	// Commit is set when every registry has reported (never for a dry
	// run): the operation then waits, still in progress, for the
	// committer to number the changes its runs wrote, so it cannot
	// report succeeded before a catalog read could show them.
	Commit *OperationCommit `json:"commit,omitempty" firestore:"commit,omitempty"`
	// CatalogRevision is the catalog revision once the operation's
	// changes were committed (the current one if it changed nothing): a
	// catalog read that shows at least this revision reflects the
	// bootstrap. Set when the committer finishes the operation; never for
	// a dry run.
	CatalogRevision *int64 `json:"catalog_revision,omitempty" firestore:"catalog_revision,omitempty"`
}

// OperationCommit is an operation's wait for the committer, once every
// registry reported.
type OperationCommit struct {
	// Changes is how many catalog changes the operation's runs wrote.
	Changes     int       `json:"changes" firestore:"changes"`
	RequestedAt time.Time `json:"requested_at" firestore:"requested_at"`
	// State and Description are the outcome of the runs, which the
	// operation takes once the changes are committed.
	State       OperationState `json:"state" firestore:"state"`
	Description string         `json:"description" firestore:"description"`
	CommittedAt time.Time      `json:"committed_at,omitzero" firestore:"committed_at,omitempty"`
}

// AwaitsCommit reports whether every registry reported and the operation
// waits for the committer.
func (op *Operation) AwaitsCommit() bool {
	return op.State == InProgress && op.Commit != nil && op.Commit.CommittedAt.IsZero()
}

// Expired reports whether a finished operation is past its retention:
// every read treats it as gone, as the TTL policy will soon make it.
func (op *Operation) Expired(now time.Time) bool {
	return op.State != InProgress && !op.ExpiresAt.IsZero() && now.After(op.ExpiresAt)
}

// Firestore sums the Firestore operations every registry of the
// operation reported: the cost of that bootstrap.
func (op *Operation) Firestore() Counts {
	var c Counts
	for _, r := range op.Results {
		c = c.Add(r.Firestore)
	}
	return c
}

// Pending lists the registries that have not reported, in the
// operation's (sorted) order.
func (op *Operation) Pending() []string {
	var out []string
	for _, r := range op.Registries {
		if _, ok := op.Results[r]; !ok {
			out = append(out, r)
		}
	}
	return out
}

// BootstrapAccepted is the body of POST /bootstrap's 202 Accepted.
type BootstrapAccepted struct {
	Operation string `json:"operation"`
	// Coalesced is true when the request joined the bootstrap in progress.
	Coalesced bool `json:"coalesced"`
	DryRun    bool `json:"dry_run"`
}

// LastOperation is the body of GET /bootstrap/last_operation.
type LastOperation struct {
	State       OperationState `json:"state"`
	DryRun      bool           `json:"dry_run"`
	Description string         `json:"description"`
	Operation   string         `json:"operation"`
	// Registries are the results so far, by registry (an object, never
	// null).
	Registries map[string]RegistryResult `json:"registries"`
	// Pending are the registries that have not reported yet.
	Pending []string `json:"pending,omitempty"`
	// CatalogRevision is the catalog revision the operation's changes
	// reached, once it finished (the current one if it changed nothing;
	// absent while in progress and for a dry run): a catalog that serves
	// at least this revision reflects the bootstrap.
	CatalogRevision *int64 `json:"catalog_revision,omitempty"`
	// Committing is how many changes the operation waits to see
	// committed, once every registry reported.
	Committing *int      `json:"committing,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Total is how many registries the operation includes.
func (o *LastOperation) Total() int { return len(o.Registries) + len(o.Pending) }
