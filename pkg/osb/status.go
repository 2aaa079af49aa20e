package osb

// GET /status: a read-only HTML page for operators, rendered on the server
// with html/template (no build step, no script needed; the one script only
// reloads the page). It shows registry health (with each registry's
// source, last success and last duration, and the entries that do not
// parse), a legend for every count, the last bootstraps with their
// per-registry results, specs marked for deletion and the instances that
// pin them, held-back versions, the catalog's services and plans as a
// platform sees them, and a chart of the Firestore operations each
// bootstrap cost, its numbers written on the bars. Registries, specs,
// instances and bootstraps link to one another by anchor (registry-NAME,
// service-ID, instance-ID, bootstrap-ID).

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

//go:embed templates/status.html
var statusFS embed.FS

var statusTemplate = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"short":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"join":    strings.Join,
	"ms":      durationMS,
	"parts":   func(b bar) []rect { return []rect{b.Reads, b.Writes, b.Deletes} },
}).ParseFS(statusFS, "templates/status.html"))

// Registry health on the status page.
const (
	HealthOK      = "ok"
	HealthFailing = "failing"
	HealthGuarded = "guarded"
	// HealthDegraded: the registry was read, but some of its entries do
	// not parse or validate (each keeps its last good version, or never
	// reached the catalog).
	HealthDegraded = "degraded"
	HealthUnknown  = "unknown" // never ran
)

// maxServices bounds the catalog section: a catalog of thousands of
// services is read through GET /v2/catalog or `specsync catalog`.
const maxServices = 500

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
	EntryErrors []entryErrorRow
	ErrorsTotal int
	// NeverReached counts the entry errors shown whose entry has no
	// version in the catalog.
	NeverReached int
	// Source is where the registry is read (the newest run's record).
	Source *api.Source
	// LastSuccess is the newest run that ended well (a bootstrap result
	// or the recorded run), LastDuration the newest run's duration.
	LastSuccess    time.Time
	LastSuccessAge string
	LastDuration   int64
	HasDuration    bool // LastDuration is known (0 ms is a duration)
	// LastOperation is the newest real bootstrap that included it.
	LastOperation string
	Marked        int
	// LastBootstrap is this registry's result in the newest real
	// (not dry-run) bootstrap that included it.
	LastBootstrap api.RunResult
	LastError     string
	// EventRun is its last event (targeted) run, shown beside its last
	// full run: what its webhooks brought since the bootstrap.
	EventRun *eventRunRow
}

// eventRunRow is a registry's last event run.
type eventRunRow struct {
	Result     api.RunResult
	FinishedAt time.Time
	Age        string
	Entries    int
	Error      string
}

// entryErrorRow is an entry that does not parse or validate, and what
// the catalog has of it: its last good version (InCatalog, SpecID), or
// nothing (it never reached the catalog, or another registry owns its
// id: Owner).
type entryErrorRow struct {
	api.EntryError
	InCatalog bool
	Owner     string
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

// serviceRow is a service of the catalog as platforms get it, with what
// the page knows of it elsewhere (a held-back version, an entry error).
type serviceRow struct {
	ID, Name, Description string
	Plans                 []planRow
	HeldBack              bool
	EntryError            string // the registry whose entry fails
	// SignedBy and SignedDigest are who signed the version served, and
	// its digest, from metadata.provenance: empty, it is unverified.
	SignedBy, SignedDigest string
}

type planRow struct {
	ID, Name string
	Free     bool
}

type statusData struct {
	Generated  time.Time
	Revision   int64
	Registries []registryRow
	Failing    int
	Degraded   int
	// HasRow says which registries have a row to link to (one only in
	// a dry run, or pending in its first bootstrap, has none).
	HasRow map[string]bool
	// Services are the catalog's (at most maxServices of ServicesTotal).
	Services      []serviceRow
	ServicesTotal int
	CatalogRead   bool
	Operations    []opRow
	Marked        []markedRow
	HeldBack      []heldRow
	Chart         chart
	Problems      []string
	// Views are the broker's credentials as catalog views (views.go).
	Views     []api.ViewInfo
	Dashboard string // Config.DashboardURL
	// CatalogTooLarge is Rendered.Problem of the catalog this instance
	// serves: "" when it fits.
	CatalogTooLarge string
}

// health says how a registry is doing: failing when its last recorded run
// failed or its newest bootstrap result did (a run that changes nothing is
// not recorded on the registry, the bootstrap result is); degraded when
// it was read but entries of it do not parse or validate (the recorded
// run's errors stand until a run reads a different listing).
func health(st api.RegistryStatus, lastBootstrapState api.OperationState) string {
	switch {
	case st.LastRun.Result.Failed() || lastBootstrapState == api.Failed:
		return HealthFailing
	case st.LastRun.Result == api.ResultGuarded:
		return HealthGuarded
	case st.LastRun.ErrorsTotal > 0 || len(st.LastRun.Errors) > 0:
		return HealthDegraded
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
	cat, _, catErr := b.Cache.Get(ctx)
	if catErr != nil {
		problem("catalog", catErr)
	} else {
		d.CatalogTooLarge = cat.Problem()
	}
	ops, err := b.store.RecentOperations(ctx, defaultOperations)
	if err != nil {
		problem("recent bootstraps", err)
	}
	latest := map[string]api.RegistryResult{} // newest real result per registry
	latestOp := map[string]string{}           // and the bootstrap it is of
	succeeded := map[string]time.Time{}       // newest real result that ended well
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
				latest[name], latestOp[name] = res, op.ID
			}
			if _, seen := succeeded[name]; !seen && !op.DryRun && res.State == api.Succeeded {
				succeeded[name] = res.ReportedAt
			}
		}
		d.Operations = append(d.Operations, row)
	}
	d.Chart = opsChart(ops)
	var inCatalog map[string]bool
	if cat != nil {
		inCatalog = catalogServices(cat, &d)
	}

	statuses, err := b.store.RegistryStatuses(ctx)
	if err != nil {
		problem("registry statuses", err)
	}
	seen := map[string]bool{}
	for _, st := range statuses {
		seen[st.Name] = true
		lr := st.LastRun
		row := registryRow{Name: st.Name, Result: lr.Result, FinishedAt: lr.FinishedAt, Age: api.Age(now, lr.FinishedAt),
			Counts: lr.Counts, Ops: lr.Ops, Error: lr.Error, Guard: lr.Guard, ErrorsTotal: lr.ErrorsTotal, Marked: st.Marked,
			Source: lr.Source, LastSuccess: st.LastSuccessAt, LastDuration: lr.DurationMS, HasDuration: lr.Result != ""}
		row.EntryErrors, row.NeverReached = entryErrorRows(lr, inCatalog)
		if e := st.LastTargeted; e != nil && e.Result != "" {
			row.EventRun = &eventRunRow{Result: e.Result, FinishedAt: e.FinishedAt, Age: api.Age(now, e.FinishedAt), Entries: len(e.Entries), Error: e.Error}
		}
		if res, ok := latest[st.Name]; ok {
			row.LastBootstrap, row.LastError = res.Result, res.Error
			row.withResult(res, latestOp[st.Name])
		}
		if at := succeeded[st.Name]; at.After(row.LastSuccess) {
			row.LastSuccess = at
		}
		row.LastSuccessAge = api.Age(now, row.LastSuccess)
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
			Error: res.Error, LastBootstrap: res.Result, LastError: res.Error, LastSuccess: succeeded[name]}
		row.withResult(res, latestOp[name])
		row.LastSuccessAge = api.Age(now, row.LastSuccess)
		row.Health = health(api.RegistryStatus{}, res.State)
		d.Registries = append(d.Registries, row)
	}
	sort.Slice(d.Registries, func(i, j int) bool { return d.Registries[i].Name < d.Registries[j].Name })
	d.HasRow = map[string]bool{}
	for _, row := range d.Registries {
		d.HasRow[row.Name] = true
		switch row.Health {
		case HealthFailing:
			d.Failing++
		case HealthDegraded:
			d.Degraded++
		}
	}

	// The views are counted in the catalog shown above: one Get a page.
	if catErr != nil {
		problem("catalog views", catErr)
	} else {
		d.Views = b.viewInfos(cat)
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
	// What the catalog section says of a service beyond the catalog.
	held := map[string]bool{}
	for _, h := range d.HeldBack {
		held[h.Spec.SpecID] = true
	}
	failing := map[string]string{}
	for _, row := range d.Registries {
		for _, e := range row.EntryErrors {
			if e.InCatalog {
				failing[e.SpecID] = row.Name
			}
		}
	}
	for i := range d.Services {
		d.Services[i].HeldBack = held[d.Services[i].ID]
		d.Services[i].EntryError = failing[d.Services[i].ID]
	}
	return d
}

// withResult takes from a registry's newest bootstrap result what is
// newer than its recorded run: a run that changed nothing records nothing
// on the registry, but reports its source and duration to the bootstrap.
func (row *registryRow) withResult(res api.RegistryResult, op string) {
	row.LastOperation = op
	if res.Source != nil {
		row.Source = res.Source
	}
	// A result of a version before DurationMS and Source has neither.
	if res.DurationMS > 0 || res.Source != nil {
		row.LastDuration, row.HasDuration = res.DurationMS, true
	}
}

// entryErrorRows are a run's entry errors with what the catalog has of
// each entry, and how many never reached it: an error names the spec id
// its entry last gave (SpecID) only when the registry stored a version of
// it, unless the error is a conflict (the id is another registry's).
func entryErrorRows(run api.Run, inCatalog map[string]bool) ([]entryErrorRow, int) {
	owner := map[[2]string]string{}
	for _, c := range run.Conflicts {
		owner[[2]string{c.Entry, c.SpecID}] = c.Owner
	}
	var out []entryErrorRow
	never := 0
	for _, e := range run.Errors {
		row := entryErrorRow{EntryError: e, Owner: owner[[2]string{e.Entry, e.SpecID}]}
		row.InCatalog = e.SpecID != "" && row.Owner == "" && inCatalog[e.SpecID]
		if !row.InCatalog {
			never++
		}
		out = append(out, row)
	}
	return out, never
}

// catalogServices fills the catalog section from the catalog platforms
// are served (the broker's cache: inside its window, no Firestore read;
// the rendered catalog even when a form of it is too large to serve) and
// returns the ids of its services. The total and the ids come from the
// render's list; only the services shown are decoded, and of them only
// ids, names, descriptions and plans: a dashboard client's secret is
// never shown.
func catalogServices(cat *Rendered, d *statusData) map[string]bool {
	ids := make(map[string]bool, len(cat.served))
	for _, s := range cat.served {
		ids[s.id] = true
	}
	// The ones shown are the body's first: it lists its services by
	// name, then id (catalog.Assemble), and a body of only them lists
	// them in that same order.
	shown := make([]servedService, len(cat.served))
	copy(shown, cat.served)
	slices.SortFunc(shown, func(a, b servedService) int {
		return cmp.Or(strings.Compare(a.facts.Name, b.facts.Name), strings.Compare(a.id, b.id))
	})
	pieces := make([]*catalog.Piece, 0, min(len(shown), maxServices))
	for _, s := range shown[:min(len(shown), maxServices)] {
		pieces = append(pieces, s.piece)
	}
	first, _ := catalog.AssembleBody(pieces) // kept whole by the full render: no conflict among them
	var body struct {
		Services []struct {
			ID, Name, Description string
			Plans                 []struct {
				ID, Name string
				Free     bool
			}
			Metadata struct {
				Provenance *struct{ Digest, Key, Identity, Issuer string }
			}
		}
	}
	if err := json.Unmarshal(first.Bytes(), &body); err != nil {
		d.Problems = append(d.Problems, fmt.Sprintf("catalog: %v", err))
		return nil
	}
	d.CatalogRead = true
	d.ServicesTotal = cat.Services
	for _, s := range body.Services {
		row := serviceRow{ID: s.ID, Name: s.Name, Description: s.Description}
		if p := s.Metadata.Provenance; p != nil {
			row.SignedBy, row.SignedDigest = "key "+p.Key, p.Digest
			if p.Key == "" {
				row.SignedBy = p.Identity + " (issuer " + p.Issuer + ")"
			}
		}
		for _, p := range s.Plans {
			row.Plans = append(row.Plans, planRow{ID: p.ID, Name: p.Name, Free: p.Free})
		}
		d.Services = append(d.Services, row)
	}
	return ids
}

// durationMS writes a run's duration for people: "850 ms", "2.4 s",
// "3m05s".
func durationMS(ms int64) string {
	switch d := time.Duration(ms) * time.Millisecond; {
	case d < time.Second:
		return fmt.Sprintf("%d ms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	default:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
}

func (b *Broker) statusPage(w http.ResponseWriter, r *http.Request) {
	for k := range r.URL.Query() {
		if k != "refresh" {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "unknown query parameter %q", k)
			return
		}
	}
	d := b.statusData(r)
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, d); err != nil {
		b.cfg.Logger.Error("status page did not render", "error", err)
		web.WriteError(w, http.StatusInternalServerError, "InternalError", "the status page did not render")
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
