//go:build deploycheck

package terraform_test

// The metrics read what the code logs: every log-based metric's filter,
// labels and value are evaluated against the contract lines of
// pkg/logging (which the code logs with those constants, and which
// pkg/worker's TestContractLinesOfARealBootstrap captures from real
// runs), the dashboard and the alerts read only metrics and labels that
// exist, and the results they single out are the code's.

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/logging"
)

// loggedBy is the functions (by entry point) whose code logs each
// contract line: a metric must read the logs of each.
var loggedBy = map[string][]string{
	logging.EventRunSummary:         {"Reconcile"},
	logging.EventCatalogCommit:      {"Reconcile"},
	logging.EventMessageRetry:       {"Reconcile"},
	logging.EventBootstrapOperation: {"Bootstrap", "Reconcile"},
	logging.EventCatalogTooLarge:    {"Catalog"},
	logging.EventFreshness:          {"Reconcile"},
}

// fieldValues are the values a contract line's string field takes, where
// a filter or an alert may compare it with one.
var fieldValues = map[string]map[string][]string{
	logging.EventRunSummary: {
		logging.FieldResult: results(func(api.RunResult) bool { return true }),
		logging.FieldKind:   kinds(api.RunKinds...),
	},
	logging.EventBootstrapOperation: {logging.FieldResult: {string(api.Succeeded), string(api.Failed)}},
	// The committer logs freshness for event runs and bootstraps only.
	logging.EventFreshness: {logging.FieldKind: kinds(api.KindEvent, api.KindFull)},
}

func kinds(ks ...api.RunKind) []string {
	var out []string
	for _, k := range ks {
		out = append(out, string(k))
	}
	return out
}

// allResults are every run result of pkg/api.
var allResults = []api.RunResult{api.ResultSucceeded, api.ResultUnchanged, api.ResultFetchFailed, api.ResultGuarded,
	api.ResultError, api.ResultBusy, api.ResultDryRun}

func results(keep func(api.RunResult) bool) []string {
	var out []string
	for _, r := range allResults {
		if keep(r) {
			out = append(out, string(r))
		}
	}
	sort.Strings(out)
	return out
}

// condition is one term of a log filter: field op value(s).
type condition struct {
	field, op string
	values    []string
}

var (
	conditionRE = regexp.MustCompile(`^([a-zA-Z_.]+)(=|>)(.+)$`)
	quotedRE    = regexp.MustCompile(`"([^"]*)"`)
)

// parseFilter splits a log filter of terms joined by AND, each
// field="v", field=("a" OR "b") or field>N; anything else is an error, so
// a filter this test cannot read fails it rather than passing unread.
func parseFilter(filter string) ([]condition, error) {
	var out []condition
	for _, term := range strings.Split(filter, " AND ") {
		m := conditionRE.FindStringSubmatch(strings.TrimSpace(term))
		if m == nil {
			return nil, fmt.Errorf("term %q is not field=value or field>N", term)
		}
		c := condition{field: m[1], op: m[2]}
		switch v := m[3]; {
		case c.op == ">":
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return nil, fmt.Errorf("term %q compares with %q, not a number", term, v)
			}
			c.values = []string{v}
		case strings.HasPrefix(v, "(") && strings.HasSuffix(v, ")"):
			for _, alt := range strings.Split(v[1:len(v)-1], " OR ") {
				q := quotedRE.FindStringSubmatch(alt)
				if q == nil || q[0] != strings.TrimSpace(alt) {
					return nil, fmt.Errorf("term %q: %q is not a quoted string", term, alt)
				}
				c.values = append(c.values, q[1])
			}
		default:
			q := quotedRE.FindStringSubmatch(v)
			if q == nil || q[0] != v {
				return nil, fmt.Errorf("term %q: %q is not a quoted string", term, v)
			}
			c.values = []string{q[1]}
		}
		out = append(out, c)
	}
	return out, nil
}

// sampleLine is a line of event as the code logs it: every contract field,
// of its kind, strings with the values given (else a stand-in).
func sampleLine(event string, values map[string]string) map[string]any {
	line := map[string]any{logging.FieldEvent: event}
	for f, kind := range logging.Events[event] {
		switch kind {
		case logging.String:
			line[f] = "x"
			if v, ok := values[f]; ok {
				line[f] = v
			}
		case logging.Number:
			line[f] = 1.0
		case logging.Bool:
			line[f] = false
		}
	}
	return line
}

// matches evaluates a filter's jsonPayload conditions against a logged
// line, as Cloud Logging would.
func matches(conds []condition, line map[string]any) error {
	for _, c := range conds {
		f, ok := strings.CutPrefix(c.field, "jsonPayload.")
		if !ok {
			continue
		}
		v, present := line[f]
		if !present {
			return fmt.Errorf("%s: the line has no field %s", c.field, f)
		}
		switch c.op {
		case ">":
			n, isNum := v.(float64)
			limit, _ := strconv.ParseFloat(c.values[0], 64)
			if !isNum || !(n > limit) {
				return fmt.Errorf("%s>%s: the line's %v (%T) is not a number above it", c.field, c.values[0], v, v)
			}
		case "=":
			s, isStr := v.(string)
			if !isStr || !contains(c.values, s) {
				return fmt.Errorf("%s=%v: the line's %v (%T) is not one of them", c.field, c.values, v, v)
			}
		}
	}
	return nil
}

var extractRE = regexp.MustCompile(`^EXTRACT\(jsonPayload\.([a-z_]+)\)$`)

// metricInfo is what the dashboard and the alerts may read of a metric.
type metricInfo struct {
	name   string
	labels map[string]bool
	dist   bool
}

// logMetrics checks every log-based metric against the contract lines and
// returns them by their key in the module.
func logMetrics(t *testing.T, m *module) map[string]metricInfo {
	t.Helper()
	return checkLogMetrics(m, functionsByEntryPoint(t, m), &errs{t: t})
}

// errs collects errors: a test's, or (t nil) a check run to see it fail.
type errs struct {
	t    *testing.T
	seen []string
}

func (e *errs) Errorf(format string, args ...any) {
	if e.t != nil {
		e.t.Helper()
		e.t.Errorf(format, args...)
	}
	e.seen = append(e.seen, fmt.Sprintf(format, args...))
}

func checkLogMetrics(m *module, fns map[string]*instance, t *errs) map[string]metricInfo {
	out := map[string]metricInfo{}
	for _, inst := range m.ofType("google_logging_metric") {
		where := inst.addr()
		conds, err := parseFilter(inst.str("filter"))
		if err != nil {
			t.Errorf("%s: filter: %v", where, err)
			continue
		}
		var event string
		var services []string
		for _, c := range conds {
			switch c.field {
			case "resource.type":
				if c.values[0] != "cloud_run_revision" {
					t.Errorf("%s: resource.type %q: 2nd gen functions log as cloud_run_revision", where, c.values[0])
				}
			case "resource.labels.service_name":
				services = c.values
			case "jsonPayload." + logging.FieldEvent:
				if len(c.values) != 1 {
					t.Errorf("%s: reads %d events, want one", where, len(c.values))
				}
				event = c.values[0]
			default:
				if !strings.HasPrefix(c.field, "jsonPayload.") {
					t.Errorf("%s: filters on %s, which this test does not know", where, c.field)
				}
			}
		}
		fields, ok := logging.Events[event]
		if !ok {
			t.Errorf("%s: reads event %q, which the code does not log (logging.Events)", where, event)
			continue
		}
		// The logs of every function that logs the line, and of no other.
		var want []string
		for _, ep := range loggedBy[event] {
			want = append(want, fns[ep].str("name"))
		}
		sort.Strings(want)
		sort.Strings(services)
		if !reflect.DeepEqual(services, want) {
			t.Errorf("%s: reads the logs of %v, but %s is logged by %v", where, services, event, want)
		}
		// Each string a condition compares with is one the field takes,
		// and a line the code logs matches the whole filter.
		values := map[string]string{}
		for _, c := range conds {
			f, _ := strings.CutPrefix(c.field, "jsonPayload.")
			if !strings.HasPrefix(c.field, "jsonPayload.") || f == logging.FieldEvent || c.op != "=" {
				continue
			}
			for _, v := range c.values {
				if known := fieldValues[event][f]; !contains(known, v) {
					t.Errorf("%s: compares %s with %q, which is not one of its values %v", where, f, v, known)
				}
			}
			values[f] = c.values[0]
		}
		if err := matches(conds, sampleLine(event, values)); err != nil {
			t.Errorf("%s: a %s line as the code logs it does not match the filter: %v", where, event, err)
		}
		// Labels: bounded (registry, result), each extracted from a
		// string field the line carries, and declared as extracted.
		md := inst.one("metric_descriptor")
		declared := map[string]bool{}
		for _, l := range md.Blocks["labels"] {
			declared[l.str("key")] = true
			if l.str("value_type") != "STRING" {
				t.Errorf("%s: label %s is %s, want STRING", where, l.str("key"), l.str("value_type"))
			}
		}
		extractors := stringMap(inst.Attrs["label_extractors"])
		if len(extractors) != len(declared) {
			t.Errorf("%s: labels %v, extractors %v", where, declared, extractors)
		}
		for label, ex := range extractors {
			mm := extractRE.FindStringSubmatch(ex)
			switch {
			case !declared[label]:
				t.Errorf("%s: extracts label %s, which its descriptor does not declare", where, label)
			case label != logging.FieldRegistry && label != logging.FieldResult && label != logging.FieldKind:
				t.Errorf("%s: label %s: labels are bounded to registry, result and kind", where, label)
			case mm == nil:
				t.Errorf("%s: label %s: extractor %q is not EXTRACT(jsonPayload.FIELD)", where, label, ex)
			case fields[mm[1]] != logging.String:
				t.Errorf("%s: label %s reads %s, which a %s line does not carry as a string (it has %v)", where, label, mm[1], event, fields)
			}
		}
		// The value of a distribution: a number the line carries.
		dist := md.str("value_type") == "DISTRIBUTION"
		if ve := inst.str("value_extractor"); dist {
			mm := extractRE.FindStringSubmatch(ve)
			switch {
			case mm == nil:
				t.Errorf("%s: value extractor %q is not EXTRACT(jsonPayload.FIELD)", where, ve)
			case fields[mm[1]] != logging.Number:
				t.Errorf("%s: its value reads %s, which a %s line does not carry as a number (it has %v)", where, mm[1], event, fields)
			}
			if inst.one("bucket_options") == nil {
				t.Errorf("%s: a distribution without bucket options", where)
			}
		} else if ve != "" || md.str("value_type") != "INT64" {
			t.Errorf("%s: a count (INT64, no value extractor) or a distribution, not %s with %q", where, md.str("value_type"), ve)
		}
		if md.str("metric_kind") != "DELTA" {
			t.Errorf("%s: log-based metrics are DELTA", where)
		}
		out[inst.Key] = metricInfo{name: inst.str("name"), labels: declared, dist: dist}
	}
	return out
}

// The log-based metrics read the fields the code logs.
func TestLogMetricsReadLoggedFields(t *testing.T) {
	t.Parallel()
	m := planOf(t, reference(t))
	metrics := logMetrics(t, m)
	for _, want := range []string{"runs", "run_duration", "specs_marked", "specs_deleted", "entry_errors", "bootstrap_operations", "message_retries", "catalog_revision", "catalog_too_large",
		"push_to_commit", "bootstrap_to_commit"} {
		if _, ok := metrics[want]; !ok {
			t.Errorf("no log-based metric %s", want)
		}
	}
	// The results the alerts single out are the code's.
	for local, want := range map[string][]string{
		"failed_results":     results(api.RunResult.Failed),
		"successful_results": results(func(r api.RunResult) bool { return r.OK() && r != api.ResultDryRun }),
	} {
		got := localStrings(t, parseTF(t, "."), local)
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("local.%s = %v, the code says %v", local, got, want)
		}
	}
	// And so are the kinds of run they single out.
	f := parseTF(t, ".")
	for local, want := range map[string]api.RunKind{"full_kind": api.KindFull, "event_kind": api.KindEvent} {
		if got := template(t, f, "local."+local); got != string(want) {
			t.Errorf("local.%s = %s, the code says %q", local, got, want)
		}
	}
}

// Planted: a field renamed on one side is caught. The check above is run
// on a contract whose entry_errors field was renamed, and on a module
// whose runs metric extracts a label from a field no line has.
//
// Not parallel: it changes the planned module, which the parallel tests
// read only once it is done.
func TestLogMetricsCheckCatchesADriftedField(t *testing.T) {
	m := planOf(t, reference(t))
	saved := logging.Events[logging.EventRunSummary]
	renamed := map[string]logging.Kind{}
	for f, k := range saved {
		renamed[f] = k
	}
	delete(renamed, logging.FieldEntryErrors)
	renamed["entry_error"] = logging.Number
	logging.Events[logging.EventRunSummary] = renamed
	defer func() { logging.Events[logging.EventRunSummary] = saved }()
	fns := functionsByEntryPoint(t, m)
	planted := &errs{}
	checkLogMetrics(m, fns, planted)
	if len(planted.seen) == 0 {
		t.Error("the metrics check passes with entry_errors renamed in the logged lines")
	}
	t.Logf("entry_errors renamed: %v", planted.seen)
	logging.Events[logging.EventRunSummary] = saved

	runs := m.instance("google_logging_metric.specsync", "runs")
	savedEx := runs.Attrs["label_extractors"]
	runs.Attrs["label_extractors"] = ctyFromGo(map[string]string{"registry": "EXTRACT(jsonPayload.registry_name)", "result": "EXTRACT(jsonPayload.result)"})
	defer func() { runs.Attrs["label_extractors"] = savedEx }()
	planted = &errs{}
	checkLogMetrics(m, fns, planted)
	if len(planted.seen) == 0 {
		t.Error("the metrics check passes with a label extracted from a field no line has")
	}
	t.Logf("registry label from registry_name: %v", planted.seen)
}

var (
	promMetricRE = regexp.MustCompile(`logging_googleapis_com:user_([a-zA-Z0-9_]+)`)
	promByRE     = regexp.MustCompile(`by \(([a-z_, ]+)\)`)
	promMatchRE  = regexp.MustCompile(`([a-z_]+)(=~|!~|!=|=)"`)
)

// checkPromQL says whether a PromQL query reads only log-based metrics
// that exist, by labels they have; it returns the metrics it reads.
func checkPromQL(t *testing.T, where, q string, metrics map[string]metricInfo) []string {
	t.Helper()
	byProm := map[string]metricInfo{}
	for k, mi := range metrics {
		byProm[regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(mi.name, "_")] = metricInfo{name: k, labels: mi.labels, dist: mi.dist}
	}
	labels := map[string]bool{}
	var read []string
	for _, mm := range promMetricRE.FindAllStringSubmatch(q, -1) {
		name, suffix := mm[1], ""
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, s); ok {
				if _, exists := byProm[base]; exists {
					name, suffix = base, s
				}
			}
		}
		mi, ok := byProm[name]
		if !ok {
			t.Errorf("%s: reads %s, which is no log-based metric of the module", where, mm[0])
			continue
		}
		if suffix != "" && !mi.dist {
			t.Errorf("%s: reads %s%s of a count", where, name, suffix)
		}
		if suffix == "" && mi.dist {
			t.Errorf("%s: reads the distribution %s without _bucket, _sum or _count", where, name)
		}
		read = append(read, mi.name)
		for l := range mi.labels {
			labels[l] = true
		}
		if suffix == "_bucket" {
			labels["le"] = true
		}
	}
	if len(read) == 0 {
		return nil
	}
	for _, mm := range promByRE.FindAllStringSubmatch(q, -1) {
		for _, l := range strings.Split(mm[1], ",") {
			if l = strings.TrimSpace(l); !labels[l] {
				t.Errorf("%s: groups by %s, which %v do not have", where, l, read)
			}
		}
	}
	for _, mm := range promMatchRE.FindAllStringSubmatch(q, -1) {
		if !labels[mm[1]] {
			t.Errorf("%s: matches on label %s, which %v do not have", where, mm[1], read)
		}
	}
	return read
}

// The dashboard shows every log-based metric and reads only metrics and
// labels that exist; the status page's link is its URL.
func TestDashboard(t *testing.T) {
	t.Parallel()
	m := planOf(t, reference(t))
	metrics := logMetrics(t, m)
	dash := m.instance("google_monitoring_dashboard.specsync", "")
	var d struct {
		MosaicLayout struct {
			Tiles []struct {
				Widget struct {
					Title   string
					XyChart struct {
						DataSets []struct {
							TimeSeriesQuery struct {
								PrometheusQuery string
							}
						}
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(dash.str("dashboard_json")), &d); err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	deadLetters := false
	for _, tile := range d.MosaicLayout.Tiles {
		for _, ds := range tile.Widget.XyChart.DataSets {
			q := ds.TimeSeriesQuery.PrometheusQuery
			for _, k := range checkPromQL(t, tile.Widget.Title, q, metrics) {
				shown[k] = true
			}
			deadLetters = deadLetters || strings.Contains(q, `subscription_id="`+m.instance("google_pubsub_subscription.reconcile_dead_letter", "").str("name")+`"`)
		}
	}
	for k := range metrics {
		if !shown[k] {
			t.Errorf("the dashboard does not show %s", k)
		}
	}
	if !deadLetters {
		t.Error("the dashboard does not show the dead-letter subscription")
	}
	// The link (the dashboard's id is known at apply time): the output,
	// and what the catalog function is given, are the dashboard's URL.
	f := parseTF(t, ".")
	if got, want := template(t, f, "local.dashboard_url"), "https://console.cloud.google.com/monitoring/dashboards/builder/${basename(google_monitoring_dashboard.specsync.id)}?project=${var.project_id}"; got != want {
		t.Errorf("local.dashboard_url is %s, want %s", got, want)
	}
	if got := template(t, f, "output.dashboard_url", "value"); got != "local.dashboard_url" {
		t.Errorf("output dashboard_url is %s, want local.dashboard_url", got)
	}
	if !strings.Contains(template(t, f, "local.functions_all"), "SPECSYNC_DASHBOARD_URL = local.dashboard_url") {
		t.Error("the catalog function's SPECSYNC_DASHBOARD_URL is not local.dashboard_url")
	}
	if env, _ := envOf(t, functionsByEntryPoint(t, m)["Catalog"]); !containsKey(env, "SPECSYNC_DASHBOARD_URL") {
		t.Error("the catalog function has no SPECSYNC_DASHBOARD_URL")
	}
}

var metricTypeRE = regexp.MustCompile(`metric\.type="logging\.googleapis\.com/user/([^"]+)"`)
var metricLabelRE = regexp.MustCompile(`metric\.labels\.([a-z_]+)=(?:"([^"]*)"|one_of\(([^)]*)\))`)

// The alerts: the four the operations guide documents, each notifying
// the channels given, each reading metrics and labels that exist, with
// values their lines carry.
func TestAlerts(t *testing.T) {
	t.Parallel()
	channels := []string{"projects/specsync-test/notificationChannels/123", "projects/specsync-test/notificationChannels/456"}
	m := planOf(t, views) // with those channels and alert_failed_runs = 4
	metrics := logMetrics(t, m)
	byName := map[string]metricInfo{}
	for k, mi := range metrics {
		byName[mi.name] = metricInfo{name: k, labels: mi.labels}
	}
	want := []string{"bootstrap_failed", "catalog_too_large", "dead_letters", "freshness_burn", "no_successful_run", "registry_failing"}
	var got []string
	for _, a := range m.ofType("google_monitoring_alert_policy") {
		got = append(got, a.Res.Name)
		if !reflect.DeepEqual(stringList(a.Attrs["notification_channels"]), channels) {
			t.Errorf("%s notifies %v, want %v", a.addr(), a.Attrs["notification_channels"].GoString(), channels)
		}
		doc := a.one("documentation")
		if doc == nil || !strings.Contains(doc.str("content"), "docs/operations.md") {
			t.Errorf("%s: its documentation does not point at docs/operations.md", a.addr())
		}
		for _, c := range a.Blocks["conditions"] {
			if pq := c.one("condition_prometheus_query_language"); pq != nil {
				if len(checkPromQL(t, a.addr(), pq.str("query"), metrics)) == 0 {
					t.Errorf("%s: its query reads no metric", a.addr())
				}
			}
			for _, kind := range []string{"condition_threshold", "condition_absent"} {
				ct := c.one(kind)
				if ct == nil {
					continue
				}
				f := ct.str("filter")
				if v, ok := ct.Attrs["filter"]; ok && !v.IsKnown() || strings.HasPrefix(f, "select_slo_") {
					continue // an SLO's burn rate: TestFreshnessObjective
				}
				mt := metricTypeRE.FindStringSubmatch(f)
				if mt == nil {
					if !strings.Contains(f, `metric.type="pubsub.googleapis.com/`) {
						t.Errorf("%s: its filter reads neither a log-based metric nor a Pub/Sub one: %s", a.addr(), f)
					}
					continue // a Pub/Sub metric, below
				}
				mi, ok := byName[mt[1]]
				if !ok {
					t.Errorf("%s: reads %s, which is no log-based metric of the module", a.addr(), mt[1])
					continue
				}
				event := ""
				for _, inst := range m.ofType("google_logging_metric") {
					if inst.Key == mi.name {
						conds, _ := parseFilter(inst.str("filter"))
						for _, cd := range conds {
							if cd.field == "jsonPayload.event" {
								event = cd.values[0]
							}
						}
					}
				}
				for _, lm := range metricLabelRE.FindAllStringSubmatch(f, -1) {
					if !mi.labels[lm[1]] {
						t.Errorf("%s: filters on label %s, which %s does not have", a.addr(), lm[1], mt[1])
					}
					vals := quotedRE.FindAllStringSubmatch(lm[2]+lm[3], -1)
					if lm[2] != "" {
						vals = [][]string{{"", lm[2]}}
					}
					for _, v := range vals {
						if !contains(fieldValues[event][lm[1]], v[1]) {
							t.Errorf("%s: compares %s with %q, which a %s line never carries (%v)", a.addr(), lm[1], v[1], event, fieldValues[event][lm[1]])
						}
					}
				}
				for _, agg := range ct.Blocks["aggregations"] {
					for _, g := range stringList(agg.Attrs["group_by_fields"]) {
						if l, ok := strings.CutPrefix(g, "metric.label."); !ok || !mi.labels[l] {
							t.Errorf("%s: groups by %s, which %s does not have", a.addr(), g, mt[1])
						}
					}
				}
			}
		}
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("alert policies %v, want %v", got, want)
	}
	// The failing alert counts alert_failed_runs runs over as many
	// scheduled intervals; the absence alert waits two.
	q := m.instance("google_monitoring_alert_policy.registry_failing", "").one("conditions").one("condition_prometheus_query_language").str("query")
	if !strings.Contains(q, ">= 4") || !strings.Contains(q, "[14400s]") {
		t.Errorf("registry_failing does not wait for 4 failures in 4 intervals: %s", q)
	}
	abs := m.instance("google_monitoring_alert_policy.no_successful_run", "").one("conditions").one("condition_absent")
	if abs.str("duration") != "7200s" {
		t.Errorf("no_successful_run waits %s, want twice the 3600s interval", abs.str("duration"))
	}
	// The dead-letter alert watches the subscription of the topic every
	// push subscription dead-letters to.
	dl := m.instance("google_pubsub_subscription.reconcile_dead_letter", "")
	f := m.instance("google_monitoring_alert_policy.dead_letters", "").one("conditions").one("condition_threshold").str("filter")
	if !strings.Contains(f, `resource.labels.subscription_id="`+dl.str("name")+`"`) || !strings.Contains(f, "num_undelivered_messages") {
		t.Errorf("dead_letters does not watch %s: %s", dl.str("name"), f)
	}
	for _, sub := range m.ofType("google_pubsub_subscription") {
		if p := sub.one("dead_letter_policy"); p != nil && p.str("dead_letter_topic") != dl.str("topic") {
			t.Errorf("%s dead-letters to %s, which the alert does not watch", sub.addr(), p.str("dead_letter_topic"))
		}
	}
}

func stringList(v cty.Value) []string {
	var out []string
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || !v.CanIterateElements() {
		return out
	}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, asString(e))
	}
	return out
}

func containsKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// selectorRE is a PromQL selector of a log-based metric with matchers;
// matcherRE one of its matchers.
var (
	selectorRE = regexp.MustCompile(`logging_googleapis_com:user_[a-zA-Z0-9_]+\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-z_]+)(=~|!~|!=|=)"([^"]*)"`)
)

// selects reports whether a PromQL selector's matchers select a series
// of labels, as Prometheus matches (regular expressions anchored).
func selects(matchers string, labels map[string]string) bool {
	for _, m := range matcherRE.FindAllStringSubmatch(matchers, -1) {
		v := labels[m[1]]
		re := regexp.MustCompile("^(?:" + m[3] + ")$")
		var ok bool
		switch m[2] {
		case "=":
			ok = v == m[3]
		case "!=":
			ok = v != m[3]
		case "=~":
			ok = re.MatchString(v)
		case "!~":
			ok = !re.MatchString(v)
		}
		if !ok {
			return false
		}
	}
	return true
}

// runSeries is the runs metric's labels of a summary line of kind and
// result, as its label extractors read the line the code logs.
func runSeries(runs *instance, kind api.RunKind, result api.RunResult) map[string]string {
	line := sampleLine(logging.EventRunSummary, map[string]string{
		logging.FieldRegistry: "team", logging.FieldKind: string(kind), logging.FieldResult: string(result)})
	labels := map[string]string{}
	for label, ex := range stringMap(runs.Attrs["label_extractors"]) {
		if mm := extractRE.FindStringSubmatch(ex); mm != nil {
			labels[label], _ = line[mm[1]].(string)
		}
	}
	return labels
}

// checkFailingQuery says what is wrong with the registry_failing
// query for a registry whose full runs fail while its event runs
// succeed: the alert's first selector (the failures it counts) must
// select the failing full runs' lines and no event or dry run's; its
// second (the runs that reset it) a successful full run's and no event,
// dry, busy or guarded run's.
func checkFailingQuery(q string, runs *instance) []string {
	sel := selectorRE.FindAllStringSubmatch(q, -1)
	if len(sel) != 2 {
		return []string{fmt.Sprintf("the query has %d selectors with matchers, want 2 (the failures, the runs that reset them): %s", len(sel), q)}
	}
	failures, resets := sel[0][1], sel[1][1]
	var out []string
	type line struct {
		kind   api.RunKind
		result api.RunResult
	}
	for _, c := range []struct {
		l                     line
		counted, resetsAlerts bool
	}{
		{line{api.KindFull, api.ResultFetchFailed}, true, false},
		{line{api.KindFull, api.ResultError}, true, false},
		{line{api.KindFull, api.ResultSucceeded}, false, true},
		{line{api.KindFull, api.ResultUnchanged}, false, true},
		{line{api.KindFull, api.ResultBusy}, false, false},
		{line{api.KindFull, api.ResultGuarded}, false, false},
		{line{api.KindEvent, api.ResultSucceeded}, false, false},
		{line{api.KindEvent, api.ResultUnchanged}, false, false},
		{line{api.KindEvent, api.ResultFetchFailed}, false, false},
		{line{api.KindEvent, api.ResultBusy}, false, false},
		{line{api.KindDry, api.ResultDryRun}, false, false},
	} {
		labels := runSeries(runs, c.l.kind, c.l.result)
		if got := selects(failures, labels); got != c.counted {
			out = append(out, fmt.Sprintf("a %s run that ended %s: counted as a failure %v, want %v (%s)", c.l.kind, c.l.result, got, c.counted, failures))
		}
		if got := selects(resets, labels); got != c.resetsAlerts {
			out = append(out, fmt.Sprintf("a %s run that ended %s: resets the alert %v, want %v (%s)", c.l.kind, c.l.result, got, c.resetsAlerts, resets))
		}
	}
	return out
}

// A registry whose full runs fail every time while its webhook runs
// succeed alerts: the registry_failing query, evaluated on the runs
// metric's series of the lines the code logs, counts the failing full
// runs and is reset by no event, dry, busy or guarded run; the absence
// alert waits for a successful full run. Planted: the query of the
// version before (any run that did not fail reset it) is refused.
func TestRegistryFailingAlertReadsFullRuns(t *testing.T) {
	t.Parallel()
	m := planOf(t, views)
	runs := m.instance("google_logging_metric.specsync", "runs")
	q := m.instance("google_monitoring_alert_policy.registry_failing", "").one("conditions").one("condition_prometheus_query_language").str("query")
	for _, e := range checkFailingQuery(q, runs) {
		t.Error(e)
	}
	abs := m.instance("google_monitoring_alert_policy.no_successful_run", "").one("conditions").one("condition_absent").str("filter")
	if !strings.Contains(abs, `metric.labels.kind="`+string(api.KindFull)+`"`) {
		t.Errorf("no_successful_run counts runs of every kind: %s", abs)
	}
	before := strings.NewReplacer(`kind="full",`, "", `result=~"succeeded|unchanged"`, `result!~"fetch_failed|error"`).Replace(q)
	if before == q {
		t.Fatalf("could not plant the query of the version before in %s", q)
	}
	planted := checkFailingQuery(before, runs)
	if len(planted) == 0 {
		t.Error("the check passes the query that event runs reset")
	}
	t.Logf("the query of the version before: %v", planted)
}

// The freshness objective: an SLO on the push_to_commit distribution
// (the freshness lines of event runs), its range [0, objective] on a
// bucket boundary of the metric so the cut counts exactly, the goal
// given, and an alert on its burn rate over an hour and six hours.
func TestFreshnessObjective(t *testing.T) {
	t.Parallel()
	m := planOf(t, views)
	metrics := logMetrics(t, m)
	push := m.instance("google_logging_metric.specsync", "push_to_commit")
	if !strings.Contains(push.str("filter"), `jsonPayload.kind="`+string(api.KindEvent)+`"`) || push.str("value_extractor") != "EXTRACT(jsonPayload."+logging.FieldLatency+")" {
		t.Errorf("push_to_commit reads %s (%s), want the event runs' latency", push.str("filter"), push.str("value_extractor"))
	}
	slo := m.instance("google_monitoring_slo.push_freshness", "")
	if slo.Attrs["goal"].AsBigFloat().String() != "0.99" || slo.Attrs["rolling_period_days"].AsBigFloat().String() != "28" {
		t.Errorf("the SLO's goal %s over %s days, want 0.99 over 28", slo.Attrs["goal"].GoString(), slo.Attrs["rolling_period_days"].GoString())
	}
	cut := slo.one("request_based_sli").one("distribution_cut")
	if want := `resource.type="cloud_run_revision" AND metric.type="logging.googleapis.com/user/` + metrics["push_to_commit"].name + `"`; cut.str("distribution_filter") != want {
		t.Errorf("the SLO reads %s, want %s", cut.str("distribution_filter"), want)
	}
	rng := cut.one("range")
	lo, _ := rng.Attrs["min"].AsBigFloat().Float64()
	hi, _ := rng.Attrs["max"].AsBigFloat().Float64()
	if lo != 0 || hi != 5000 {
		t.Errorf("the SLO's range [%v, %v] ms, want [0, 5000]", lo, hi)
	}
	b := push.one("bucket_options").one("exponential_buckets")
	scale, _ := b.Attrs["scale"].AsBigFloat().Float64()
	growth, _ := b.Attrs["growth_factor"].AsBigFloat().Float64()
	n, _ := b.Attrs["num_finite_buckets"].AsBigFloat().Int64()
	onBoundary := false
	for i, bound := int64(0), scale; i <= n; i, bound = i+1, bound*growth {
		onBoundary = onBoundary || bound == hi
	}
	if !onBoundary {
		t.Errorf("the objective %v ms is no bucket boundary of push_to_commit (scale %v, growth %v, %d buckets)", hi, scale, growth, n)
	}
	// Its burn rates: 2% of the 28-day budget in an hour, 5% in six. The
	// filter names the SLO, whose name is known at apply time only: it
	// is read from the module's text.
	alert := m.instance("google_monitoring_alert_policy.freshness_burn", "")
	var burns []string
	for _, c := range alert.Blocks["conditions"] {
		ct := c.one("condition_threshold")
		burns = append(burns, ct.str("comparison")+" "+ct.Attrs["threshold_value"].AsBigFloat().Text('f', 2))
	}
	if want := []string{"COMPARISON_GT 13.44", "COMPARISON_GT 5.60"}; !reflect.DeepEqual(burns, want) {
		t.Errorf("freshness_burn fires at %v, want %v", burns, want)
	}
	tf, err := os.ReadFile("monitoring.tf")
	if err != nil {
		t.Fatal(err)
	}
	for _, window := range []string{"3600s", "21600s"} {
		if want := `select_slo_burn_rate(\"${google_monitoring_slo.push_freshness.name}\", \"` + window + `\")`; !strings.Contains(string(tf), want) {
			t.Errorf("freshness_burn has no condition %s", want)
		}
	}
}
