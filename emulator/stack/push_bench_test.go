package stack_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/emulator/stack"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/worker"
)

// benchSizes are the registries the push benchmark reconciles into one
// store: each its own prefix of the local registry, with its own webhook.
var benchSizes = []int{100, 10000}

// BenchmarkPushToWatcher measures what a push upstream costs and how
// soon platforms see it, through the whole local stack as production
// wires it: the local registry's notification to the registry's webhook,
// the reconcile message on Pub/Sub's push subscription, the run, the
// commit on the ordered commit subscription, and the catalog function.
// One iteration pushes a new version of one random entry of a registry of
// 100 or 10,000 entries and times, from the push, the change in
// GET /v2/catalog with Cache-Control: no-cache and its delivery to a long
// poll that was waiting for it. It reports p50 and p95 of both, the run's
// Firestore reads and writes and the upstream requests per event, and
// for comparison those of a full run (a bootstrap after one change) of
// the same registry. Every figure comes from the one in-process stack of
// the benchmark, on the emulators.
//
//	go run ./emulator/cmd/withemulators -- go test -run '^$' -bench PushToWatcher -benchtime 20x -timeout 30m ./emulator/stack
func BenchmarkPushToWatcher(b *testing.B) {
	for _, env := range []string{"FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"} {
		if os.Getenv(env) == "" {
			b.Fatalf("%s is not set: run through withemulators", env)
		}
	}
	ctx := context.Background()
	dir := b.TempDir()
	var file strings.Builder
	file.WriteString("registries:\n")
	for _, n := range benchSizes {
		fmt.Fprintf(&file, "  - name: size-%d\n    type: oci\n    oci: {host: \"${SPECSYNC_DEMO_REGISTRY}\", prefix: r%d, insecure: true, page_size: 20000}\n    hook: {type: bearer, secret_env: SPECSYNC_LOCAL_HOOK_SECRET}\n", n, n)
	}
	regFile := filepath.Join(dir, "registries.yaml")
	if err := os.WriteFile(regFile, []byte(file.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Setenv("GOOGLE_CLOUD_PROJECT", emulatortest.ProjectID(b))
	b.Setenv("SPECSYNC_REGISTRIES", regFile)
	b.Setenv("SPECSYNC_TOPIC", "bench-reconcile")
	b.Setenv("LOG_LEVEL", "error")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	seed := func(ctx context.Context, host string) error {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for _, n := range benchSizes {
			for i := range n {
				g.Go(func() error {
					_, err := emulator.PushSpecImage(gctx, host, fmt.Sprintf("r%d/svc-%d", n, i), "latest", benchLabel(n, i, 0), nil)
					return err
				})
			}
		}
		return g.Wait()
	}
	start := time.Now()
	s, err := stack.Start(ctx, stack.Options{Addr: "127.0.0.1:0", Logger: quiet, Seed: seed})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := &benchClient{s: s, http: &http.Client{Timeout: 2 * time.Minute}}
	b.Logf("stack up and seeded in %s", time.Since(start).Round(time.Second))
	start = time.Now()
	c.bootstrap(b)
	b.Logf("first bootstrap (the import) in %s", time.Since(start).Round(time.Second))

	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			name := fmt.Sprintf("size-%d", n)
			var toCatalog, toPoll []time.Duration
			var upstream []int
			var reads, writes []int64
			version := 0
			for b.Loop() {
				version++
				i := rand.IntN(n)
				svc := fmt.Sprintf("svc-%d-%d", n, i)
				// A push to a quiet registry: the last event's run started
				// more than the event cooldown ago (a push inside it waits
				// for Pub/Sub's redelivery: the storm guard).
				time.Sleep(worker.DefaultEventCooldown + 200*time.Millisecond)
				rev := c.revision(b)
				etag := c.catalogETag(b)
				s.OCI.ResetRequests()
				polled := make(chan time.Time, 1)
				go func() { polled <- c.waitForChange(b, rev, svc) }()
				time.Sleep(100 * time.Millisecond) // the long poll is waiting
				t0 := time.Now()
				if _, err := emulator.PushSpecImage(ctx, s.Registry, fmt.Sprintf("r%d/svc-%d", n, i), "latest", benchLabel(n, i, version), nil); err != nil {
					b.Fatal(err)
				}
				inCatalog := c.waitForCatalog(b, etag, svc, version)
				toCatalog = append(toCatalog, inCatalog.Sub(t0))
				toPoll = append(toPoll, (<-polled).Sub(t0))
				upstream = append(upstream, len(s.OCI.Requests(bySpecsyncUnder(n))))
				// An event's run: a targeted one, or (a source that cannot
				// fetch one entry alone) a full one.
				st := c.status(b, name)
				ops := st.LastRun.Ops
				if st.LastTargeted != nil && !st.LastTargeted.StartedAt.Before(st.LastRun.StartedAt) {
					ops = st.LastTargeted.Ops
				}
				reads, writes = append(reads, ops.Reads), append(writes, ops.Writes)
			}
			b.ReportMetric(pct(toCatalog, 50), "push-to-catalog-p50-ms")
			b.ReportMetric(pct(toCatalog, 95), "push-to-catalog-p95-ms")
			b.ReportMetric(pct(toPoll, 50), "push-to-longpoll-p50-ms")
			b.ReportMetric(pct(toPoll, 95), "push-to-longpoll-p95-ms")
			b.ReportMetric(meanInt(upstream), "upstream-requests/event")
			b.ReportMetric(mean64(reads), "run-reads/event")
			b.ReportMetric(mean64(writes), "run-writes/event")

			// A full run of the same registry after one change.
			i := rand.IntN(n)
			version++
			if _, err := emulator.PushSpecImage(ctx, s.Registry, fmt.Sprintf("r%d/svc-%d", n, i), "latest", benchLabel(n, i, version), nil); err != nil {
				b.Fatal(err)
			}
			c.waitForCatalog(b, c.catalogETag(b), fmt.Sprintf("svc-%d-%d", n, i), version)
			i = rand.IntN(n)
			version++
			s.OCI.ResetRequests()
			res := c.bootstrapChanging(b, name, func() {
				if _, err := emulator.PushSpecImage(ctx, s.Registry, fmt.Sprintf("r%d/svc-%d", n, i), "latest", benchLabel(n, i, version), nil); err != nil {
					b.Fatal(err)
				}
			})
			b.ReportMetric(float64(res.Firestore.Reads), "full-run-reads")
			b.ReportMetric(float64(res.Firestore.Writes), "full-run-writes")
			b.ReportMetric(float64(len(s.OCI.Requests(bySpecsyncUnder(n)))), "full-run-upstream-requests")
		})
	}
}

// benchLabel is the spec label of entry i of the registry of n entries at
// a version (its description says which).
func benchLabel(n, i, version int) string {
	y := fmt.Sprintf("name: svc-%d-%d\ndescription: version %d of svc-%d-%d\nplans:\n  - name: default\n    description: the plan\n", n, i, version, n, i)
	return base64.StdEncoding.EncodeToString([]byte(y))
}

// bySpecsyncUnder matches the requests a source made (its user agent) for
// the repositories of the registry of n entries. A full run's one
// catalog request is not among them: every registry of the bootstrap
// makes its own, and the path does not say whose.
func bySpecsyncUnder(n int) func(emulator.Request) bool {
	prefix := fmt.Sprintf("/v2/r%d/", n)
	return func(q emulator.Request) bool {
		return strings.HasPrefix(q.UserAgent, "specsync") && strings.HasPrefix(q.Path, prefix)
	}
}

type benchClient struct {
	s    *stack.Stack
	http *http.Client
}

func (c *benchClient) do(b *testing.B, method, path, auth string, headers ...string) (*http.Response, []byte) {
	b.Helper()
	req, err := http.NewRequest(method, c.s.URL+path, nil)
	if err != nil {
		b.Fatal(err)
	}
	switch auth {
	case "admin":
		req.Header.Set("Authorization", "Bearer "+c.s.AdminToken)
	case "broker":
		req.SetBasicAuth(c.s.BrokerUser, c.s.BrokerPass)
		req.Header.Set("X-Broker-API-Version", "2.17")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return resp, body
}

// bootstrap runs a bootstrap to its end and returns the operation.
func (c *benchClient) bootstrap(b *testing.B) api.LastOperation {
	b.Helper()
	resp, body := c.do(b, http.MethodPost, "/bootstrap", "admin")
	if resp.StatusCode != http.StatusAccepted {
		b.Fatalf("POST /bootstrap: %d %s", resp.StatusCode, body)
	}
	var started api.BootstrapAccepted
	if err := json.Unmarshal(body, &started); err != nil {
		b.Fatal(err)
	}
	var op api.LastOperation
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		resp, body := c.do(b, http.MethodGet, "/bootstrap/last_operation?operation="+started.Operation, "admin")
		if err := json.Unmarshal(body, &op); err != nil {
			b.Fatalf("last_operation: %d %s", resp.StatusCode, body)
		}
		if op.State != api.InProgress {
			if op.State != api.Succeeded {
				b.Fatalf("bootstrap %s: %s", op.State, op.Description)
			}
			return op
		}
	}
	b.Fatalf("bootstrap still in progress after 10 minutes: %s", op.Description)
	return op
}

// bootstrapChanging bootstraps after change and returns the registry's
// result.
func (c *benchClient) bootstrapChanging(b *testing.B, registry string, change func()) api.RegistryResult {
	b.Helper()
	change()
	op := c.bootstrap(b)
	return op.Registries[registry]
}

// revision is the catalog's revision now.
func (c *benchClient) revision(b *testing.B) int64 {
	b.Helper()
	resp, body := c.do(b, http.MethodGet, "/v2/catalog/changes?since=0&limit=1", "broker")
	var page api.ChangePage
	if err := json.Unmarshal(body, &page); err != nil {
		b.Fatalf("changes: %d %s", resp.StatusCode, body)
	}
	return page.Revision
}

// waitForChange long-polls from rev until a change of service name comes
// and returns when it came.
func (c *benchClient) waitForChange(b *testing.B, rev int64, name string) time.Time {
	for {
		resp, body := c.do(b, http.MethodGet, fmt.Sprintf("/v2/catalog/changes?since=%d&wait=45s", rev), "broker")
		at := time.Now()
		var page api.ChangePage
		if err := json.Unmarshal(body, &page); err != nil || resp.StatusCode != http.StatusOK {
			b.Errorf("changes: %d %s", resp.StatusCode, body)
			return at
		}
		if slices.ContainsFunc(page.Changes, func(ch api.Change) bool { return ch.Name == name }) {
			return at
		}
		if len(page.Changes) == 0 {
			b.Errorf("a long poll waiting for %s came back empty after 45 s", name)
			return at
		}
		rev = page.Next
	}
}

// catalogETag is the catalog's ETag now, read past the refresh window.
func (c *benchClient) catalogETag(b *testing.B) string {
	b.Helper()
	resp, body := c.do(b, http.MethodGet, "/v2/catalog", "broker", "Cache-Control", "no-cache")
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("catalog: %d %s", resp.StatusCode, body[:min(len(body), 200)])
	}
	return resp.Header.Get("ETag")
}

// waitForCatalog asks for the catalog with Cache-Control: no-cache every
// 50 ms (If-None-Match the last ETag, so an unchanged one is a 304) until
// service name is at version, and returns when it was.
func (c *benchClient) waitForCatalog(b *testing.B, etag, name string, version int) time.Time {
	b.Helper()
	want := fmt.Sprintf("description\":\"version %d of %s\"", version, name)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		resp, body := c.do(b, http.MethodGet, "/v2/catalog", "broker", "Cache-Control", "no-cache", "If-None-Match", etag)
		at := time.Now()
		if resp.StatusCode == http.StatusOK {
			if strings.Contains(string(body), want) {
				return at
			}
			etag = resp.Header.Get("ETag")
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("%s never reached version %d in the catalog", name, version)
	return time.Time{}
}

// status is a registry's status as GET /registries answers it.
func (c *benchClient) status(b *testing.B, name string) api.RegistryStatus {
	b.Helper()
	resp, body := c.do(b, http.MethodGet, "/registries", "admin")
	var list api.RegistryList
	if err := json.Unmarshal(body, &list); err != nil {
		b.Fatalf("registries: %d %s", resp.StatusCode, body)
	}
	for _, st := range list.Registries {
		if st.Name == name {
			return st
		}
	}
	b.Fatalf("no status for registry %s", name)
	return api.RegistryStatus{}
}

func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := (len(s)*p + 99) / 100
	return float64(s[max(k-1, 0)].Microseconds()) / 1000
}

func meanInt(xs []int) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0
	for _, x := range xs {
		t += x
	}
	return float64(t) / float64(len(xs))
}

func mean64(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var t int64
	for _, x := range xs {
		t += x
	}
	return float64(t) / float64(len(xs))
}
