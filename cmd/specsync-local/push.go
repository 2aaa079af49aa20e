package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/pkg/spec"
)

// DefaultLocalRegistry is where the local stack's OCI registry listens
// (`specsync-local run`), and so where push pushes by default.
const DefaultLocalRegistry = "127.0.0.1:5001"

// cmdPush pushes spec files to the local stack's OCI registry as the
// seeding does (specs/<base name>:latest): an upstream push, which the
// registry announces to the stack, without a bootstrap.
func cmdPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	host := fs.String("registry", envOr("SPECSYNC_LOCAL_REGISTRY", DefaultLocalRegistry), "the OCI registry to push to, host:port (env SPECSYNC_LOCAL_REGISTRY)")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return usageError{fmt.Sprintf("push: %v\nusage: specsync-local push [-registry HOST:PORT] FILE...", err)}
	}
	files := fs.Args()
	if len(files) == 0 {
		return usageError{"usage: specsync-local push [-registry HOST:PORT] FILE...\n\nPushes each spec file as HOST/specs/<base name>:latest (what make run's registry was seeded with)."}
	}
	for _, file := range files {
		content, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if _, err := spec.Parse(content); err != nil {
			// Pushed anyway: a broken spec upstream is a case worth trying
			// (the run records it as that entry's error and keeps the last
			// good version).
			fmt.Fprintf(stderr, "warning: %s does not parse as a spec (%v); pushed anyway\n", file, err)
		}
		repo := emulator.SeedRepository(file)
		digest, err := emulator.PushSpecFile(ctx, *host, repo, content)
		if err != nil {
			return fmt.Errorf("push %s: %w (is `make run` up? its registry listens on %s)", file, err, *host)
		}
		fmt.Fprintf(stdout, "pushed %s as %s/%s:latest (%s)\n", file, *host, repo, digest)
	}
	return nil
}
