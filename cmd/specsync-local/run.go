package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/specsync/specsync/emulator/stack"
	"github.com/specsync/specsync/pkg/logging"
)

// cmdRun serves the local stack until interrupted.
func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	addr := fs.String("addr", "", "listen address (default 127.0.0.1:$PORT, PORT default 8080)")
	regAddr := fs.String("registry-addr", envOr("SPECSYNC_LOCAL_REGISTRY", DefaultLocalRegistry), "listen address of the local OCI registry, where specsync-local push pushes (env SPECSYNC_LOCAL_REGISTRY; 127.0.0.1:0 picks a free port)")
	interval := fs.Duration("bootstrap-interval", envDuration("SPECSYNC_BOOTSTRAP_INTERVAL"), "bootstrap periodically, standing in for Cloud Scheduler (env SPECSYNC_BOOTSTRAP_INTERVAL; 0 = never)")
	prune := fs.Duration("prune-interval", envDuration("SPECSYNC_PRUNE_INTERVAL"), "delete expired change records this often, as Firestore TTL does in production (env SPECSYNC_PRUNE_INTERVAL; default 1m)")
	specs := fs.String("specs", os.Getenv("SPECSYNC_LOCAL_SPECS"), "directory of spec files the local OCI registry serves, re-read before every bootstrap (env SPECSYNC_LOCAL_SPECS; default examples/registry when run from the repository, else the examples built in)")
	logLevel := fs.String("log-level", envOr("LOG_LEVEL", "info"), "log level (env LOG_LEVEL)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log := logging.New(stderr, *logLevel)
	// Read before Start, which sets the laptop credentials where none is.
	given := givenCredentials(os.Getenv)
	s, err := stack.Start(ctx, stack.Options{Addr: *addr, RegistryAddr: *regAddr, SpecsDir: *specs, BootstrapInterval: *interval, PruneInterval: *prune, Logger: log})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(stdout, "specsync local stack on %s (project %s, OCI registry %s)\n", s.URL, s.Project, s.Registry)
	fmt.Fprintf(stdout, "  the OCI registry serves the spec files of %s, re-read before every bootstrap: edit one, bootstrap, and that is the change\n", s.SpecsFrom)
	fmt.Fprintf(stdout, "  POST %s/bootstrap               (Authorization: Bearer $SPECSYNC_ADMIN_TOKEN)\n", s.URL)
	fmt.Fprintf(stdout, "  GET  %s/bootstrap/last_operation?operation=ID\n", s.URL)
	fmt.Fprintf(stdout, "  GET  %s/v2/catalog              (basic auth $SPECSYNC_BROKER_USERNAME:$SPECSYNC_BROKER_PASSWORD, X-Broker-API-Version: 2.17)\n", s.URL)
	fmt.Fprintf(stdout, "  GET  %s/v2/catalog/changes?since=REVISION&wait=30s  (broker auth; the change feed)\n", s.URL)
	fmt.Fprintf(stdout, "  GET  %s/registries              (admin)\n", s.URL)
	fmt.Fprintf(stdout, "  GET  %s/status                  (admin; in a browser: any user name, the admin token as password)\n", s.URL)
	fmt.Fprintf(stdout, "  GET  %s/admin/{specs,instances,operations}  (admin; what the specsync CLI reads)\n", s.URL)
	if len(s.Hooks) > 0 {
		fmt.Fprintf(stdout, "  push a spec upstream (the registry notifies the webhook of %s; no bootstrap needed):\n", strings.Join(s.Hooks, ", "))
	} else {
		fmt.Fprintln(stdout, "  push a spec upstream (no registry has a webhook on this registry: bootstrap after it):")
	}
	fmt.Fprintf(stdout, "    go run ./cmd/specsync-local push -registry %s examples/registry/redis.yaml\n", s.Registry)
	if u, err := url.Parse(s.PushURL); err == nil {
		fmt.Fprintf(stdout, "  Pub/Sub pushes to the reconcile function on http://%s (loopback only, behind a token of its own)\n", u.Host)
	}
	fmt.Fprintln(stdout, "drive it with the specsync CLI from another shell; paste:")
	fmt.Fprintln(stdout, "  "+exportLine(s, given))
	fmt.Fprintln(stdout, "ready; interrupt to stop")
	err = s.Wait(ctx)
	fmt.Fprintln(stdout, "stopping")
	return err
}

func envDuration(key string) time.Duration {
	d, _ := time.ParseDuration(envOr(key, "0s"))
	return d
}

// givenCredentials says where each credential of the stack comes from
// when the user gave it (in words: "" when the stack sets its own laptop
// value). Read before stack.Start, which sets those values.
type givenCreds struct{ admin, broker string }

func givenCredentials(getenv func(string) string) givenCreds {
	var g givenCreds
	switch {
	case getenv("SPECSYNC_ADMIN_TOKEN") != "":
		g.admin = "SPECSYNC_ADMIN_TOKEN: yours, as you set it"
	case getenv("SPECSYNC_ADMIN_TOKEN_FILE") != "":
		g.admin = "SPECSYNC_ADMIN_TOKEN: the token in the file SPECSYNC_ADMIN_TOKEN_FILE names"
	case getenv("SPECSYNC_ADMIN_TOKEN_SHA256") != "":
		g.admin = "SPECSYNC_ADMIN_TOKEN: the token whose hash SPECSYNC_ADMIN_TOKEN_SHA256 holds"
	}
	switch {
	case getenv("SPECSYNC_BROKER_VIEWS") != "":
		g.broker = "SPECSYNC_BROKER_USERNAME and SPECSYNC_BROKER_PASSWORD: those of a view of SPECSYNC_BROKER_VIEWS"
	case getenv("SPECSYNC_BROKER_PASSWORD") != "":
		g.broker = "SPECSYNC_BROKER_PASSWORD: yours, as you set it"
	case getenv("SPECSYNC_BROKER_PASSWORD_SHA256") != "":
		g.broker = "SPECSYNC_BROKER_PASSWORD: the password whose hash SPECSYNC_BROKER_PASSWORD_SHA256 holds"
	}
	return g
}

// exportLine is the shell line that points the specsync CLI at the stack.
// It carries a credential only when the stack set it (the laptop
// defaults): one the user gave is theirs, and the banner is captured in
// logs, so the line leaves it out and its comment says where it comes
// from. Pasted where the user's own are exported, it drives the CLI.
func exportLine(s *stack.Stack, given givenCreds) string {
	vars := []string{"SPECSYNC_URL=" + shellQuote(s.URL)}
	var from []string
	if given.admin == "" {
		vars = append(vars, "SPECSYNC_ADMIN_TOKEN="+shellQuote(s.AdminToken))
	} else {
		from = append(from, given.admin)
	}
	if s.BrokerUser != "" {
		vars = append(vars, "SPECSYNC_BROKER_USERNAME="+shellQuote(s.BrokerUser))
	}
	if given.broker == "" {
		vars = append(vars, "SPECSYNC_BROKER_PASSWORD="+shellQuote(s.BrokerPass))
	} else {
		from = append(from, given.broker)
	}
	line := "export " + strings.Join(vars, " ")
	if len(from) > 0 {
		line += "  # " + strings.Join(from, "; ")
	}
	return line
}

// shellQuote is v as one POSIX shell word: bare when only safe
// characters, else single-quoted.
func shellQuote(v string) string {
	safe := v != ""
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
