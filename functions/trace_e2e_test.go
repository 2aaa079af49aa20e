package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/specsync/specsync/emulator/emulatortest"
	localstack "github.com/specsync/specsync/emulator/stack"
	"github.com/specsync/specsync/functions"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/telemetry"
)

// inProcessStack says the stack already ran in this process.
var inProcessStack atomic.Bool

// syncBuffer is a log both the functions and the test use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// One bootstrap is one trace, through the local stack's real push path
// (the Pub/Sub emulator pushing to the functions framework): the
// bootstrap request's server span, the publish of the reconcile
// messages, each registry's message, run and steps, the reports, the
// commit and the change publish, each under the right parent; and the
// log lines written inside carry that trace. The stack runs in this
// process, so the spans go to an in-memory exporter behind a batch that
// would hold them for an hour: what reaches it was flushed, the request's
// server span before its answer came back. The sampling ratio is zero,
// so the trace is kept only because a bootstrap the admin asked for
// always is, and its messages carry that decision. The request comes
// with a traceparent that is not sampled (as Google's front end sends
// one): the bootstrap continues its trace anyway. Requests that carry a
// sampled traceparent but not the admin's credential (a bootstrap, the
// catalog), or the broker's but no say over the ratio (the catalog),
// export nothing.
//
// Not parallel: the stack lives in this process and reads its settings
// from the environment (set here for this test only); the functions'
// instances (built once per process) belong to it.
func TestE2ETraceOneBootstrapOneTrace(t *testing.T) {
	requireEmulators(t)
	if !inProcessStack.CompareAndSwap(false, true) {
		t.Fatal("the in-process stack runs once a test process (the functions build their instances once, with the first stack's settings): run this test with -count=1")
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(telemetry.NewSampler(0)), sdktrace.WithBatcher(exp,
		sdktrace.WithBatchTimeout(time.Hour), sdktrace.WithMaxExportBatchSize(1<<16), sdktrace.WithMaxQueueSize(1<<16)))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	_, urlA := newIndex(t, "alpha", "beta")
	_, urlB := newIndex(t, "gamma")
	cfg := filepath.Join(t.TempDir(), "registries.yaml")
	if err := os.WriteFile(cfg, []byte(twoIndexes(urlA, urlB)), 0o644); err != nil {
		t.Fatal(err)
	}
	project := emulatortest.ProjectID(t)
	// Everything Start sets in the process environment is set here
	// first, so the test's cleanup restores it.
	for k, v := range map[string]string{
		"GOOGLE_CLOUD_PROJECT": project, "SPECSYNC_REGISTRIES": cfg,
		"SPECSYNC_TOPIC": "reconcile-" + project, "SPECSYNC_CHANGES_TOPIC": "changes-" + project, "SPECSYNC_COMMIT_TOPIC": "commit-" + project,
		"SPECSYNC_ADMIN_TOKEN": adminToken, "SPECSYNC_BROKER_USERNAME": brokerUser, "SPECSYNC_BROKER_PASSWORD": brokerPass,
		"SPECSYNC_CATALOG_REFRESH": "1ms", "SPECSYNC_LOCAL_HOOK_SECRET": "trace-hook-secret-0123456789", "SPECSYNC_DEMO_REGISTRY": "",
		"SPECSYNC_LOCAL_PUSH_ADDR": "", "SPECSYNC_LOCAL_PUSH_TOKEN": pushToken, "FUNCTION_TARGET": "", "PORT": "",
		"SPECSYNC_TRACE": "", "SPECSYNC_TRACE_SAMPLE_RATIO": "", "LOG_LEVEL": "debug",
	} {
		t.Setenv(k, v)
	}
	logs := &syncBuffer{}
	was := functions.LogOutput
	functions.LogOutput = logs
	t.Cleanup(func() { functions.LogOutput = was })

	ctx := context.Background()
	st, err := localstack.Start(ctx, localstack.Options{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	s := &stack{t: t, url: st.URL, project: project, admin: adminToken, client: &http.Client{Timeout: 30 * time.Second}}

	// Forced sampling: a sampled traceparent on requests the service
	// would not keep. None may leave a span.
	forced := map[string]string{}
	for i, c := range []struct {
		method, path, auth string
		headers            []string
		status             int
	}{
		{http.MethodPost, "/bootstrap", "", []string{"Authorization", "Bearer not-the-admin-token"}, http.StatusUnauthorized},
		{http.MethodPost, "/bootstrap", "", nil, http.StatusUnauthorized},
		{http.MethodGet, "/v2/catalog", "", []string{"Authorization", "Basic bm90OnRoZS1icm9rZXI=", "X-Broker-API-Version", "2.17"}, http.StatusUnauthorized},
		{http.MethodGet, "/v2/catalog", "broker", nil, http.StatusOK},
	} {
		id := fmt.Sprintf("%032x", 0xf0cced0+i)
		r := s.do(c.method, c.path, c.auth, nil, append(c.headers, "traceparent", "00-"+id+"-00f067aa0ba902b7-01")...)
		if r.status != c.status {
			t.Fatalf("%s %s (%v): %d %s, want %d", c.method, c.path, c.headers, r.status, r.body, c.status)
		}
		forced[id] = c.method + " " + c.path
	}

	const callerTrace, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	r := s.do(http.MethodPost, "/bootstrap", "admin", nil, "traceparent", "00-"+callerTrace+"-"+callerSpan+"-00")
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /bootstrap: %d %s", r.status, r.body)
	}
	// The request's span was flushed before its answer left.
	if got := named(inTrace(exp.GetSpans(), callerTrace), "POST /bootstrap"); len(got) != 1 {
		t.Errorf("when POST /bootstrap answered, the exporter had %d of its server spans, want 1: the request did not flush its trace", len(got))
	}
	var start api.BootstrapAccepted
	r.json(t, &start)
	if op := s.poll(start.Operation); op.State != api.Succeeded {
		t.Fatalf("bootstrap: %+v", op)
	}

	// The spans end as each handler returns: wait for the change publish
	// and for every span under it to be exported.
	var spans tracetest.SpanStubs
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans = inTrace(exp.GetSpans(), callerTrace)
		if has(spans, "publish changes") && count(spans, "receive report") == 2 && ended(spans) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trace lacks spans after 20s: %s", describe(spans))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Let the last handlers end their spans.
	time.Sleep(500 * time.Millisecond)
	spans = inTrace(exp.GetSpans(), callerTrace)
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, sp := range spans {
		byID[sp.SpanContext.SpanID()] = sp
	}
	parentName := func(sp tracetest.SpanStub) string {
		if p, ok := byID[sp.Parent.SpanID()]; ok {
			return p.Name
		}
		return "(" + sp.Parent.SpanID().String() + ")"
	}

	server := only(t, spans, "POST /bootstrap")
	if server.SpanKind != trace.SpanKindServer || server.Parent.SpanID().String() != callerSpan || !server.Parent.IsRemote() {
		t.Errorf("the bootstrap's server span: kind %v, parent %v; want a server span under the caller's %s", server.SpanKind, server.Parent, callerSpan)
	}
	if !attr(server, "specsync.operation", start.Operation) {
		t.Errorf("the server span does not name the operation %s: %v", start.Operation, server.Attributes)
	}
	publish := only(t, spans, "publish reconcile messages")
	if publish.Parent.SpanID() != server.SpanContext.SpanID() || publish.SpanKind != trace.SpanKindProducer {
		t.Errorf("publish reconcile messages: parent %s, kind %v", parentName(publish), publish.SpanKind)
	}
	runs := map[string]tracetest.SpanStub{}
	for _, sp := range named(spans, "receive reconcile") {
		if sp.Parent.SpanID() != publish.SpanContext.SpanID() || sp.SpanKind != trace.SpanKindConsumer {
			t.Errorf("receive reconcile: parent %s, kind %v; want the publish's consumer", parentName(sp), sp.SpanKind)
		}
	}
	for _, sp := range named(spans, "reconcile") {
		reg := value(sp, "specsync.registry")
		runs[reg] = sp
		if p := byID[sp.Parent.SpanID()]; p.Name != "receive reconcile" || value(p, "specsync.registry") != reg {
			t.Errorf("run of %s: parent %s", reg, parentName(sp))
		}
		if value(sp, "specsync.result") != string(api.ResultSucceeded) || value(sp, "specsync.created") == "" || value(sp, "firestore.writes") == "" {
			t.Errorf("run of %s: attributes %v lack its result and counts", reg, sp.Attributes)
		}
	}
	if len(runs) != 2 || runs["team-a"].Name == "" || runs["team-b"].Name == "" {
		t.Fatalf("runs in the trace: %v; want team-a and team-b", keys(runs))
	}
	for reg, run := range runs {
		steps := map[string]tracetest.SpanStub{}
		for _, sp := range spans {
			if sp.Parent.SpanID() == run.SpanContext.SpanID() {
				steps[sp.Name] = sp
			}
		}
		for _, step := range []string{"fetch", "know", "delete marked", "upsert", "hold back", "mark", "record"} {
			if _, ok := steps[step]; !ok {
				t.Errorf("run of %s has no %q step under it (children: %v)", reg, step, keys(steps))
			}
		}
		if up := steps["upsert"]; value(up, "specsync.created") == "0" || value(up, "firestore.writes") == "0" {
			t.Errorf("run of %s: upsert attributes %v do not count its creates and writes", reg, up.Attributes)
		}
		if f := steps["fetch"]; (reg == "team-a" && value(f, "specsync.entries") != "2") || (reg == "team-b" && value(f, "specsync.entries") != "1") {
			t.Errorf("run of %s: fetch attributes %v", reg, f.Attributes)
		}
	}
	reports := named(spans, "publish report")
	if len(reports) != 2 {
		t.Errorf("%d report publishes in the trace, want 2 (one a registry)", len(reports))
	}
	for _, sp := range named(spans, "receive report") {
		if byID[sp.Parent.SpanID()].Name != "publish report" {
			t.Errorf("receive report: parent %s", parentName(sp))
		}
	}
	commits := named(spans, "commit")
	var committed tracetest.SpanStub
	for _, c := range commits {
		if value(c, "specsync.changes") != "0" {
			committed = c
		}
	}
	if committed.Name == "" {
		t.Fatalf("no commit of the bootstrap's changes in its trace: %s", describe(spans))
	}
	if p := parentName(committed); p != "receive report" && p != "receive commit request" {
		t.Errorf("the commit's parent is %s, want the message that asked for it", p)
	}
	pub := only(t, spans, "publish changes")
	if pub.Parent.SpanID() != committed.SpanContext.SpanID() || value(pub, "messaging.batch.message_count") != "3" {
		t.Errorf("publish changes: parent %s, attributes %v; want the commit's child publishing 3 changes", parentName(pub), pub.Attributes)
	}
	// Every span of the trace leads up to the bootstrap's request.
	for _, sp := range spans {
		for p, n := sp, 0; p.SpanContext.SpanID() != server.SpanContext.SpanID(); n++ {
			next, ok := byID[p.Parent.SpanID()]
			if !ok || n > 20 {
				t.Errorf("%s: its ancestry stops at %s before the bootstrap's request", sp.Name, parentName(p))
				break
			}
			p = next
		}
	}

	// By now every kept span has been flushed by the handler it ended in.
	for id, req := range forced {
		if got := inTrace(exp.GetSpans(), id); len(got) != 0 {
			t.Errorf("%s with a sampled traceparent exported %d spans: the caller forced its trace: %s", req, len(got), describe(got))
		}
	}

	// The log lines written inside the trace carry it, with a span of it.
	want := "projects/" + project + "/traces/" + callerTrace
	joined := map[string]int{}
	for _, line := range strings.Split(logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l[logging.TraceKey] != want {
			continue
		}
		sid, _ := l[logging.SpanIDKey].(string)
		if _, ok := spanByHex(byID, sid); !ok {
			t.Errorf("the line %q names span %s, not one of the trace's", l["message"], sid)
		}
		if l[logging.TraceSampledKey] != true {
			t.Errorf("the line %q says its trace is not sampled", l["message"])
		}
		joined[fmt.Sprint(l["message"])]++
	}
	for _, m := range []string{"bootstrap started", "commit requested", "reconcile run", "report published", "catalog changes committed", "bootstrap operation ended"} {
		if joined[m] == 0 {
			t.Errorf("no %q line carries the bootstrap's trace (lines in it: %v)", m, joined)
		}
	}
}

func inTrace(all tracetest.SpanStubs, id string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range all {
		if s.SpanContext.TraceID().String() == id {
			out = append(out, s)
		}
	}
	return out
}

func named(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func has(spans tracetest.SpanStubs, name string) bool { return len(named(spans, name)) > 0 }

func count(spans tracetest.SpanStubs, name string) int { return len(named(spans, name)) }

// ended: an in-memory exporter holds ended spans only; a parent missing
// means its handler has not returned yet.
func ended(spans tracetest.SpanStubs) bool {
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
	}
	for _, s := range spans {
		if !s.Parent.IsRemote() && !ids[s.Parent.SpanID()] {
			return false
		}
	}
	return true
}

func only(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	got := named(spans, name)
	if len(got) != 1 {
		t.Fatalf("%d %q spans in the trace, want 1: %s", len(got), name, describe(spans))
	}
	return got[0]
}

func value(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

func attr(s tracetest.SpanStub, key, want string) bool { return value(s, key) == want }

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func spanByHex(byID map[trace.SpanID]tracetest.SpanStub, hex string) (tracetest.SpanStub, bool) {
	for id, s := range byID {
		if id.String() == hex {
			return s, true
		}
	}
	return tracetest.SpanStub{}, false
}

func describe(spans tracetest.SpanStubs) string {
	var b strings.Builder
	for _, s := range spans {
		set := attribute.NewSet(s.Attributes...)
		fmt.Fprintf(&b, "\n  %s %s <- %s %s", s.SpanContext.SpanID(), s.Name, s.Parent.SpanID(), set.Encoded(attribute.DefaultEncoder()))
	}
	return b.String()
}
