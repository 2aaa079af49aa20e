// Command specsync-local holds the local tools: the local stack (every
// function, the emulators, a local OCI registry and the push subscription
// in one process), the demo, and reconciles run straight against a
// Firestore. They link the functions, the emulators and the cloud SDKs,
// which is why they are not part of the operator's specsync command.
//
//	specsync-local run                  (make run)
//	specsync-local demo                 (make demo)
//	specsync-local push FILE...         (push a spec to make run's registry)
//	specsync-local reconcile -config registries.yaml [-registry NAME]
//	specsync-local catalog
//
// Exit codes: 0 ok, 1 failed, 2 usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
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
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "specsync-local:", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

const usage = `usage: specsync-local <command> [flags]

The local tools (the operator's commands are specsync's):
  run        serve the local stack (every function, emulators, local OCI
             registry, push subscription) until interrupted; make run
  demo       start the local stack, bootstrap the example registry twice,
             print the catalog and the change feed, stop everything; make demo
  push       push spec files to the local stack's OCI registry as
             specs/<base name>:latest, as an upstream push would
  reconcile  reconcile the registries of a registries file straight into a
             Firestore (GOOGLE_CLOUD_PROJECT, FIRESTORE_EMULATOR_HOST)
  catalog    print the specs a Firestore's catalog serves

Run "specsync-local <command> -h" for a command's flags.`

func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{usage}
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(ctx, args[1:], stdout, stderr)
	case "push":
		return cmdPush(ctx, args[1:], stdout, stderr)
	case "reconcile":
		return cmdReconcile(ctx, args[1:], stdout, stderr)
	case "catalog":
		return cmdCatalog(ctx, args[1:], stdout, stderr)
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

// parseFlags parses a command's flags; it takes no positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
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
