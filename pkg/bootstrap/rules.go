package bootstrap

// The rules of an operation, as pure functions of what is stored: the
// store runs them inside its transactions (read, decide, write), and
// rules_test.go checks them without a database.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/store"
)

// rules are an operation's limits.
type rules struct {
	deadline  time.Duration // from start to the last report and its commit
	retention time.Duration // how long a finished operation can be polled
}

// joins reports whether a start (a dry run or not) coalesces onto op: one
// of the same kind, in progress and before its deadline.
func joins(op *api.Operation, now time.Time, dryRun bool) bool {
	return op != nil && op.State == api.InProgress && now.Before(op.Deadline) && op.DryRun == dryRun
}

// start decides a start transaction from the operation meta/bootstrap
// names: join it, or create operation id for registries, ending the
// current one first if it is still in progress past its deadline.
func (r rules) start(current *api.Operation, now time.Time, id string, registries []string, dryRun bool) store.OperationStart {
	if joins(current, now, dryRun) {
		return store.OperationStart{Join: current}
	}
	var out store.OperationStart
	if current != nil && current.State == api.InProgress && !now.Before(current.Deadline) {
		// Superseded: say so rather than leave it in progress.
		old := *current
		old.State, old.Description = api.Failed, "did not finish before its deadline; superseded by a new bootstrap"
		old.UpdatedAt, old.ExpiresAt = now, now.Add(r.retention)
		out.Supersede = &old
	}
	regs := slices.Sorted(slices.Values(registries))
	out.Create = &api.Operation{
		ID: id, State: api.InProgress, DryRun: dryRun, Registries: regs,
		Description: "reconciling " + countRegistries(len(regs)),
		Results:     map[string]api.RegistryResult{},
		CreatedAt:   now, UpdatedAt: now, Deadline: now.Add(r.deadline), ExpiresAt: now.Add(r.deadline + r.retention),
	}
	return out
}

// report applies registry's result to op and says whether op changed.
// A registry's first report counts; one the operation does not include is
// failure.Invalid. The last report of a dry run finishes it; the last of a
// real run makes it wait for the committer, with the outcome it will take.
func (r rules) report(op *api.Operation, registry string, res api.RegistryResult, now time.Time) (bool, error) {
	if !slices.Contains(op.Registries, registry) {
		return false, failure.New(failure.Invalid, "operation %s does not include registry %q", op.ID, registry)
	}
	if _, done := op.Results[registry]; done || op.State != api.InProgress {
		return false, nil
	}
	res.ReportedAt = now
	if op.Results == nil {
		op.Results = map[string]api.RegistryResult{}
	}
	op.Results[registry] = res
	op.UpdatedAt = now
	switch {
	case len(op.Results) == len(op.Registries) && op.DryRun:
		// A dry run wrote nothing: there is nothing to commit.
		op.State, op.Description = summarize(op)
		op.ExpiresAt = now.Add(r.retention)
	case len(op.Results) == len(op.Registries):
		// The last report: the caller asks the committer, which
		// finishes the operation (committed).
		state, desc := summarize(op)
		changes := 0
		for _, res := range op.Results {
			changes += res.Counts.Changes
		}
		op.Commit = &api.OperationCommit{Changes: changes, RequestedAt: now, State: state, Description: desc}
		op.Description = committingDescription(len(op.Registries), changes)
	default:
		op.Description = fmt.Sprintf("%d of %s reported", len(op.Results), countRegistries(len(op.Registries)))
	}
	return true, nil
}

// committed finishes op, which awaits the committer, at the catalog
// revision its changes reached, and says whether op changed: anything but
// an operation awaiting its commit (finished already, still waiting for
// registries) is left as it is.
func (r rules) committed(op *api.Operation, revision int64, now time.Time) bool {
	if !op.AwaitsCommit() {
		return false
	}
	op.State = op.Commit.State
	op.Description = op.Commit.Description + "; " + committedDescription(op.Commit.Changes, revision)
	op.Commit.CommittedAt = now
	op.CatalogRevision = &revision
	op.UpdatedAt, op.ExpiresAt = now, now.Add(r.retention)
	return true
}

// overdue says, for an operation still in progress past its deadline, why
// it failed: the registries that never reported, or the commit that never
// finished.
func overdue(op *api.Operation, now time.Time) (string, bool) {
	if op.State != api.InProgress || !now.After(op.Deadline) {
		return "", false
	}
	within := op.Deadline.Sub(op.CreatedAt)
	if op.Commit != nil {
		return fmt.Sprintf("%s, but the %s their runs wrote were not committed within %s: the committer did not finish (see the commit subscription and its dead letters); the changes stay pending for the next commit",
			op.Commit.Description, countChanges(op.Commit.Changes), within), true
	}
	noun := "registries"
	if len(op.Pending()) == 1 {
		noun = "registry"
	}
	return fmt.Sprintf("%s %s did not report within %s", noun, strings.Join(op.Pending(), ", "), within), true
}

// summarize is the outcome of an operation whose registries all reported.
func summarize(op *api.Operation) (api.OperationState, string) {
	var failed []string
	for _, r := range op.Registries {
		if op.Results[r].State != api.Succeeded {
			failed = append(failed, r)
		}
	}
	if len(failed) == 0 {
		if len(op.Registries) == 1 {
			return api.Succeeded, "the registry reconciled"
		}
		return api.Succeeded, fmt.Sprintf("all %s reconciled", countRegistries(len(op.Registries)))
	}
	return api.Failed, fmt.Sprintf("%d of %s failed: %s", len(failed), countRegistries(len(op.Registries)), strings.Join(failed, ", "))
}

// committingDescription is what an operation says while it waits for
// the committer.
func committingDescription(registries, changes int) string {
	reported := fmt.Sprintf("all %s reported", countRegistries(registries))
	if registries == 1 {
		reported = "the registry reported"
	}
	if changes == 0 {
		return reported + "; no change to commit, reading the catalog revision"
	}
	return reported + "; committing " + countChanges(changes)
}

// committedDescription is what a finished operation adds to its outcome.
func committedDescription(changes int, revision int64) string {
	if changes == 0 {
		return fmt.Sprintf("no catalog change, catalog at revision %d", revision)
	}
	return fmt.Sprintf("%s committed, catalog at revision %d", countChanges(changes), revision)
}

// countChanges counts catalog changes in English.
func countChanges(n int) string {
	if n == 1 {
		return "1 change"
	}
	return fmt.Sprintf("%d changes", n)
}

// countRegistries counts registries in English, for descriptions people read.
func countRegistries(n int) string {
	if n == 1 {
		return "1 registry"
	}
	return fmt.Sprintf("%d registries", n)
}
