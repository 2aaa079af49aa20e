package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/examples"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
)

// cmdDemo shows the engine end to end on one machine: the Firestore
// emulator (reused if FIRESTORE_EMULATOR_HOST is set), a local OCI
// registry seeded with the example specs as labelled images, two
// reconciles (the second one the no-write path) and the catalog.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	configPath := fs.String("config", "examples/registries.yaml", "registries file; ${SPECSYNC_DEMO_REGISTRY} is the local registry's host")
	logLevel := fs.String("log-level", envOr("LOG_LEVEL", "warn"), "log level of the JSON logs on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	project := "specsync-demo"

	if os.Getenv("FIRESTORE_EMULATOR_HOST") == "" {
		fmt.Fprintln(stdout, "== starting the Firestore emulator (takes a few seconds)")
		fsEmu, err := emulator.StartFirestore(ctx)
		if err != nil {
			return err
		}
		defer func() {
			fsEmu.Stop()
			fmt.Fprintln(stdout, "== stopped the Firestore emulator")
		}()
		os.Setenv("FIRESTORE_EMULATOR_HOST", fsEmu.Host)
		defer os.Unsetenv("FIRESTORE_EMULATOR_HOST")
	} else {
		fmt.Fprintf(stdout, "== using the Firestore emulator at %s\n", os.Getenv("FIRESTORE_EMULATOR_HOST"))
		if err := emulator.ResetFirestore(ctx, os.Getenv("FIRESTORE_EMULATOR_HOST"), project); err != nil {
			return err
		}
	}

	reg, err := emulator.StartRegistry("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer reg.Close()
	repos, err := emulator.SeedRegistry(ctx, reg.Host(), examples.Registry, examples.RegistryDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "== local OCI registry at %s with %d spec images: %v\n", reg.Host(), len(repos), repos)
	os.Setenv("SPECSYNC_DEMO_REGISTRY", reg.Host())
	defer os.Unsetenv("SPECSYNC_DEMO_REGISTRY")

	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, project, "")
	if err != nil {
		return err
	}
	defer st.Close()
	runner := &reconcile.Runner{Store: st, Logger: logging.New(stderr, *logLevel)}

	fmt.Fprintln(stdout, "\n== first reconcile: the store is empty, every spec is created")
	if err := reconcileAll(ctx, runner, cfg, "", stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\n== what the catalog now holds")
	if err := printCatalog(ctx, st, stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\n== second reconcile: nothing changed upstream, so one read and no writes")
	if err := reconcileAll(ctx, runner, cfg, "", stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	return nil
}
