package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/api"
)

func cmdBootstrap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	var c clientFlags
	c.register(fs)
	wait := fs.Bool("wait", false, "follow the bootstrap until it ends; exit 1 if it failed")
	dryRun := fs.Bool("dry-run", false, "plan every registry and print what a real bootstrap would change, as a diff (implies --wait); writes nothing")
	poll := fs.Duration("poll-interval", 0, "time between polls (default: 100ms, doubling up to the server's Retry-After, at most 5s)")
	waitTimeout := fs.Duration("wait-timeout", 20*time.Minute, "give up waiting after this long (exit 5)")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	a := c.client(stderr)
	u := a.bootstrap + "/bootstrap"
	if *dryRun {
		u += "?dry_run=true"
	}
	ans, err := a.do(ctx, http.MethodPost, u, authAdmin, http.StatusAccepted)
	if err != nil {
		return err
	}
	var start api.BootstrapAccepted
	if err := ans.decode(&start); err != nil {
		return err
	}
	if !*wait && !*dryRun {
		if c.json() {
			return printJSON(stdout, ans.body)
		}
		how := "started"
		if start.Coalesced {
			how = "already in progress (joined it)"
		}
		fmt.Fprintf(stdout, "bootstrap %s %s\n", start.Operation, how)
		fmt.Fprintf(stdout, "follow it with: specsync bootstrap --wait, or GET %s/bootstrap/last_operation?operation=%s\n", a.bootstrap, start.Operation)
		return nil
	}
	if !c.json() {
		kind := "bootstrap"
		if start.DryRun {
			kind = "dry run"
		}
		joined := ""
		if start.Coalesced {
			joined = " (joined the one in progress)"
		}
		fmt.Fprintf(stdout, "%s %s%s\n", kind, start.Operation, joined)
	}
	wctx, cancel := context.WithTimeout(ctx, *waitTimeout)
	defer cancel()
	op, raw, err := follow(wctx, a, start.Operation, *poll, c.json(), stdout)
	if err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			return withExit(ExitTimeout, "bootstrap %s still in progress after %s", start.Operation, *waitTimeout)
		}
		return err
	}
	if c.json() {
		if err := printJSON(stdout, raw); err != nil {
			return err
		}
	} else {
		if op.DryRun {
			printDryRunDiff(stdout, op)
		}
		fmt.Fprintf(stdout, "%s: %s\n", op.State, op.Description)
	}
	if op.CatalogRevision != nil {
		// Read-your-writes: the catalog, asked to check its revision now,
		// must already show what the bootstrap did.
		if err := checkCatalogRevision(ctx, a, *op.CatalogRevision, c.json(), stdout, stderr); err != nil {
			return err
		}
	}
	if op.State != api.Succeeded {
		var why []string
		for _, name := range sortedNames(op.Registries) {
			r := op.Registries[name]
			if r.State != api.Succeeded {
				why = append(why, fmt.Sprintf("%s (%s: %s)", name, r.Result, r.Error))
			}
		}
		if len(why) == 0 {
			why = append(why, op.Description)
		}
		return withExit(ExitFailed, "bootstrap %s failed: %s", op.Operation, strings.Join(why, "; "))
	}
	return nil
}

func sortedNames[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// follow polls last_operation until the operation ends, printing each
// registry's result as it lands and the progress (a bar on a terminal,
// plain lines otherwise; nothing in JSON mode, which prints the end only).
func follow(ctx context.Context, a *client, id string, poll time.Duration, quiet bool, stdout io.Writer) (*api.LastOperation, []byte, error) {
	u := a.bootstrap + "/bootstrap/last_operation?operation=" + url.QueryEscape(id)
	seen := map[string]bool{}
	bar := isTerminal(stdout) && !quiet
	lastDone := -1
	committing := false
	polls := 0
	for {
		ans, err := a.do(ctx, http.MethodGet, u, authAdmin, http.StatusOK)
		if err != nil {
			return nil, nil, err
		}
		var op api.LastOperation
		if err := ans.decode(&op); err != nil {
			return nil, nil, err
		}
		if !quiet {
			if bar && lastDone >= 0 {
				fmt.Fprint(stdout, "\r\033[K") // clear the bar before printing results above it
			}
			for _, name := range sortedNames(op.Registries) {
				if seen[name] {
					continue
				}
				seen[name] = true
				fmt.Fprintln(stdout, resultLine(name, op.Registries[name]))
			}
			done, total := len(op.Registries), op.Total()
			switch {
			case bar:
				if op.State == api.InProgress {
					fmt.Fprint(stdout, progressBar(done, total, op.Pending))
				}
			case done != lastDone:
				fmt.Fprintf(stdout, "progress: %d/%s reported\n", done, api.Count(total, "registry", "registries"))
			}
			lastDone = done
			if op.Committing != nil && !committing {
				committing = true
				if bar {
					fmt.Fprint(stdout, "\r\033[K")
				}
				fmt.Fprintf(stdout, "committing: %s\n", op.Description)
			}
		}
		if op.State != api.InProgress {
			return &op, ans.body, nil
		}
		wait := poll
		if wait <= 0 {
			retryAfter := time.Duration(0)
			if s, err := strconv.Atoi(ans.header.Get("Retry-After")); err == nil && s > 0 {
				retryAfter = time.Duration(s) * time.Second
			}
			wait = pollDelay(polls, retryAfter)
		}
		polls++
		select {
		case <-ctx.Done():
			if bar {
				fmt.Fprintln(stdout)
			}
			return nil, nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// Polling of --wait without --poll-interval: short first polls, since
// most bootstraps end within a second or two (the server's Retry-After,
// sized for the slowest, would keep the operator waiting 5 s for a 0.6 s
// operation), then the server's pace. Each poll is one GET of
// last_operation: one Firestore document read.
const (
	firstPoll   = 100 * time.Millisecond
	defaultPoll = 2 * time.Second // the pace when the server sends no Retry-After
	maxPoll     = 5 * time.Second
)

// pollDelay is the wait before poll n+1 (n from 0): firstPoll doubling
// each time, up to the server's Retry-After (defaultPoll without one),
// never more than maxPoll.
func pollDelay(n int, retryAfter time.Duration) time.Duration {
	ceiling := defaultPoll
	if retryAfter > 0 {
		ceiling = retryAfter
	}
	ceiling = min(ceiling, maxPoll)
	d := firstPoll
	for i := 0; i < n && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

// checkCatalogRevision reads the catalog with Cache-Control: no-cache,
// which asks the catalog function to check the current revision instead
// of serving what a warm instance holds, and says whether the revision it
// serves (X-Catalog-Revision) is at least the bootstrap's. A catalog
// behind it is reported, not an error: the bootstrap itself succeeded,
// and the catalog shows it within its refresh window
// (SPECSYNC_CATALOG_REFRESH).
func checkCatalogRevision(ctx context.Context, a *client, want int64, quiet bool, stdout, stderr io.Writer) error {
	fresh := *a
	fresh.http = &http.Client{Timeout: a.http.Timeout, Transport: noCache{a.http.Transport}}
	ans, err := fresh.do(ctx, http.MethodGet, a.catalog+"/v2/catalog", authBroker, http.StatusOK)
	if err != nil {
		return err
	}
	h := ans.header.Get(api.RevisionHeader)
	got, perr := strconv.ParseInt(h, 10, 64)
	switch {
	case perr != nil:
		fmt.Fprintf(stderr, "specsync: warning: GET /v2/catalog has no %s header (%q): cannot check that it reflects the bootstrap (catalog revision %d)\n", api.RevisionHeader, h, want)
	case got < want:
		fmt.Fprintf(stderr, "specsync: warning: the catalog serves revision %d, older than the bootstrap's %d: it does not show the bootstrap yet (this catalog may not honour Cache-Control: no-cache; it catches up within SPECSYNC_CATALOG_REFRESH)\n", got, want)
	case !quiet:
		fmt.Fprintf(stdout, "catalog revision %d: the catalog serves revision %d, which reflects the bootstrap\n", want, got)
	}
	return nil
}

// noCache adds Cache-Control: no-cache to every request.
type noCache struct{ next http.RoundTripper }

func (n noCache) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Cache-Control", "no-cache")
	next := n.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

func progressBar(done, total int, pending []string) string {
	const width = 30
	filled := 0
	if total > 0 {
		filled = done * width / total
	}
	p := ""
	if len(pending) > 0 {
		p = "  waiting for " + strings.Join(pending, ", ")
		if len(p) > 60 {
			p = p[:57] + "..."
		}
	}
	return fmt.Sprintf("[%s%s] %d/%s%s", strings.Repeat("#", filled), strings.Repeat("-", width-filled), done, api.Count(total, "registry", "registries"), p)
}

func resultLine(name string, r api.RegistryResult) string {
	c := r.Counts
	line := fmt.Sprintf("  %-20s %-9s %-13s", name, r.State, r.Result)
	if r.Result != api.ResultUnchanged {
		line += fmt.Sprintf(" +%d ~%d -%d", c.Created+c.Unmarked, c.Updated, c.Marked+c.Deleted)
	}
	line += fmt.Sprintf("  firestore %dr/%dw/%dd", r.Firestore.Reads, r.Firestore.Writes, r.Firestore.Deletes)
	if r.Error != "" {
		line += "  error: " + r.Error
	}
	return line
}

// printDryRunDiff prints a dry run's plan per registry as a diff of the
// catalog: + enters it, ~ changes in it, - leaves it.
func printDryRunDiff(w io.Writer, op *api.LastOperation) {
	fmt.Fprintf(w, "--- catalog now\n+++ catalog after a real bootstrap (dry run %s)\n", op.Operation)
	for _, name := range sortedNames(op.Registries) {
		r := op.Registries[name]
		fmt.Fprintf(w, "@@ registry %s @@\n", name)
		if r.State != api.Succeeded {
			fmt.Fprintf(w, "! %s: %s (a real run would change nothing for this registry)\n", r.Result, r.Error)
			continue
		}
		c := r.Counts
		// By name when the server reports the plan (capped), then the
		// counts of what the names do not cover.
		named := map[api.PlannedKind]int{}
		for _, pc := range r.Planned {
			named[pc.Change]++
			sign, what := diffSign(pc.Change)
			line := fmt.Sprintf("%s %s (%s)", sign, pc.Name, pc.SpecID)
			if pc.Entry != "" && pc.Entry != pc.Name {
				line += " entry " + pc.Entry
			}
			line += ": " + what
			if pc.Detail != "" && pc.Change != api.PlannedUpdate {
				line += ": " + pc.Detail
			}
			fmt.Fprintln(w, line)
		}
		c.Created -= named[api.PlannedCreate]
		c.Unmarked -= named[api.PlannedUnmark]
		c.Updated -= named[api.PlannedUpdate]
		c.Repaired -= named[api.PlannedRepair]
		c.Marked -= named[api.PlannedMark]
		c.Deleted -= named[api.PlannedDelete]
		c.Kept -= named[api.PlannedKeep]
		c.HeldBack -= named[api.PlannedHoldBack]
		lines := []struct {
			sign      string
			n         int
			one, many string
		}{
			{"+", c.Created, "new spec would be created", "new specs would be created"},
			{"+", c.Unmarked, "marked spec would be offered again (unmarked)", "marked specs would be offered again (unmarked)"},
			{"~", c.Updated, "spec would be updated to a new version", "specs would be updated to a new version"},
			{"~", c.Repaired, "spec would have its entry error cleared", "specs would have their entry error cleared"},
			{"-", c.Marked, "spec would be marked for deletion (leaves the catalog)", "specs would be marked for deletion (leave the catalog)"},
			{"-", c.Deleted, "marked spec would be deleted (no instance uses it)", "marked specs would be deleted (no instance uses them)"},
			{" ", c.Kept, "marked spec would be kept: instances still use it", "marked specs would be kept: instances still use them"},
			{"!", c.HeldBack, "new version would be held back: it strands instances", "new versions would be held back: they strand instances"},
			{"!", c.EntryErrors - len(r.EntryErrors), "more entry does not parse or validate (its last good version stays)", "more entries do not parse or validate (their last good version stays)"},
			{"!", c.Conflicts, "spec id is owned by another registry", "spec ids are owned by another registry"},
		}
		// Each broken entry by name, with why: the operator fixes those.
		for _, e := range r.EntryErrors {
			line := "! entry " + e.Entry
			if e.Ref != "" && e.Ref != e.Entry {
				line += " (" + e.Ref + ")"
			}
			fmt.Fprintf(w, "%s does not parse or validate (its last good version stays): %s\n", line, e.Message)
		}
		any := len(r.Planned) > 0 || len(r.EntryErrors) > 0
		for _, l := range lines {
			if l.n > 0 {
				fmt.Fprintf(w, "%s %s\n", l.sign, api.Count(l.n, l.one, l.many))
				any = true
			}
		}
		if r.Error != "" {
			fmt.Fprintf(w, "! %s\n", r.Error)
		}
		if !any {
			fmt.Fprintf(w, "  no change (%s unchanged)\n", api.Count(c.Unchanged, "spec", "specs"))
		}
	}
}

// diffSign is how a planned change shows in the diff.
func diffSign(change api.PlannedKind) (string, string) {
	switch change {
	case api.PlannedCreate:
		return "+", "would be created"
	case api.PlannedUnmark:
		return "+", "would be offered again (unmarked)"
	case api.PlannedUpdate:
		return "~", "would be updated to a new version"
	case api.PlannedRepair:
		return "~", "would have its entry error cleared"
	case api.PlannedMark:
		return "-", "would be marked for deletion (leaves the catalog)"
	case api.PlannedDelete:
		return "-", "would be deleted (no instance uses it)"
	case api.PlannedKeep:
		return " ", "stays marked: instances still use it"
	case api.PlannedHoldBack:
		return "!", "new version would be held back"
	default:
		return "?", string(change)
	}
}
