package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
)

// syncBuffer is a log output the runs may write to at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// contractLines are the logged JSON lines of each contract event.
func contractLines(t *testing.T, out *syncBuffer) map[string][]map[string]any {
	t.Helper()
	out.mu.Lock()
	defer out.mu.Unlock()
	lines := map[string][]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(out.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q: %v", l, err)
		}
		if ev, ok := m[logging.FieldEvent].(string); ok {
			if _, known := logging.Events[ev]; !known {
				t.Errorf("a line has event %q, which is not a contract line: %s", ev, l)
			}
			lines[ev] = append(lines[ev], m)
		}
	}
	return lines
}

// checkContract says whether every line carries every field its event's
// contract lists (logging.Events), of the kind listed, and the severity
// and message Cloud Logging reads.
func checkContract(t *testing.T, lines map[string][]map[string]any) {
	t.Helper()
	for ev, ls := range lines {
		for _, l := range ls {
			for _, f := range []string{"severity", "message"} {
				if s, _ := l[f].(string); s == "" {
					t.Errorf("%s line without %s: %v", ev, f, l)
				}
			}
			for f, kind := range logging.Events[ev] {
				v, ok := l[f]
				if !ok {
					t.Errorf("%s line without %s: %v", ev, f, l)
					continue
				}
				var got logging.Kind
				switch v.(type) {
				case string:
					got = logging.String
				case float64:
					got = logging.Number
				case bool:
					got = logging.Bool
				}
				if got != kind {
					t.Errorf("%s line: %s is %T (%v), the contract says %s", ev, f, v, v, kind)
				}
			}
		}
	}
}

// The contract lines the metrics read (docs/operations.md), captured from
// real runs through the worker on the emulator: every run ends with one
// summary line (a reconciled registry and one that cannot be fetched), a
// commit that moves the catalog says so, and each bootstrap, real or dry,
// says how it ended; each line with every field of its contract.
func TestContractLinesOfARealBootstrap(t *testing.T) {
	ctx := context.Background()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	downSrc, err := registry.NewOCI(registry.OCIConfig{Host: strings.TrimPrefix(down.URL, "http://"), Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	w, ops, st := testWorker(t)
	out := &syncBuffer{}
	log := logging.New(out, "info")
	local, _ := w.Lookup("local")
	regs := map[string]reconcile.Registry{"local": local, "down": {Name: "down", Source: downSrc}}
	w = newWorker(st, ops, regs)
	w.Logger, w.Runner.Logger, w.Committer.Logger, ops.Logger = log, log, log, log

	op, _, err := ops.Start(ctx, []string{"local", "down"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range op.Registries {
		if err := w.Handle(ctx, queue.Message{Operation: op.ID, Registry: r}); err != nil {
			t.Fatal(err)
		}
	}
	deliverCommits(t, w)
	dry, _, err := ops.Start(ctx, []string{"local"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(ctx, queue.Message{Operation: dry.ID, Registry: "local"}); err != nil {
		t.Fatal(err)
	}
	deliverCommits(t, w)
	// A registry's full run, then an event's run of one of its entries:
	// a run of its own kind.
	up := newUpstream(t)
	up.push(t, "svc", "v1")
	teamSrc, err := registry.NewOCI(registry.OCIConfig{Host: up.host, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	team := reconcile.Registry{Name: "team", Source: teamSrc}
	if run, err := w.Runner.Reconcile(ctx, team); err != nil || run.Result != api.ResultSucceeded {
		t.Fatalf("full run: %+v %v", run, err)
	}
	up.push(t, "svc", "v2")
	eventAt := time.Now().Add(-time.Second) // a second ago: the latency logged is at least that
	if run, err := w.Runner.ReconcileEvent(ctx, team, []string{"svc"}, eventAt); err != nil || run.Backstop != "" || run.Result != api.ResultSucceeded {
		t.Fatalf("targeted run: %+v %v", run, err)
	}
	deliverCommits(t, w)

	lines := contractLines(t, out)
	checkContract(t, lines)
	runs := map[string]map[string]any{}
	for _, l := range lines[logging.EventRunSummary] {
		key := l[logging.FieldRegistry].(string)
		if l[logging.FieldDryRun] == true {
			key += " (dry)"
		}
		if l[logging.FieldTargeted] == true {
			key += " (event)"
		}
		if runs[key] != nil {
			t.Errorf("two summary lines for %s: %v and %v", key, runs[key], l)
		}
		runs[key] = l
	}
	want := map[string]struct {
		result   api.RunResult
		severity string
		created  float64
		kind     api.RunKind
	}{
		"local":        {api.ResultSucceeded, "INFO", 1, api.KindFull},
		"down":         {api.ResultFetchFailed, "WARNING", 0, api.KindFull},
		"local (dry)":  {api.ResultDryRun, "INFO", 0, api.KindDry},
		"team":         {api.ResultSucceeded, "INFO", 1, api.KindFull},
		"team (event)": {api.ResultSucceeded, "INFO", 0, api.KindEvent},
	}
	if len(runs) != len(want) {
		t.Errorf("summary lines for %d runs, want %d: %v", len(runs), len(want), runs)
	}
	for k, w := range want {
		l := runs[k]
		if l == nil {
			t.Errorf("no summary line for %s", k)
			continue
		}
		if l[logging.FieldResult] != string(w.result) || l["severity"] != w.severity || l[logging.FieldCreated] != w.created || l["message"] != "reconcile run" ||
			l[logging.FieldKind] != string(w.kind) {
			t.Errorf("%s: summary line %v, want result %s, severity %s, created %v, kind %s", k, l, w.result, w.severity, w.created, w.kind)
		}
	}
	if l := runs["local"]; l != nil && (l[logging.FieldWrites].(float64) == 0 || l[logging.FieldReads].(float64) == 0 || l[logging.FieldChanges] != 1.0) {
		t.Errorf("the reconciled registry's summary does not count its work: %v", l)
	}

	commits := lines[logging.EventCatalogCommit]
	if len(commits) != 2 || commits[0][logging.FieldRevision] != 1.0 || commits[0][logging.FieldChanges] != 1.0 ||
		commits[1][logging.FieldRevision] != 3.0 || commits[1][logging.FieldChanges] != 2.0 {
		t.Errorf("catalog commit lines %v, want one at revision 1 with 1 change (the bootstrap's), one at 3 with 2 (team's runs)", commits)
	}
	// Freshness: the bootstrap that wrote a change (from its start), the
	// event run (from the event), each once its changes were committed.
	fresh := lines[logging.EventFreshness]
	if len(fresh) != 2 || fresh[0][logging.FieldKind] != string(api.KindFull) || fresh[0][logging.FieldRevision] != 1.0 ||
		fresh[1][logging.FieldKind] != string(api.KindEvent) || fresh[1][logging.FieldRevision] != 3.0 || fresh[1][logging.FieldLatency].(float64) < 1000 {
		t.Errorf("freshness lines %v, want the bootstrap's at revision 1, then the event's at 3, at least 1000 ms after it", fresh)
	}
	ended := map[string]map[string]any{}
	for _, l := range lines[logging.EventBootstrapOperation] {
		ended[l[logging.FieldOperation].(string)] = l
	}
	if l := ended[op.ID]; l == nil || l[logging.FieldResult] != string(api.Failed) || l["severity"] != "ERROR" ||
		l[logging.FieldFailedRegistries] != 1.0 || l[logging.FieldRegistries] != 2.0 || l[logging.FieldCatalogRevision] != 1.0 || l[logging.FieldDryRun] != false {
		t.Errorf("the bootstrap with a registry down ended with %v", l)
	}
	if l := ended[dry.ID]; l == nil || l[logging.FieldResult] != string(api.Succeeded) || l["severity"] != "INFO" || l[logging.FieldDryRun] != true || l[logging.FieldFailedRegistries] != 0.0 {
		t.Errorf("the dry run ended with %v", l)
	}
	if len(ended) != 2 {
		t.Errorf("bootstrap operation lines for %d operations, want 2: %v", len(ended), lines[logging.EventBootstrapOperation])
	}
}

// An operation whose registries never report fails at its deadline, when
// it is next read, and says so in its contract line.
func TestContractLineOfAnOverdueBootstrap(t *testing.T) {
	ctx := context.Background()
	out := &syncBuffer{}
	now := time.Now()
	ops := bootstrap.NewOperations(store.New(checked(t)), time.Minute, time.Hour)
	ops.Logger = logging.New(out, "info")
	ops.Now = func() time.Time { return now }
	op, _, err := ops.Start(ctx, []string{"local"}, false)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if got, err := ops.Get(ctx, op.ID); err != nil || got.State != api.Failed {
		t.Fatalf("overdue operation read as %+v, %v", got, err)
	}
	lines := contractLines(t, out)
	checkContract(t, lines)
	ended := lines[logging.EventBootstrapOperation]
	if len(ended) != 1 || ended[0][logging.FieldResult] != string(api.Failed) || ended[0][logging.FieldFailedRegistries] != 1.0 ||
		ended[0][logging.FieldDuration] != float64((2*time.Minute).Milliseconds()) {
		t.Errorf("overdue operation's lines: %v", ended)
	}
}

// An operation past its deadline that a new bootstrap supersedes ends
// failed, and says so in its contract line.
func TestContractLineOfASupersededBootstrap(t *testing.T) {
	ctx := context.Background()
	out := &syncBuffer{}
	now := time.Now()
	ops := bootstrap.NewOperations(store.New(checked(t)), time.Minute, time.Hour)
	ops.Logger = logging.New(out, "info")
	ops.Now = func() time.Time { return now }
	old, _, err := ops.Start(ctx, []string{"local"}, false)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, started, err := ops.Start(ctx, []string{"local"}, false); err != nil || !started {
		t.Fatalf("a start after the deadline: started %v, %v", started, err)
	}
	lines := contractLines(t, out)
	checkContract(t, lines)
	ended := lines[logging.EventBootstrapOperation]
	if len(ended) != 1 || ended[0][logging.FieldOperation] != old.ID || ended[0][logging.FieldResult] != string(api.Failed) {
		t.Errorf("superseded operation's lines: %v", ended)
	}
}
