// Command specsync is the operator's command line: a client of the
// bootstrap and catalog functions' HTTP APIs (bootstrap, status, catalog,
// changes, specs, instances), an offline checker of registries files, and
// the local tools (the local stack, the demo, and reconciles run straight
// against a Firestore).
//
//	specsync bootstrap [--wait] [--dry-run]
//	specsync status | catalog | specs | instances   [--output json]
//	specsync changes [--follow] [--since N]
//	specsync config check FILE
//	specsync local reconcile -config registries.yaml [-registry NAME]
//	specsync local catalog
//	specsync run | demo
//
// Exit codes (see exitcodes.go): 0 ok, 1 the thing asked about failed, 2
// usage, 3 credentials refused, 4 the API failed or cannot be reached, 5
// timed out waiting.
package main

import (
	"context"
	"errors"
	"flag"
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
  catalog        the services and plans the broker serves
  changes        the catalog's change feed; --follow keeps watching
  specs          the stored specs (--marked, --registry)
  instances      the service instances (--marked, --registry, --service)
  config check   validate a registries file offline, every error with its line

local tools:
  local reconcile  reconcile a registries file straight into a Firestore
  local catalog    print the specs a Firestore's catalog serves
  run            serve the local stack (every function, emulators, local OCI
                 registry, push subscription) until interrupted
  demo           start the emulators and a local OCI registry, reconcile the
                 example registry twice, print the catalog, stop everything

Configuration: SPECSYNC_URL (or SPECSYNC_BOOTSTRAP_URL and
SPECSYNC_CATALOG_URL), SPECSYNC_ADMIN_TOKEN (or SPECSYNC_ADMIN_TOKEN_FILE),
SPECSYNC_BROKER_USERNAME and SPECSYNC_BROKER_PASSWORD.
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
	case "local":
		return cmdLocal(ctx, args[1:], stdout, stderr)
	case "reconcile":
		return usageError{"specsync reconcile is now \"specsync local reconcile\" (\"specsync catalog\" is the broker's catalog; the Firestore view is \"specsync local catalog\")"}
	case "demo":
		return cmdDemo(ctx, args[1:], stdout, stderr)
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		return usageError{fmt.Sprintf("unknown command %q\n\n%s", args[0], usage)}
	}
}

// commonFlags are the flags every command that talks to Firestore takes.
type commonFlags struct {
	project  string
	database string
	logLevel string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.project, "project", envOr("GOOGLE_CLOUD_PROJECT", ""), "Google Cloud project (env GOOGLE_CLOUD_PROJECT)")
	fs.StringVar(&c.database, "database", envOr("FIRESTORE_DATABASE", ""), "Firestore database (env FIRESTORE_DATABASE; default the (default) database)")
	fs.StringVar(&c.logLevel, "log-level", envOr("LOG_LEVEL", "warn"), "log level of the JSON logs on stderr (env LOG_LEVEL)")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b stringsBuilder
			fs.SetOutput(&b)
			fs.PrintDefaults()
			return usageError{"flags of " + fs.Name() + ":\n" + b.String()}
		}
		return usageError{fmt.Sprintf("%s: %v", fs.Name(), err)}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected arguments %v", fs.Name(), fs.Args())}
	}
	return nil
}

type stringsBuilder struct{ b []byte }

func (s *stringsBuilder) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }
func (s *stringsBuilder) String() string              { return string(s.b) }
