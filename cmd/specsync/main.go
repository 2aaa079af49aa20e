// Command specsync runs reconciles from a shell: the same engine the
// reconcile function runs, against the Firestore named by the environment.
//
//	specsync reconcile -config registries.yaml [-registry NAME]
//	specsync catalog
//	specsync demo
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
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "specsync:", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

const usage = `usage: specsync <command> [flags]

commands:
  reconcile  reconcile the registries of a registries file into Firestore
  catalog    print the specs the catalog serves
  run        serve the local stack (every function, emulators, local OCI
             registry, push subscription) until interrupted
  demo       start the emulators and a local OCI registry, reconcile the
             example registry twice, print the catalog, stop everything

Run "specsync <command> -h" for a command's flags.`

func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{usage}
	}
	switch args[0] {
	case "reconcile":
		return cmdReconcile(ctx, args[1:], stdout, stderr)
	case "catalog":
		return cmdCatalog(ctx, args[1:], stdout, stderr)
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
