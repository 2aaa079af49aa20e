package main

import (
	"context"
	"fmt"
	"io"
)

const localUsage = `usage: specsync local <command> [flags]

Server-side tools that talk to Firestore directly (GOOGLE_CLOUD_PROJECT,
FIRESTORE_DATABASE, FIRESTORE_EMULATOR_HOST), not to the deployed API:
  reconcile  reconcile the registries of a registries file into Firestore
  catalog    print the specs the catalog serves`

// cmdLocal dispatches the server-side tools.
func cmdLocal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{localUsage}
	}
	switch args[0] {
	case "reconcile":
		return cmdReconcile(ctx, args[1:], stdout, stderr)
	case "catalog":
		return cmdLocalCatalog(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, localUsage)
		return nil
	default:
		return usageError{fmt.Sprintf("unknown command \"local %s\"\n\n%s", args[0], localUsage)}
	}
}
