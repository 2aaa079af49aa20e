package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/reconcile"
	// Auth type google's access tokens: gcloud's application default
	// login or GOOGLE_APPLICATION_CREDENTIALS.
	_ "github.com/specsync/specsync/pkg/registry/gcpauth"
	"github.com/specsync/specsync/pkg/store"
	// Signature verification of registries with a verify block: without
	// it, their fetches fail (registry.ErrVerifierNotLinked).
	_ "github.com/specsync/specsync/pkg/verify"
)

func cmdReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	var common commonFlags
	common.register(fs)
	configPath := fs.String("config", envOr("SPECSYNC_REGISTRIES", "registries.yaml"), "registries file (env SPECSYNC_REGISTRIES)")
	only := fs.String("registry", "", "reconcile only this registry")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	regs, err := reconcile.LoadRegistries(*configPath)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, common.project, common.database)
	if err != nil {
		return err
	}
	defer st.Close()
	log := logging.New(stderr, common.logLevel)
	runner := &reconcile.Runner{Store: st, Logger: log}
	committer := &reconcile.Committer{Store: st, Logger: log}
	return reconcileAll(ctx, runner, committer, regs, *only, stdout)
}

// reconcileAll runs every registry (or only one) and prints a summary per
// registry, then commits what the runs left pending (there is no commit
// topic here: the committer runs in process, after the runs, as the
// deployment's would after their commit requests) and prints the catalog
// revision. It fails if any run did not succeed, after running them all
// and committing.
func reconcileAll(ctx context.Context, runner *reconcile.Runner, committer *reconcile.Committer, regs reconcile.Registries, only string, stdout io.Writer) error {
	if only != "" {
		r, ok := regs.Lookup(only)
		if !ok {
			return fmt.Errorf("registry %q is not in the registries file (it has %s)", only, strings.Join(regs.Names(), ", "))
		}
		regs = reconcile.Registries{r}
	}
	var failed []string
	for _, reg := range regs {
		run, err := runner.Reconcile(ctx, reg)
		printRun(stdout, reg.Name, run)
		switch {
		case err != nil:
			failed = append(failed, fmt.Sprintf("%s: %v", reg.Name, err))
		case !run.Result.OK():
			failed = append(failed, fmt.Sprintf("%s: %s", reg.Name, run.Result))
		}
	}
	c, err := committer.Commit(ctx)
	if err != nil {
		return fmt.Errorf("the runs' changes are written but not committed (the next commit numbers them): %w", err)
	}
	fmt.Fprintf(stdout, "catalog: %s committed, revision %d (firestore: %s, %s)\n", api.Count(c.Changes, "change", "changes"), c.Revision, api.Count(int(c.Ops.Reads), "read", "reads"), api.Count(int(c.Ops.Writes), "write", "writes"))
	if len(failed) > 0 {
		return fmt.Errorf("%d of %s did not reconcile: %s", len(failed), api.Count(len(regs), "registry", "registries"), strings.Join(failed, "; "))
	}
	return nil
}

func printRun(w io.Writer, name string, run store.Run) {
	c := run.Counts
	fmt.Fprintf(w, "registry %s: %s in %dms\n", name, run.Result, run.DurationMS)
	if run.Result != api.ResultUnchanged {
		fmt.Fprintf(w, "  specs: %d created, %d updated, %d unchanged, %d unmarked, %d repaired, %d marked, %d deleted, %d kept (referenced), %d entry errors, %d conflicts\n",
			c.Created, c.Updated, c.Unchanged, c.Unmarked, c.Repaired, c.Marked, c.Deleted, c.Kept, c.EntryErrors, c.Conflicts)
	}
	fmt.Fprintf(w, "  firestore: %s, %s, %s\n", api.Count(int(run.Ops.Reads), "read", "reads"), api.Count(int(run.Ops.Writes), "write", "writes"), api.Count(int(run.Ops.Deletes), "delete", "deletes"))
	if run.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", run.Error)
	}
	if run.Guard != "" {
		fmt.Fprintf(w, "  guard: %s\n", run.Guard)
	}
	for _, e := range run.Errors {
		fmt.Fprintf(w, "  entry %s: %s\n", e.Entry, e.Message)
	}
	if run.ErrorsTotal > len(run.Errors) {
		fmt.Fprintf(w, "  ... and %s\n", api.Count(run.ErrorsTotal-len(run.Errors), "more entry error", "more entry errors"))
	}
	for _, k := range run.Kept {
		fmt.Fprintf(w, "  kept %s (%s): marked for deletion, %s\n", k.Name, k.SpecID, stillUse(k.Instances))
	}
}
