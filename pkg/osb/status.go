package osb

// GET /status: a read-only HTML page for operators, rendered on the server
// with html/template (no build step, no script needed; the one script only
// reloads the page). It shows registry health, the last bootstraps with
// their per-registry results, specs marked for deletion and the instances
// that pin them, held-back versions, and a chart of the Firestore
// operations each bootstrap cost.

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

//go:embed templates/status.html
var statusFS embed.FS

var statusTemplate = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"short":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"join":    strings.Join,
}).ParseFS(statusFS, "templates/status.html"))

// Registry health on the status page.
const (
	HealthOK      = "ok"
	HealthFailing = "failing"
	HealthGuarded = "guarded"
	HealthUnknown = "unknown" // never ran
)

type registryRow struct {
	Name        string
	Health      string
	Result      api.RunResult
	FinishedAt  time.Time
	Age         string
	Counts      api.RunCounts
	Ops         api.Counts
	Error       string
	Guard       string
	EntryErrors []api.EntryError
	ErrorsTotal int
	Marked      int
	// LastBootstrap is this registry's result in the newest real
	// (not dry-run) bootstrap that included it.
	LastBootstrap api.RunResult
	LastError     string
}

type opResultRow struct {
	Registry string
	State    api.OperationState
	Result   api.RunResult
	Error    string
	Ops      api.Counts
}

type opRow struct {
	ID          string
	State       api.OperationState
	DryRun      bool
	Description string
	CreatedAt   time.Time
	Age         string
	Results     []opResultRow
	Pending     []string
	Total       api.Counts
}

type markedRow struct {
	Spec      api.SpecView
	Instances []api.InstanceView
}

type heldRow struct {
	Registry string
	Spec     api.HeldBackSpec
}

type statusData struct {
	Generated  time.Time
	Revision   int64
	Registries []registryRow
	Failing    int
	Operations []opRow
	Marked     []markedRow
	HeldBack   []heldRow
	Chart      chart
	Problems   []string
	Dashboard  string // Config.DashboardURL
	// CatalogTooLarge is Rendered.Problem of the catalog this instance
	// serves: "" when it fits.
	CatalogTooLarge string
}

// health says how a registry is doing: failing when its last recorded run
// failed or its newest bootstrap result did (a run that changes nothing is
// not recorded on the registry, the bootstrap result is).
func health(st api.RegistryStatus, lastBootstrapState api.OperationState) string {
	switch {
	case st.LastRun.Result.Failed() || lastBootstrapState == api.Failed:
		return HealthFailing
	case st.LastRun.Result == api.ResultGuarded:
		return HealthGuarded
	case st.LastRun.Result == "" && lastBootstrapState == "":
		return HealthUnknown
	default:
		return HealthOK
	}
}

func (b *Broker) statusData(r *http.Request) statusData {
	ctx := r.Context()
	now := time.Now().UTC()
	d := statusData{Generated: now, Dashboard: b.cfg.DashboardURL}
	problem := func(what string, err error) { d.Problems = append(d.Problems, fmt.Sprintf("%s: %v", what, err)) }

	if rev, err := b.store.Revision(ctx); err != nil {
		problem("catalog revision", err)
	} else {
		d.Revision = rev
	}
	// The catalog as this instance serves it (0 reads when warm): a form
	// too large to serve is shown, not only logged.
	if cat, _, err := b.Cache.Get(ctx); err != nil {
		problem("catalog", err)
	} else {
		d.CatalogTooLarge = cat.Problem()
	}
	ops, err := b.store.RecentOperations(ctx, defaultOperations)
	if err != nil {
		problem("recent bootstraps", err)
	}
	latest := map[string]api.RegistryResult{} // newest real result per registry
	for _, op := range ops {
		row := opRow{ID: op.ID, State: op.State, DryRun: op.DryRun, Description: op.Description, CreatedAt: op.CreatedAt, Age: api.Age(now, op.CreatedAt), Total: op.Firestore()}
		for _, name := range op.Registries {
			res, ok := op.Results[name]
			if !ok {
				row.Pending = append(row.Pending, name)
				continue
			}
			row.Results = append(row.Results, opResultRow{Registry: name, State: res.State, Result: res.Result, Error: res.Error, Ops: res.Firestore})
			if _, seen := latest[name]; !seen && !op.DryRun {
				latest[name] = res
			}
		}
		d.Operations = append(d.Operations, row)
	}
	d.Chart = opsChart(ops)

	statuses, err := b.store.RegistryStatuses(ctx)
	if err != nil {
		problem("registry statuses", err)
	}
	seen := map[string]bool{}
	for _, st := range statuses {
		seen[st.Name] = true
		lr := st.LastRun
		row := registryRow{Name: st.Name, Result: lr.Result, FinishedAt: lr.FinishedAt, Age: api.Age(now, lr.FinishedAt),
			Counts: lr.Counts, Ops: lr.Ops, Error: lr.Error, Guard: lr.Guard, EntryErrors: lr.Errors, ErrorsTotal: lr.ErrorsTotal, Marked: st.Marked}
		if res, ok := latest[st.Name]; ok {
			row.LastBootstrap, row.LastError = res.Result, res.Error
		}
		row.Health = health(st, latest[st.Name].State)
		d.Registries = append(d.Registries, row)
		for _, hb := range lr.HeldBack {
			d.HeldBack = append(d.HeldBack, heldRow{Registry: st.Name, Spec: hb})
		}
	}
	// A registry that never recorded a run but reported to a bootstrap
	// (its first fetch failed, say) is shown from that result.
	for name, res := range latest {
		if seen[name] {
			continue
		}
		row := registryRow{Name: name, Result: res.Result, FinishedAt: res.ReportedAt, Age: api.Age(now, res.ReportedAt), Counts: res.Counts, Ops: res.Firestore,
			Error: res.Error, LastBootstrap: res.Result, LastError: res.Error}
		row.Health = health(api.RegistryStatus{}, res.State)
		d.Registries = append(d.Registries, row)
	}
	sort.Slice(d.Registries, func(i, j int) bool { return d.Registries[i].Name < d.Registries[j].Name })
	for _, row := range d.Registries {
		if row.Health == HealthFailing {
			d.Failing++
		}
	}

	marked, err := b.store.ListSpecs(ctx, store.SpecFilter{State: api.SpecMarked})
	if err != nil {
		problem("marked specs", err)
	}
	for _, rec := range marked {
		insts, err := b.instancesOf(ctx, []store.SpecRecord{rec})
		if err != nil {
			problem("instances of "+rec.ID, err)
		}
		d.Marked = append(d.Marked, markedRow{Spec: specView(rec), Instances: insts})
	}
	return d
}

func (b *Broker) statusPage(w http.ResponseWriter, r *http.Request) {
	for k := range r.URL.Query() {
		if k != "refresh" {
			WriteError(w, http.StatusBadRequest, "BadRequest", "unknown query parameter %q", k)
			return
		}
	}
	d := b.statusData(r)
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, d); err != nil {
		b.cfg.Logger.Error("status page did not render", "error", err)
		WriteError(w, http.StatusInternalServerError, "InternalError", "the status page did not render")
		return
	}
	for _, p := range d.Problems {
		b.cfg.Logger.Warn("status page is incomplete", "problem", p)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}
