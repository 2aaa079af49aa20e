package bootstrap_test

// Starting a bootstrap: one message per registry published, a publish
// failure answered with a 503, concurrent starts coalesced. What the
// messages then do is pkg/worker's (its tests run the two together).

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var rigRegistries = []string{"alpha", "beta", "gamma"}

// countingPublisher records messages; safe for concurrent bootstraps.
type countingPublisher struct {
	mu   sync.Mutex
	msgs []queue.Message
}

func (c *countingPublisher) Publish(_ context.Context, m []queue.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m...)
	return nil
}

type failingPublisher struct{ err error }

func (f failingPublisher) Publish(context.Context, []queue.Message) error { return f.err }

type recordingPublisher struct{ msgs []queue.Message }

func (r *recordingPublisher) Publish(_ context.Context, m []queue.Message) error {
	r.msgs = append(r.msgs, m...)
	return nil
}

func TestStartPublishesOneMessagePerRegistry(t *testing.T) {
	ops, _, _ := newOps(t)
	pub := &recordingPublisher{}
	svc := &bootstrap.Service{Operations: ops, Publisher: pub, Registries: []string{"b", "a"}, VerifyAdmin: func(*http.Request, string) bool { return true }, Logger: quiet}
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/bootstrap", nil)
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || len(pub.msgs) != 2 || pub.msgs[0].Registry != "a" {
		t.Fatalf("status %d, messages %+v", resp.StatusCode, pub.msgs)
	}
	for _, m := range pub.msgs {
		body, _ := m.Encode()
		if strings.Contains(string(body), "password") || len(body) > 200 {
			t.Fatalf("message carries more than identity: %s", body)
		}
	}
}

// A publish failure fails the operation and tells the caller with a 503.
func TestStartPublishFailure(t *testing.T) {
	ctx := context.Background()
	ops, _, _ := newOps(t)
	svc := &bootstrap.Service{Operations: ops, Publisher: failingPublisher{errors.New("topic not found")}, Registries: []string{"a"},
		VerifyAdmin: func(*http.Request, string) bool { return true }, Logger: quiet}
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/bootstrap", nil)
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "topic not found") {
		t.Fatalf("publish failure: %d %s", resp.StatusCode, body)
	}
	// The failed operation does not block the next bootstrap.
	if _, started, err := ops.Start(ctx, []string{"a"}, false); err != nil || !started {
		t.Fatalf("a failed publish left the operation in progress: started=%v %v", started, err)
	}
}

// One at a time: ten bootstraps at once through HTTP are one operation,
// published once.
func TestTenConcurrentBootstrapsOneOperation(t *testing.T) {
	t.Parallel()
	client := checked(t)
	ops := bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour)
	pub := &countingPublisher{}
	svc := &bootstrap.Service{Operations: ops, Publisher: pub, Registries: rigRegistries,
		VerifyAdmin: func(*http.Request, string) bool { return true }, Logger: quiet}
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	const n = 10
	ids := make([]string, n)
	coalesced := make([]bool, n)
	codes := make([]int, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/bootstrap", nil)
			req.Header.Set("Authorization", "Bearer admin")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			codes[i] = resp.StatusCode
			var out api.BootstrapAccepted
			_ = json.NewDecoder(resp.Body).Decode(&out)
			ids[i], coalesced[i] = out.Operation, out.Coalesced
		})
	}
	close(gate)
	wg.Wait()
	started := 0
	for i := range n {
		if codes[i] != http.StatusAccepted {
			t.Fatalf("request %d: %d", i, codes[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("two operations: %s and %s", ids[0], ids[i])
		}
		if !coalesced[i] {
			started++
		}
	}
	if started != 1 || len(pub.msgs) != len(rigRegistries) {
		t.Fatalf("%d requests started an operation, %d messages published; want 1 and %d", started, len(pub.msgs), len(rigRegistries))
	}
	st := invariant.Require(t, client, invariant.Options{Settled: true, Feed: true})
	if len(st.Operations) != 1 {
		t.Fatalf("%d operations stored, want 1", len(st.Operations))
	}
}
