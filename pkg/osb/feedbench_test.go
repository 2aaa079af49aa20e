package osb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
)

// BenchmarkFeedCommitToLongPoll: a watcher long-polls
// /v2/catalog/changes; a reconcile changes one spec; the time from the
// reconcile's return (its feed commit is its last write but the status) to
// the watcher's answer. The broker polls its cached revision every refresh
// window (here 1 s, at most 1 s by design), so the latency is bounded by
// about two windows. Run with -benchtime 5x or more. Since the revision
// listener (listen.go) the watcher hears the commit through it first, so
// this measures what BenchmarkFeedCommitToWaitingLongPoll does; the
// window bounds only the path a failed listener falls back to.
func BenchmarkFeedCommitToLongPoll(b *testing.B) {
	e := newEnv(b, time.Second)
	e.broker.Cache.Now = time.Now
	fsys := fstest.MapFS{"watched.yaml": {Data: []byte(specYAML("watched"))}}
	src, err := registry.NewDir(registry.DirConfig{FS: fsys, Root: "bench:feed"})
	if err != nil {
		b.Fatal(err)
	}
	reg := reconcile.Registry{Name: "feed", Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}}
	runner := &reconcile.Runner{Store: e.st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	if _, err := runner.Reconcile(ctx, reg); err != nil {
		b.Fatal(err)
	}
	e.commit()
	var lat []time.Duration
	gen := 0
	for b.Loop() {
		rev, err := e.st.Revision(ctx)
		if err != nil {
			b.Fatal(err)
		}
		answered := make(chan time.Time, 1)
		errs := make(chan error, 1)
		go func() {
			req := e.request(http.MethodGet, "/v2/catalog/changes?since="+strconv.FormatInt(rev, 10)+"&wait=30s", "")
			resp, err := e.srv.Client().Do(req)
			at := time.Now()
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var body api.ChangePage
			if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Changes) == 0 {
				errs <- fmt.Errorf("long poll answered %d without changes", resp.StatusCode)
				return
			}
			answered <- at
		}()
		// Let the poll start waiting, then commit at a random point of
		// its poll cycle: the latency is the rest of that cycle.
		time.Sleep(200*time.Millisecond + time.Duration(rand.Int64N(int64(time.Second))))
		gen++
		fsys["watched.yaml"].Data = []byte(strings.Replace(specYAML("watched"), "The watched service", fmt.Sprintf("The watched service, v%d", gen), 1))
		run, err := runner.Reconcile(ctx, reg)
		if err != nil || run.Counts.Updated != 1 {
			b.Fatalf("reconcile: %+v %v", run.Counts, err)
		}
		e.commit() // the committer's job, right after the run
		committed := time.Now()
		select {
		case at := <-answered:
			lat = append(lat, at.Sub(committed))
		case err := <-errs:
			b.Fatal(err)
		case <-time.After(30 * time.Second):
			b.Fatal("the long poll did not answer")
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(ms(lat[0]), "min-ms")
}
