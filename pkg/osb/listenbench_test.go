package osb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
)

// BenchmarkFeedCommitToWaitingLongPoll: a watcher long-polls
// /v2/catalog/changes on a broker with the production refresh window
// (5 s); a reconcile changes one spec and its changes are committed; the
// time from the commit's return to the watcher's answer (it can be below
// zero: the listener may hear the commit before the committer has its
// answer; commit-p50-ms is the commit's own time, so from the commit's
// start it is about the sum). The watcher hears the commit through the instance's listener on meta/catalog (one
// listen for the whole benchmark: it lingers between polls, as under a
// steady watcher), so the latency is the emulator's listen round trip
// plus the read of the change, not the window. It reports p50 and p95,
// and the listener's reads per commit (1: one snapshot each, whatever
// the number of watchers). Run with -benchtime 20x or more; compare
// BenchmarkFeedCommitToLongPoll (the cached revision's path, which a
// failed listener falls back to).
func BenchmarkFeedCommitToWaitingLongPoll(b *testing.B) {
	e := newEnv(b, 5*time.Second)
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
	var lat, commits []time.Duration
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
		// Let the poll start waiting (and the listener, the first time,
		// hear its first snapshot), then commit at a random point of the
		// cached revision's poll cycle, which must not matter now.
		for s := e.broker.Listener(); s.Waiters != 1 || !s.Live; s = e.broker.Listener() {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		gen++
		fsys["watched.yaml"].Data = []byte(strings.Replace(specYAML("watched"), "The watched service", fmt.Sprintf("The watched service, v%d", gen), 1))
		run, err := runner.Reconcile(ctx, reg)
		if err != nil || run.Counts.Updated != 1 {
			b.Fatalf("reconcile: %+v %v", run.Counts, err)
		}
		started := time.Now()
		if _, err := e.st.CommitPending(ctx, time.Hour); err != nil { // the committer's job, right after the run
			b.Fatal(err)
		}
		committed := time.Now()
		select {
		case at := <-answered:
			lat = append(lat, at.Sub(committed))
			commits = append(commits, committed.Sub(started))
		case err := <-errs:
			b.Fatal(err)
		case <-time.After(30 * time.Second):
			b.Fatal("the long poll did not answer")
		}
	}
	s := e.broker.Listener()
	slices.Sort(lat)
	slices.Sort(commits)
	// Nearest rank: the smallest of ds at or above a share q of them.
	pct := func(ds []time.Duration, q float64) time.Duration { return ds[int(math.Ceil(q*float64(len(ds))))-1] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(pct(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(pct(lat, 0.95)), "p95-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(ms(lat[0]), "min-ms")
	b.ReportMetric(ms(pct(commits, 0.50)), "commit-p50-ms")
	// Each listen started reads its first snapshot; the rest are commits.
	b.ReportMetric(float64(s.Reads-s.Started)/float64(len(lat)), "listener-reads/commit")
	b.ReportMetric(float64(s.Started), "listens-started")
}
