package main

// The read commands: status, catalog, specs, instances. Each prints a
// table, or with --output json the API's own JSON.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
)

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

func ago(t time.Time) string { return api.Age(time.Now(), t) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// --- status ---------------------------------------------------------------

// failingResult is what status --check calls unhealthy: a run that could
// not do its work, or one the mass-deletion guard held.
func failingResult(r api.RunResult) bool { return r.Failed() || r == api.ResultGuarded }

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var c clientFlags
	c.register(fs)
	check := fs.Bool("check", false, "exit 1 if any registry's last run failed (fetch_failed, error) or was guarded")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	a := c.client(stderr)
	ans, err := a.do(ctx, http.MethodGet, a.catalog+"/registries", authAdmin, http.StatusOK)
	if err != nil {
		return err
	}
	var body api.RegistryList
	if err := ans.decode(&body); err != nil {
		return err
	}
	// Marked specs and their instance counts come from the specs
	// themselves: a registry's status lists the kept ones only from the
	// run after the one that marked them.
	mans, err := a.do(ctx, http.MethodGet, a.catalog+"/admin/specs?state=marked", authAdmin, http.StatusOK)
	if err != nil {
		return err
	}
	var marked api.SpecList
	if err := mans.decode(&marked); err != nil {
		return err
	}
	if c.json() {
		if err := writeJSON(stdout, map[string]any{"registries": json.RawMessage(mustField(ans.body, "registries")), "marked": json.RawMessage(mustField(mans.body, "specs"))}); err != nil {
			return err
		}
	} else {
		printStatus(stdout, body.Registries, marked.Specs)
	}
	if *check {
		var bad []string
		for _, r := range body.Registries {
			if failingResult(r.LastRun.Result) {
				bad = append(bad, fmt.Sprintf("%s (%s)", r.Name, r.LastRun.Result))
			}
		}
		if len(bad) > 0 {
			return withExit(ExitFailed, "%s not healthy: %s", api.Count(len(bad), "registry", "registries"), strings.Join(bad, ", "))
		}
	}
	return nil
}

func printStatus(w io.Writer, regs []api.RegistryStatus, marked []api.SpecView) {
	if len(regs) == 0 {
		fmt.Fprintln(w, "no registry has run yet (start one with: specsync bootstrap --wait)")
		return
	}
	tw := table(w)
	// The last full run and the last event run side by side: events
	// between two bootstraps are what happened since the full run.
	fmt.Fprintln(tw, "REGISTRY\tFULL RUN\tFINISHED\tEVENT RUN\tLAST SUCCESS\tCREATED\tUPDATED\tUNCHANGED\tMARKED\tDELETED\tKEPT\tHELD BACK\tERRORS\tFIRESTORE r/w/d")
	for _, r := range regs {
		l := r.LastRun
		n := l.Counts
		errs := n.EntryErrors
		if l.Error != "" {
			errs++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d/%d/%d\n", r.Name, orDash(string(l.Result)), ago(l.FinishedAt), eventRun(r.LastTargeted), ago(r.LastSuccessAt),
			n.Created, n.Updated, n.Unchanged, n.Marked, n.Deleted, n.Kept, n.HeldBack, errs, l.Ops.Reads, l.Ops.Writes, l.Ops.Deletes)
	}
	tw.Flush()
	for _, r := range regs {
		l := r.LastRun
		var lines []string
		if l.Error != "" {
			lines = append(lines, "error: "+l.Error)
		}
		if l.Guard != "" {
			lines = append(lines, "guard: "+l.Guard)
		}
		if e := r.LastTargeted; e != nil && e.Error != "" {
			lines = append(lines, "event run error: "+e.Error)
		}
		for _, e := range l.Errors {
			lines = append(lines, fmt.Sprintf("entry %s: %s", e.Entry, e.Message))
		}
		if l.ErrorsTotal > len(l.Errors) {
			lines = append(lines, fmt.Sprintf("... and %s", api.Count(l.ErrorsTotal-len(l.Errors), "more entry error", "more entry errors")))
		}
		for _, h := range l.HeldBack {
			lines = append(lines, fmt.Sprintf("held back: %s (%s) version %s: %s", h.Name, h.SpecID, h.Digest, strings.Join(h.Blockers, "; ")))
		}
		for _, m := range marked {
			if m.Registry != r.Name {
				continue
			}
			if m.Instances > 0 {
				lines = append(lines, fmt.Sprintf("pinned: %s (%s) is marked for deletion, %s", m.Name, m.ID, stillUse(m.Instances)))
			} else {
				lines = append(lines, fmt.Sprintf("marked: %s (%s) is marked for deletion and unused: the next run deletes it", m.Name, m.ID))
			}
		}
		for _, cf := range l.Conflicts {
			lines = append(lines, fmt.Sprintf("conflict: entry %s offers %s, owned by registry %s", cf.Entry, cf.SpecID, cf.Owner))
		}
		for _, other := range sortedNames(r.ContestedBy) {
			lines = append(lines, fmt.Sprintf("contested: registry %s also offers %s", other, strings.Join(r.ContestedBy[other], ", ")))
		}
		if len(lines) > 0 {
			fmt.Fprintf(w, "\n%s:\n", r.Name)
			for _, l := range lines {
				fmt.Fprintf(w, "  %s\n", l)
			}
		}
	}
}

// eventRun is the last event run's cell: its result, when it finished
// and how many entries it read, or "-".
func eventRun(e *api.Run) string {
	if e == nil || e.Result == "" {
		return "-"
	}
	return fmt.Sprintf("%s %s (%s)", e.Result, ago(e.FinishedAt), api.Count(len(e.Entries), "entry", "entries"))
}

// --- catalog --------------------------------------------------------------

func cmdCatalog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("catalog", flag.ContinueOnError)
	var c clientFlags
	c.register(fs)
	view := fs.String("view", "", "show what a platform with this view's credential sees (asks the admin API: needs the admin credential, not the platform's)")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	a := c.client(stderr)
	// no-cache: the catalog function reads the revision for this request
	// instead of serving what a warm instance holds (up to
	// SPECSYNC_CATALOG_REFRESH old), so right after a bootstrap the
	// operator sees what it did.
	path, auth := "/v2/catalog", authBroker
	if *view != "" {
		// The view's catalog as its platform gets it, through the admin
		// API: the operator holds the admin credential, not every
		// platform's password.
		path, auth = "/admin/views/"+url.PathEscape(*view)+"/catalog", authAdmin
	}
	ans, err := a.doWith(ctx, http.MethodGet, a.catalog+path, auth, http.Header{"Cache-Control": {"no-cache"}}, http.StatusOK)
	if err != nil {
		return err
	}
	if c.json() {
		_, err := stdout.Write(ans.body) // the OSB document exactly as served
		if err == nil && (len(ans.body) == 0 || ans.body[len(ans.body)-1] != '\n') {
			_, err = io.WriteString(stdout, "\n")
		}
		return err
	}
	var cat catalog.Catalog
	if err := ans.decode(&cat); err != nil {
		return err
	}
	rev := ans.header.Get(api.RevisionHeader)
	if *view != "" {
		fmt.Fprintf(stdout, "view %s: ", *view)
	}
	fmt.Fprintf(stdout, "catalog revision %s, %s (ETag %s)\n", orDash(rev), api.Count(len(cat.Services), "service", "services"), orDash(ans.header.Get("ETag")))
	tw := table(stdout)
	fmt.Fprintln(tw, "SERVICE\tID\tBINDABLE\tPLANS\tTAGS")
	for _, s := range cat.Services {
		plans := make([]string, len(s.Plans))
		for i, p := range s.Plans {
			plans[i] = p.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\n", s.Name, s.ID, s.Bindable, strings.Join(plans, ","), orDash(strings.Join(s.Tags, ",")))
	}
	return tw.Flush()
}

// --- specs and instances --------------------------------------------------

type filterFlags struct {
	registry string
	marked   bool
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.registry, "registry", "", "only those of this registry")
	fs.BoolVar(&f.marked, "marked", false, "only specs marked for deletion")
}

func (f *filterFlags) query(extra url.Values) string {
	q := url.Values{}
	if f.registry != "" {
		q.Set("registry", f.registry)
	}
	if f.marked {
		q.Set("marked", "true")
	}
	for k, v := range extra {
		q[k] = v
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func cmdSpecs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("specs", flag.ContinueOnError)
	var c clientFlags
	c.register(fs)
	var f filterFlags
	f.register(fs)
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	a := c.client(stderr)
	ans, err := a.do(ctx, http.MethodGet, a.catalog+"/admin/specs"+f.query(nil), authAdmin, http.StatusOK)
	if err != nil {
		return err
	}
	if c.json() {
		return printJSON(stdout, ans.body)
	}
	var body api.SpecList
	if err := ans.decode(&body); err != nil {
		return err
	}
	tw := table(stdout)
	fmt.Fprintln(tw, "NAME\tID\tREGISTRY\tSTATE\tPLANS\tINSTANCES\tGENERATION\tNOTE")
	for _, s := range body.Specs {
		plans := make([]string, len(s.Plans))
		for i, p := range s.Plans {
			plans[i] = p.Name
		}
		var note []string
		if s.MarkedAt != nil {
			note = append(note, "marked "+ago(*s.MarkedAt))
		}
		if s.EntryError != "" {
			note = append(note, "entry error: "+s.EntryError)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", s.Name, s.ID, s.Registry, s.State, strings.Join(plans, ","), s.Instances, s.Generation, orDash(strings.Join(note, "; ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, api.Count(len(body.Specs), "spec", "specs"))
	return nil
}

func cmdInstances(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("instances", flag.ContinueOnError)
	var c clientFlags
	c.register(fs)
	var f filterFlags
	f.register(fs)
	service := fs.String("service", "", "only instances of this service (spec) id")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	extra := url.Values{}
	if *service != "" {
		extra.Set("service_id", *service)
	}
	a := c.client(stderr)
	ans, err := a.do(ctx, http.MethodGet, a.catalog+"/admin/instances"+f.query(extra), authAdmin, http.StatusOK)
	if err != nil {
		return err
	}
	if c.json() {
		return printJSON(stdout, ans.body)
	}
	var body api.InstanceList
	if err := ans.decode(&body); err != nil {
		return err
	}
	tw := table(stdout)
	fmt.Fprintln(tw, "INSTANCE\tSERVICE\tPLAN\tREGISTRY\tSERVICE STATE\tPLATFORM\tCREATED")
	for _, in := range body.Instances {
		plan := in.PlanName
		if plan == "" {
			plan = in.PlanID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.ServiceName, plan, in.Registry, in.ServiceState, orDash(in.Platform), ago(in.CreatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, api.Count(len(body.Instances), "instance", "instances"))
	return nil
}

// mustField returns one top-level field of a JSON object ("null" if absent).
func mustField(body []byte, key string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m[key] == nil {
		return []byte("null")
	}
	return m[key]
}
