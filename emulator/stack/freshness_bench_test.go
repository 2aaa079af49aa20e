package stack_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/emulator/stack"
	"github.com/specsync/specsync/functions"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/worker"
)

// BenchmarkFreshness measures the freshness objective's distributions
// as production measures them: from the freshness lines the committer
// logs (the push_to_commit and bootstrap_to_commit metrics read them),
// through the whole local stack on the emulators. Each iteration pushes a
// new version of one entry of a registry of 100 to the local registry,
// whose notification reaches the webhook, and waits for it in the
// catalog; then a few bootstraps each find one change. It reports the
// logged latencies' p50, p95 and p99 (and the share within the 5 s
// objective), and the push-to-catalog time seen from outside, which
// adds the registry's notification and the catalog read.
//
//	go run ./emulator/cmd/withemulators -- go test -run '^$' -bench Freshness -benchtime 40x -timeout 30m ./emulator/stack
func BenchmarkFreshness(b *testing.B) {
	for _, env := range []string{"FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"} {
		if os.Getenv(env) == "" {
			b.Fatalf("%s is not set: run through withemulators", env)
		}
	}
	const n, bootstraps = 100, 5
	ctx := context.Background()
	regFile := filepath.Join(b.TempDir(), "registries.yaml")
	if err := os.WriteFile(regFile, []byte("registries:\n  - name: fresh\n    type: oci\n    oci: {host: \"${SPECSYNC_DEMO_REGISTRY}\", prefix: r100, insecure: true, page_size: 1000}\n    hook: {type: bearer, secret_env: SPECSYNC_LOCAL_HOOK_SECRET}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Setenv("GOOGLE_CLOUD_PROJECT", emulatortest.ProjectID(b))
	b.Setenv("SPECSYNC_REGISTRIES", regFile)
	b.Setenv("SPECSYNC_TOPIC", "bench-freshness")
	b.Setenv("LOG_LEVEL", "info")
	logs := &lineLog{}
	was := functions.LogOutput
	functions.LogOutput = logs
	defer func() { functions.LogOutput = was }()
	seed := func(ctx context.Context, host string) error {
		for i := range n {
			if _, err := emulator.PushSpecImage(ctx, host, fmt.Sprintf("r100/svc-%d", i), "latest", benchLabel(n, i, 0), nil); err != nil {
				return err
			}
		}
		return nil
	}
	s, err := stack.Start(ctx, stack.Options{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: seed})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := &benchClient{s: s, http: &http.Client{Timeout: 2 * time.Minute}}
	c.bootstrap(b)
	logs.freshness(api.KindEvent) // the import's lines are not figures
	logs.freshness(api.KindFull)

	var outside []time.Duration
	version := 0
	for b.Loop() {
		version++
		i := rand.IntN(n)
		// A quiet registry, as in BenchmarkPushToWatcher.
		time.Sleep(worker.DefaultEventCooldown + 200*time.Millisecond)
		etag := c.catalogETag(b)
		t0 := time.Now()
		if _, err := emulator.PushSpecImage(ctx, s.Registry, fmt.Sprintf("r100/svc-%d", i), "latest", benchLabel(n, i, version), nil); err != nil {
			b.Fatal(err)
		}
		outside = append(outside, c.waitForCatalog(b, etag, fmt.Sprintf("svc-%d-%d", n, i), version).Sub(t0))
	}
	b.StopTimer()
	// The commit's line follows the catalog's move: wait for each.
	var push []time.Duration
	for deadline := time.Now().Add(time.Minute); len(push) < len(outside) && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		push = append(push, logs.freshness(api.KindEvent)...)
	}
	var boot []time.Duration
	for range bootstraps {
		version++
		i := rand.IntN(n)
		c.bootstrapChanging(b, "fresh", func() {
			if _, err := emulator.PushSpecImage(ctx, s.Registry, fmt.Sprintf("r100/svc-%d", i), "latest", benchLabel(n, i, version), nil); err != nil {
				b.Fatal(err)
			}
		})
		boot = append(boot, logs.freshness(api.KindFull)...)
		push = append(push, logs.freshness(api.KindEvent)...) // the push's own event, if it came first
	}
	if len(push) == 0 || len(boot) == 0 {
		b.Fatalf("freshness lines: %d of pushes, %d of bootstraps", len(push), len(boot))
	}
	within := 0
	for _, d := range push {
		if d <= 5*time.Second {
			within++
		}
	}
	b.ReportMetric(pct(push, 50), "push-to-commit-p50-ms")
	b.ReportMetric(pct(push, 95), "push-to-commit-p95-ms")
	b.ReportMetric(pct(push, 99), "push-to-commit-p99-ms")
	b.ReportMetric(100*float64(within)/float64(len(push)), "%-within-5s")
	b.ReportMetric(float64(len(push)), "push-lines")
	b.ReportMetric(pct(outside, 50), "push-to-catalog-p50-ms")
	b.ReportMetric(pct(outside, 99), "push-to-catalog-p99-ms")
	b.ReportMetric(pct(boot, 50), "bootstrap-to-commit-p50-ms")
	b.ReportMetric(pct(boot, 99), "bootstrap-to-commit-p99-ms")
}

// lineLog keeps the functions' JSON log lines.
type lineLog struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	read int
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// freshness returns the latencies of the freshness lines of kind logged
// since the last call for that kind (lines of the other kind are kept).
func (l *lineLog) freshness(kind api.RunKind) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	var keep bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line[logging.FieldEvent] != logging.EventFreshness {
			continue
		}
		if line[logging.FieldKind] != string(kind) {
			keep.Write(sc.Bytes())
			keep.WriteByte('\n')
			continue
		}
		ms, _ := line[logging.FieldLatency].(float64)
		out = append(out, time.Duration(ms)*time.Millisecond)
	}
	l.buf = keep
	return out
}
