// Command specsync is the operator's command line: a client of the
// bootstrap and catalog functions' HTTP APIs (bootstrap, status, catalog,
// changes, specs, instances) and an offline checker of registries files.
// It links the API's types (pkg/api) and the registries file's checker,
// and none of the cloud SDKs, the functions or the emulators
// (deps_test.go): the local tools that need those are specsync-local's.
//
//	specsync bootstrap [--wait] [--dry-run]
//	specsync status | catalog | specs | instances   [--output json]
//	specsync changes [--follow] [--since N]
//	specsync config check FILE
//
// Exit codes (see exitcodes.go): 0 ok, 1 the thing asked about failed, 2
// usage, 3 credentials refused, 4 the API failed or cannot be reached, 5
// timed out waiting.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(ExitUsage)
		}
		fmt.Fprintln(os.Stderr, "specsync:", err)
		os.Exit(exitCode(err))
	}
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

const usage = `usage: specsync <command> [flags]

operator commands (talk to the deployed functions' HTTP APIs):
  bootstrap      start a bootstrap; --wait follows it to the end, --dry-run
                 shows what a real one would change
  status         every registry: last run, counts, errors, held-back
                 versions, pinned specs
  catalog        the services and plans the broker serves; --view NAME
                 shows what that view's platform sees
  changes        the catalog's change feed; --follow keeps watching
  specs          the stored specs (--marked, --registry)
  instances      the service instances (--marked, --registry, --service)
  config check   validate a registries file offline, every error with its line

The local tools (the local stack, the demo, reconciles straight into a
Firestore) are specsync-local's: go run ./cmd/specsync-local help.

Configuration: SPECSYNC_URL (or SPECSYNC_BOOTSTRAP_URL and
SPECSYNC_CATALOG_URL), SPECSYNC_ADMIN_TOKEN (or SPECSYNC_ADMIN_TOKEN_FILE),
SPECSYNC_BROKER_USERNAME and SPECSYNC_BROKER_PASSWORD, and
SPECSYNC_IDENTITY_TOKEN where Cloud Run IAM guards a function.
Exit codes: 0 ok, 1 failed (bootstrap failed, config has errors, status
--check found a failing registry), 2 usage, 3 credentials refused, 4 API
error or unreachable, 5 timed out waiting.

Run "specsync <command> -h" for a command's flags.`

func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{usage}
	}
	switch args[0] {
	case "bootstrap":
		return cmdBootstrap(ctx, args[1:], stdout, stderr)
	case "status":
		return cmdStatus(ctx, args[1:], stdout, stderr)
	case "catalog":
		return cmdCatalog(ctx, args[1:], stdout, stderr)
	case "changes":
		return cmdChanges(ctx, args[1:], stdout, stderr)
	case "specs":
		return cmdSpecs(ctx, args[1:], stdout, stderr)
	case "instances":
		return cmdInstances(ctx, args[1:], stdout, stderr)
	case "config":
		return cmdConfig(ctx, args[1:], stdout, stderr)
	case "run", "demo":
		return usageError{fmt.Sprintf("specsync %[1]s moved to the local tools' own command: specsync-local %[1]s (make %[1]s, or go run ./cmd/specsync-local %[1]s)", args[0])}
	case "local":
		return usageError{"specsync local reconcile and specsync local catalog moved to the local tools' own command: specsync-local reconcile, specsync-local catalog (go run ./cmd/specsync-local help)"}
	case "reconcile":
		return usageError{"specsync reconcile is now \"specsync-local reconcile\" (\"specsync catalog\" is the broker's catalog; the Firestore view is \"specsync-local catalog\")"}
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		return usageError{fmt.Sprintf("unknown command %q\n\n%s", args[0], usage)}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
