package config_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/config/gcs"
)

// The tests of Source read config bundles from fake-gcs-server, in
// process, through the real storage client speaking Cloud Storage's JSON
// API; what reaches the server is counted, and it can be made to fail.

const bucket = "specsync-deploy"

// fakeGCS is Cloud Storage for a test.
type fakeGCS struct {
	t      *testing.T
	url    string
	client *storage.Client
	// metadata and reads count the object's metadata reads and content
	// reads.
	metadata, reads atomic.Int64
	// down makes every request a 503, as Cloud Storage in an outage.
	down atomic.Bool
	// slow delays every metadata read.
	slow atomic.Int64
}

func newFakeGCS(t *testing.T) *fakeGCS {
	t.Helper()
	server, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	server.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	g := &fakeGCS{t: t}
	h := server.HTTPHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The JSON API: an object's metadata, or with alt=media its
		// content.
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/storage/v1/b/"+bucket+"/o/") {
			if r.URL.Query().Get("alt") == "media" {
				g.reads.Add(1)
			} else {
				g.metadata.Add(1)
				time.Sleep(time.Duration(g.slow.Load()))
			}
		}
		if g.down.Load() {
			http.Error(w, `{"error": {"code": 503, "message": "backend unavailable"}}`, http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(server.Stop)
	g.url = srv.URL
	g.client, err = storage.NewClient(context.Background(), option.WithEndpoint(srv.URL+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.client.Close() })
	return g
}

// write writes an object, as terraform does, and returns its generation.
func (g *fakeGCS) write(name string, data []byte) int64 {
	g.t.Helper()
	w := g.client.Bucket(bucket).Object(name).NewWriter(context.Background())
	w.ContentType = "application/json"
	if _, err := w.Write(data); err != nil {
		g.t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		g.t.Fatal(err)
	}
	return w.Attrs().Generation
}

// open is SourceOptions.OpenObject on the fake.
func (g *fakeGCS) open(_ context.Context, location string) (config.Object, error) {
	b, name, err := gcs.Split(location)
	if err != nil {
		return nil, err
	}
	return gcs.NewObject(g.client, b, name), nil
}

// logBuffer collects a source's JSON log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

// registriesNamed is a registries file of http registries with those
// names.
func registriesNamed(names ...string) string {
	var b strings.Builder
	b.WriteString("registries:\n")
	for _, n := range names {
		b.WriteString("  - {name: " + n + ", type: http, http: {url: 'https://index.example.com/" + n + ".yaml'}}\n")
	}
	return b.String()
}

func names(cfg *config.Config) string { return strings.Join(cfg.Names(), ",") }

// A cold start reads the bundle: its registries, and a dir source's
// spec files from the bundle's files; the generation is the object's.
func TestSourceColdStartFromABundle(t *testing.T) {
	t.Parallel()
	g := newFakeGCS(t)
	gen := g.write("registries.json", bundleJSON(t, registriesNamed("index")+"  - {name: bundled, type: dir, dir: {path: specs}}\n", map[string]string{
		"specs/redis.yaml":     exampleSpec(t, "redis"),
		"specs/wordpress.yaml": exampleSpec(t, "wordpress"),
	}))
	var logs logBuffer
	src, err := config.LoadSource(context.Background(), "gs://"+bucket+"/registries.json", config.SourceOptions{OpenObject: g.open, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, got := src.Current(context.Background())
	if got != gen || names(cfg) != "index,bundled" {
		t.Fatalf("generation %d, registries %s; want %d, index,bundled", got, names(cfg), gen)
	}
	if e := entries(t, cfg, "bundled"); len(e) != 2 || e["redis"] != "bundle:specs/redis.yaml" || e["wordpress"] != "bundle:specs/wordpress.yaml" {
		t.Errorf("the dir source lists %v, want the bundle's two spec files", e)
	}
	if g.metadata.Load() != 0 || g.reads.Load() != 1 {
		t.Errorf("the cold start made %d metadata reads and %d reads, want 0 and 1", g.metadata.Load(), g.reads.Load())
	}
	if src.String() != "gs://"+bucket+"/registries.json" {
		t.Errorf("String %q", src)
	}
}

// An edit is picked up by the first use an interval after the last
// check, with one metadata read and one read; before that, nothing is
// read. What is derived from the configuration is built again only then.
func TestSourcePicksUpAnEditAfterTheInterval(t *testing.T) {
	t.Parallel()
	// The interval is measured on a clock the test moves: how fast the
	// machine runs decides nothing here.
	const interval = 30 * time.Second
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	g := newFakeGCS(t)
	first := g.write("registries.json", bundleJSON(t, registriesNamed("a"), nil))
	var logs logBuffer
	src, err := config.LoadSource(context.Background(), "gs://"+bucket+"/registries.json", config.SourceOptions{OpenObject: g.open, Interval: interval, Logger: logs.logger(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	builds := 0
	derived := config.Derive(src, func(c *config.Config) string { builds++; return names(c) })
	second := g.write("registries.json", bundleJSON(t, registriesNamed("a", "b"), nil))
	for range 10 {
		advance(interval / 20) // half the interval in all: still within it
		if got := derived.Current(context.Background()); got != "a" || g.metadata.Load() != 0 {
			t.Fatalf("within the interval: %s after %d metadata reads, want the configuration loaded (a) and none", got, g.metadata.Load())
		}
	}
	advance(interval / 2)
	cfg, gen := src.Current(context.Background())
	if names(cfg) != "a,b" || gen != second || gen == first {
		t.Fatalf("after the interval: %s at generation %d, want a,b at %d", names(cfg), gen, second)
	}
	if got := derived.Current(context.Background()); got != "a,b" || builds != 2 {
		t.Errorf("derived %q after %d builds, want a,b after 2 (one per configuration)", got, builds)
	}
	if m, r := g.metadata.Load(), g.reads.Load(); m != 1 || r != 2 {
		t.Errorf("%d metadata reads and %d reads in all, want 1 and 2 (cold start, edit)", m, r)
	}
	if !strings.Contains(logs.String(), `"generation":`+itoa(second)) || !strings.Contains(logs.String(), "its new configuration is in use") {
		t.Errorf("the swap is not logged with its generation:\n%s", logs.String())
	}
	// Unchanged: one metadata read an interval, no read.
	advance(interval - time.Nanosecond)
	src.Current(context.Background())
	if m := g.metadata.Load(); m != 1 {
		t.Errorf("checked again before the interval was over: %d metadata reads, want 1", m)
	}
	advance(time.Nanosecond)
	src.Current(context.Background())
	if m, r := g.metadata.Load(), g.reads.Load(); m != 2 || r != 2 {
		t.Errorf("an unchanged object: %d metadata reads and %d reads, want 2 and 2", m, r)
	}
}

// An edit that does not parse is logged (object, generation, what is
// wrong) and the last good configuration keeps serving; the rejected
// generation is not read again; the next good edit is taken.
func TestSourceKeepsTheLastGoodConfigurationOnAnInvalidEdit(t *testing.T) {
	t.Parallel()
	const interval = 200 * time.Millisecond
	g := newFakeGCS(t)
	good := g.write("registries.json", bundleJSON(t, registriesNamed("a"), nil))
	var logs logBuffer
	src, err := config.LoadSource(context.Background(), "gs://"+bucket+"/registries.json", config.SourceOptions{OpenObject: g.open, Interval: interval, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	bad := g.write("registries.json", bundleJSON(t, registriesNamed("a")+"  - {name: Not_A_Label, type: http, http: {url: 'https://x'}}\n", nil))
	time.Sleep(interval)
	cfg, gen := src.Current(context.Background())
	if names(cfg) != "a" || gen != good {
		t.Fatalf("after an invalid edit: %s at generation %d, want a at %d", names(cfg), gen, good)
	}
	line := logLine(t, logs.String(), "invalid configuration")
	if line == "" {
		t.Fatalf("the invalid edit is not logged:\n%s", logs.String())
	}
	for _, want := range []string{`"level":"ERROR"`, `"object":"gs://` + bucket + `/registries.json"`, `"generation":` + itoa(bad), `"serving_generation":` + itoa(good), `name \"Not_A_Label\" must be a DNS label`} {
		if !strings.Contains(line, want) {
			t.Errorf("the log line does not say %s: %s", want, line)
		}
	}
	reads := g.reads.Load()
	time.Sleep(interval)
	if cfg, _ := src.Current(context.Background()); names(cfg) != "a" || g.reads.Load() != reads || strings.Count(logs.String(), "invalid configuration") != 1 {
		t.Errorf("the rejected generation again: %s, %d reads (was %d), logged %d times", names(cfg), g.reads.Load(), reads, strings.Count(logs.String(), "invalid configuration"))
	}
	fixed := g.write("registries.json", bundleJSON(t, registriesNamed("a", "c"), nil))
	time.Sleep(interval)
	if cfg, gen := src.Current(context.Background()); names(cfg) != "a,c" || gen != fixed {
		t.Errorf("after the fix: %s at %d, want a,c at %d", names(cfg), gen, fixed)
	}
}

// Cloud Storage down: the check fails within its bound, is logged, and
// the request is served the configuration loaded; once it is back, an
// edit is picked up.
func TestSourceKeepsServingWhenCloudStorageIsDown(t *testing.T) {
	t.Parallel()
	const interval, timeout = 200 * time.Millisecond, 500 * time.Millisecond
	g := newFakeGCS(t)
	good := g.write("registries.json", bundleJSON(t, registriesNamed("a"), nil))
	var logs logBuffer
	src, err := config.LoadSource(context.Background(), "gs://"+bucket+"/registries.json", config.SourceOptions{OpenObject: g.open, Interval: interval, CheckTimeout: timeout, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	g.down.Store(true)
	time.Sleep(interval)
	// The request's own deadline is far away: the check's bound is what
	// ends a read the client would retry for as long as it may.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	cfg, gen := src.Current(ctx)
	if took := time.Since(start); took > timeout+time.Second {
		t.Errorf("the request waited %s for a check bounded by %s", took, timeout)
	}
	if names(cfg) != "a" || gen != good {
		t.Fatalf("while down: %s at %d, want a at %d", names(cfg), gen, good)
	}
	if line := logLine(t, logs.String(), "could not be checked"); !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, `"object":"gs://`+bucket+`/registries.json"`) {
		t.Errorf("the failed check is not logged with its object: %q\n%s", line, logs.String())
	}
	// The next interval's check is the next one, not every request's.
	before := g.metadata.Load()
	for range 20 {
		src.Current(ctx)
	}
	if g.metadata.Load() != before {
		t.Errorf("a failed check is retried by every request: %d metadata reads, was %d", g.metadata.Load(), before)
	}
	g.down.Store(false)
	later := g.write("registries.json", bundleJSON(t, registriesNamed("b"), nil))
	time.Sleep(interval)
	if cfg, gen := src.Current(ctx); names(cfg) != "b" || gen != later {
		t.Errorf("back up: %s at %d, want b at %d", names(cfg), gen, later)
	}
}

// A cold start fails, naming the object, when the object or its bucket
// is missing or the bundle is not one; a gs:// location needs a client,
// and a path is read as a file, once.
func TestSourceColdStartFailures(t *testing.T) {
	t.Parallel()
	g := newFakeGCS(t)
	g.write("garbage.json", []byte("registries:\n- name: a\n"))
	g.write("v2.json", []byte(`{"version": 2, "registries": ""}`))
	for location, want := range map[string]string{
		"gs://" + bucket + "/missing.json":    "gs://" + bucket + "/missing.json: no such object, or no such bucket",
		"gs://no-such-bucket/registries.json": "gs://no-such-bucket/registries.json: no such object, or no such bucket",
		"gs://" + bucket + "/garbage.json":    "config bundle gs://" + bucket + "/garbage.json (generation ",
		"gs://" + bucket + "/v2.json":         "version 2 is not one this specsync reads",
		"gs://" + bucket:                      `"gs://` + bucket + `" is not a Cloud Storage object: want gs://BUCKET/OBJECT`,
	} {
		src, err := config.LoadSource(context.Background(), location, config.SourceOptions{OpenObject: g.open})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, %v; want an error saying %q", location, src, err, want)
		}
	}
	if _, err := config.LoadSource(context.Background(), "gs://"+bucket+"/garbage.json", config.SourceOptions{}); err == nil || !strings.Contains(err.Error(), "reads no Cloud Storage object") {
		t.Errorf("gs:// without a client: %v", err)
	}
	path := filepath.Join(t.TempDir(), "registries.yaml")
	if err := os.WriteFile(path, []byte(registriesNamed("local")), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := config.LoadSource(context.Background(), path, config.SourceOptions{Interval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(registriesNamed("edited")), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, gen := src.Current(context.Background()); names(cfg) != "local" || gen != 0 {
		t.Errorf("a file: %s at generation %d, want local at 0 (read once)", names(cfg), gen)
	}
	if _, err := config.LoadSource(context.Background(), path+".missing", config.SourceOptions{}); err == nil || !strings.Contains(err.Error(), "registries.yaml.missing") {
		t.Errorf("a missing file: %v", err)
	}
}

// Many requests at once check at most once an interval: one metadata
// read, however many find the check due, and the others do not wait for
// it.
func TestSourceChecksOnceAnIntervalUnderConcurrentUse(t *testing.T) {
	t.Parallel()
	const interval, run = 250 * time.Millisecond, 1200 * time.Millisecond
	g := newFakeGCS(t)
	g.write("registries.json", bundleJSON(t, registriesNamed("a"), nil))
	src, err := config.LoadSource(context.Background(), "gs://"+bucket+"/registries.json", config.SourceOptions{OpenObject: g.open, Interval: interval, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Each check takes a while, so that requests pile up behind it.
	g.slow.Store(int64(100 * time.Millisecond))
	start := time.Now()
	var wg sync.WaitGroup
	var calls atomic.Int64
	for range 32 {
		wg.Go(func() {
			for time.Since(start) < run {
				if cfg, _ := src.Current(context.Background()); names(cfg) != "a" {
					t.Errorf("served %s", names(cfg))
					return
				}
				calls.Add(1)
				// A request's own work: the callers find the check due
				// together, and leave the machine's two cores some time
				// for the check itself.
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	most := int64(time.Since(start)/interval) + 1
	if m := g.metadata.Load(); m < 2 || m > most {
		t.Errorf("%d metadata reads in %s of %d calls, want between 2 and %d (one an interval at most)", m, time.Since(start).Round(time.Millisecond), calls.Load(), most)
	}
}

// logLine is the first log line that contains s.
func logLine(t *testing.T, logs, s string) string {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
