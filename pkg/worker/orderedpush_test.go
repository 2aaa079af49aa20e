package worker_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/worker"
)

// orderedPush is the commit topic of a test and its ordered push
// subscription, pushing to w.HandleCommit the way the Reconcile function
// receives commit requests and reports, and counting what it handled.
type orderedPush struct {
	// Commits publishes to the topic, counting every message sent.
	Commits countingCommits
	// Sent, Handled, Reports and Refused count messages published,
	// handled (acknowledged), handled with a report, and refused (pushed
	// again); MaxInFlight is the most handled at once.
	Sent, Handled, Reports, Refused, MaxInFlight atomic.Int64
	inFlight                                     atomic.Int64
}

func newOrderedPush(t *testing.T, w *worker.Worker) *orderedPush {
	t.Helper()
	p := &orderedPush{}
	ps, psProject := emulatortest.PubSub(t)
	push := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n := p.inFlight.Add(1)
		defer p.inFlight.Add(-1)
		for m := p.MaxInFlight.Load(); n > m && !p.MaxInFlight.CompareAndSwap(m, n); m = p.MaxInFlight.Load() {
		}
		body, _ := io.ReadAll(r.Body)
		ev, _, err := queue.FromEvent(body)
		if err != nil || ev.Commit == nil {
			t.Errorf("the commit subscription pushed %s (%v)", body, err)
			rw.WriteHeader(http.StatusNoContent)
			return
		}
		if err := w.HandleCommit(r.Context(), *ev.Commit); err != nil {
			p.Refused.Add(1)
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if ev.Commit.Report != nil {
			p.Reports.Add(1)
		}
		p.Handled.Add(1)
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(push.Close)
	pub := queue.NewCommitPublisher(ps, emulatortest.PushTopic(t, ps, psProject, "commit", push.URL, true, 10*time.Minute))
	t.Cleanup(pub.Stop)
	p.Commits = countingCommits{pub: pub, sent: &p.Sent}
	return p
}
