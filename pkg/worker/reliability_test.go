package worker_test

// Pub/Sub and concurrency rows of the fault matrix (docs/RELIABILITY.md),
// through the real Pub/Sub and Firestore emulators: duplicate and
// out-of-order deliveries, redelivery after a crashed run's lease expired,
// a poison message, concurrent bootstraps. Each ends with the invariant
// checker.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/worker"
)

var rigRegistries = []string{"alpha", "beta", "gamma"}

// rig is a deployment in miniature: Firestore, a Pub/Sub topic with a
// pull subscription, the bootstrap service publishing to it and a worker
// consuming it the way the Reconcile function does; and the commit topic
// with its ordered subscription, consumed in the background by the same
// worker's HandleCommit.
type rig struct {
	t      *testing.T
	client *firestore.Client
	st     *store.Store
	ops    *bootstrap.Operations
	worker *worker.Worker
	ps     *pubsub.Client
	topic  string
	sub    string
	pub    *queue.Publisher
	srv    *httptest.Server
	// consumer statistics
	acked, nacked, dropped atomic.Int64
	// commit requests published and handled (acknowledged)
	commitsSent, commitsDone atomic.Int64
}

// countingCommits is the real commit publisher, counting what went out.
type countingCommits struct {
	pub  *queue.CommitPublisher
	sent *atomic.Int64
}

func (c countingCommits) RequestCommit(ctx context.Context, req queue.CommitRequest) error {
	if err := c.pub.RequestCommit(ctx, req); err != nil {
		return err
	}
	c.sent.Add(1)
	return nil
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	client := checked(t)
	st := store.New(client)
	regs := map[string]reconcile.Registry{}
	for i, name := range rigRegistries {
		fsys := fstest.MapFS{}
		for j := 0; j <= i; j++ {
			n := fmt.Sprintf("%s-svc-%d", name, j)
			fsys[n+".yaml"] = &fstest.MapFile{Data: []byte("name: " + n + "\ndescription: d\nplans:\n  - name: p\n    description: p\n")}
		}
		src, err := registry.NewDir(registry.DirConfig{FS: fsys, Root: "test:" + name})
		if err != nil {
			t.Fatal(err)
		}
		regs[name] = reconcile.Registry{Name: name, Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}}
	}
	ops := bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour)
	r := &rig{t: t, client: client, st: st, ops: ops}
	ps, project := emulatortest.PubSub(t)
	commitTopic := "projects/" + project + "/topics/commit"
	commitSub := "projects/" + project + "/subscriptions/commit"
	if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: commitTopic}); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: commitSub, Topic: commitTopic, AckDeadlineSeconds: 60, EnableMessageOrdering: true}); err != nil {
		t.Fatal(err)
	}
	commitPub := queue.NewCommitPublisher(ps, commitTopic)
	t.Cleanup(commitPub.Stop)
	commits := countingCommits{pub: commitPub, sent: &r.commitsSent}
	r.worker = &worker.Worker{
		Operations: ops,
		Runner:     &reconcile.Runner{Store: st, Logger: quiet, LeaseTTL: time.Minute, Commits: commits},
		Lookup:     func(n string) (reconcile.Registry, bool) { reg, ok := regs[n]; return reg, ok },
		Commits:    commits,
		Committer:  &reconcile.Committer{Store: st, Logger: quiet},
		Logger:     quiet,
	}
	r.ps = ps
	r.serveCommits(commitSub)
	r.topic = "projects/" + project + "/topics/reconcile"
	r.sub = "projects/" + project + "/subscriptions/reconcile"
	if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: r.topic}); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: r.sub, Topic: r.topic, AckDeadlineSeconds: 10}); err != nil {
		t.Fatal(err)
	}
	r.pub = queue.NewPublisher(ps, r.topic)
	t.Cleanup(r.pub.Stop)
	svc := &bootstrap.Service{Operations: ops, Publisher: r.pub, Registries: rigRegistries,
		VerifyAdmin: func(*http.Request, string) bool { return true }, Logger: quiet}
	r.srv = httptest.NewServer(svc.Handler())
	t.Cleanup(r.srv.Close)
	return r
}

// serveCommits consumes the commit subscription until the test ends, as
// the commit push subscription delivers to the Reconcile function.
func (r *rig) serveCommits(sub string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		_ = r.ps.Subscriber(sub).Receive(ctx, func(mctx context.Context, msg *pubsub.Message) {
			ev, err := queue.DecodeBody(msg.Data)
			if err != nil || ev.Commit == nil {
				r.t.Errorf("the commit subscription delivered %q (%v)", msg.Data, err)
				msg.Ack()
				return
			}
			if err := r.worker.HandleCommit(mctx, *ev.Commit); err != nil {
				msg.Nack()
				return
			}
			msg.Ack()
			r.commitsDone.Add(1)
		})
	}()
}

// waitCommits waits until every commit request sent so far was handled.
func (r *rig) waitCommits() {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for r.commitsDone.Load() < r.commitsSent.Load() {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d of %d commit requests handled", r.commitsDone.Load(), r.commitsSent.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bootstrap POSTs /bootstrap and returns the answer.
func (r *rig) bootstrap() api.BootstrapAccepted {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/bootstrap", nil)
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out api.BootstrapAccepted
	if resp.StatusCode != http.StatusAccepted || json.NewDecoder(resp.Body).Decode(&out) != nil {
		r.t.Fatalf("POST /bootstrap: %d", resp.StatusCode)
	}
	return out
}

// publishRaw publishes bodies as they are (duplicates, stale or poison
// messages).
func (r *rig) publishRaw(bodies ...[]byte) {
	r.t.Helper()
	ctx := context.Background()
	p := r.ps.Publisher(r.topic)
	defer p.Stop()
	var res []*pubsub.PublishResult
	for _, b := range bodies {
		res = append(res, p.Publish(ctx, &pubsub.Message{Data: b}))
	}
	for _, x := range res {
		if _, err := x.Get(ctx); err != nil {
			r.t.Fatal(err)
		}
	}
}

func encode(t *testing.T, op, reg string) []byte {
	t.Helper()
	b, err := queue.Message{Operation: op, Registry: reg}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// consume receives until done() holds after an ack, as the Reconcile
// function would: undecodable data is dropped (acked), a retryable error
// is nacked after a short pause (Pub/Sub's retry backoff), anything else
// acked.
func (r *rig) consume(timeout time.Duration, done func() bool) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var once sync.Once
	// done may come true without a reconcile message (an operation
	// finished by its commit): look now and then, too.
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if done() {
					once.Do(cancel)
				}
			}
		}
	}()
	err := r.ps.Subscriber(r.sub).Receive(ctx, func(mctx context.Context, msg *pubsub.Message) {
		m, err := queue.Decode(msg.Data)
		if err != nil {
			r.dropped.Add(1)
			msg.Ack()
		} else if err := r.worker.Handle(mctx, m); err != nil {
			if !failure.Retryable(err) {
				r.t.Errorf("the worker returned a permanent error (it must acknowledge those itself): %v", err)
			}
			r.nacked.Add(1)
			time.Sleep(100 * time.Millisecond)
			msg.Nack()
			return
		} else {
			msg.Ack()
		}
		r.acked.Add(1)
		if done() {
			once.Do(cancel)
		}
	})
	if err != nil && ctx.Err() == nil {
		r.t.Fatal(err)
	}
	if !done() {
		r.t.Fatalf("not done within %s (acked %d, nacked %d, dropped %d)", timeout, r.acked.Load(), r.nacked.Load(), r.dropped.Load())
	}
}

func (r *rig) op(id string) *api.Operation {
	r.t.Helper()
	op, err := r.ops.Get(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return op
}

func (r *rig) specCount() int {
	r.t.Helper()
	n := 0
	for _, name := range rigRegistries {
		recs, err := r.st.OwnedSpecs(context.Background(), name)
		if err != nil {
			r.t.Fatal(err)
		}
		n += len(recs)
	}
	return n
}

// Redelivery is harmless: every message of a bootstrap delivered three times, the
// copies in reverse order, a poison message and a message for an unknown
// operation among them; then a second bootstrap with the first one's
// messages arriving late. Each registry counts once per operation, the
// stale messages change nothing, nothing is lost.
func TestPubSubDuplicateAndOutOfOrderDeliveries(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	first := r.bootstrap()
	var extra [][]byte
	for range 2 {
		for i := len(rigRegistries) - 1; i >= 0; i-- {
			extra = append(extra, encode(t, first.Operation, rigRegistries[i]))
		}
	}
	extra = append(extra, []byte(`{"operation": "not json`), encode(t, "no-such-operation", "alpha"))
	r.publishRaw(extra...)
	total := int64(len(rigRegistries) + len(extra))
	r.consume(90*time.Second, func() bool { return r.acked.Load() >= total })
	r.waitCommits()
	op1 := r.op(first.Operation)
	if op1.State != api.Succeeded || len(op1.Results) != len(rigRegistries) {
		t.Fatalf("first operation %s: %s, %d results", op1.State, op1.Description, len(op1.Results))
	}
	if r.dropped.Load() != 1 {
		t.Fatalf("dropped %d undecodable messages, want the one poison message", r.dropped.Load())
	}
	if n := r.specCount(); n != 6 {
		t.Fatalf("%d specs stored, want 6", n)
	}
	snap := invariant.Require(t, r.client, invariant.Options{Settled: true, Feed: true})

	// The next bootstrap; the first one's messages arrive again, late.
	second := r.bootstrap()
	if second.Coalesced || second.Operation == first.Operation {
		t.Fatalf("a finished bootstrap was reused: %+v", second)
	}
	var stale [][]byte
	for _, reg := range rigRegistries {
		stale = append(stale, encode(t, first.Operation, reg))
	}
	r.publishRaw(stale...)
	r.acked.Store(0)
	total = int64(len(rigRegistries) + len(stale))
	r.consume(90*time.Second, func() bool { return r.acked.Load() >= total })
	r.waitCommits()
	op2 := r.op(second.Operation)
	if op2.State != api.Succeeded || len(op2.Results) != len(rigRegistries) {
		t.Fatalf("second operation %s: %s", op2.State, op2.Description)
	}
	for _, reg := range rigRegistries {
		if res := op2.Results[reg]; res.Counts.Created != 0 || res.Firestore.Writes > 1 {
			t.Fatalf("second bootstrap of an unchanged world, %s: %+v", reg, res)
		}
	}
	again := r.op(first.Operation)
	for _, reg := range rigRegistries {
		a, b := op1.Results[reg], again.Results[reg]
		if a.RunID != b.RunID || !a.ReportedAt.Equal(b.ReportedAt) {
			t.Fatalf("a stale message changed the first operation's result for %s: %+v -> %+v", reg, a, b)
		}
	}
	if n := r.specCount(); n != 6 {
		t.Fatalf("%d specs stored, want 6", n)
	}
	invariant.Require(t, r.client, invariant.Options{Settled: true, Feed: true, Previous: snap})
	t.Logf("acked %d, nacked (busy lease, retried) %d, dropped %d", r.acked.Load(), r.nacked.Load(), r.dropped.Load())
}

// A run that crashed holding a registry's lease: the message is nacked
// (retryable) until the lease expires, then a redelivery runs and the
// operation completes.
func TestPubSubRedeliveryAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	if err := r.st.AcquireLease(ctx, "beta", "crashed-run", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	start := r.bootstrap()
	r.consume(90*time.Second, func() bool { return r.op(start.Operation).State != api.InProgress })
	r.waitCommits()
	op := r.op(start.Operation)
	if op.State != api.Succeeded {
		t.Fatalf("operation %s: %s", op.State, op.Description)
	}
	if r.nacked.Load() == 0 {
		t.Fatal("the held lease never made a delivery retry: the test did not test the lease")
	}
	st, err := r.st.RegistryStatus(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if st.LastRun.ID != op.Results["beta"].RunID || st.LastRun.Result != api.ResultSucceeded {
		t.Fatalf("beta's status %+v does not record the redelivered run %s", st.LastRun, op.Results["beta"].RunID)
	}
	invariant.Require(t, r.client, invariant.Options{Settled: true, Feed: true})
	t.Logf("deliveries nacked while the crashed run's lease held: %d", r.nacked.Load())
}

// A poison message where a registry's message should be: it is dropped,
// never retried, and the operation fails at its deadline naming the
// registry that never reported.
func TestPubSubPoisonMessageFailsTheOperationWithAReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	clock := time.Now()
	var mu sync.Mutex
	r.ops.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	op, _, err := r.ops.Start(ctx, rigRegistries, false)
	if err != nil {
		t.Fatal(err)
	}
	r.publishRaw(encode(t, op.ID, "alpha"), encode(t, op.ID, "gamma"), []byte("\x00\x01poison{"+op.ID+":beta"))
	r.consume(60*time.Second, func() bool { return r.acked.Load() >= 3 })
	r.waitCommits()
	if r.dropped.Load() != 1 || r.nacked.Load() != 0 {
		t.Fatalf("dropped %d, nacked %d: the poison message must be dropped once, never retried", r.dropped.Load(), r.nacked.Load())
	}
	if got := r.op(op.ID); got.State != api.InProgress || len(got.Results) != 2 {
		t.Fatalf("before the deadline: %s %s", got.State, got.Description)
	}
	mu.Lock()
	clock = clock.Add(11 * time.Minute)
	mu.Unlock()
	got := r.op(op.ID)
	if got.State != api.Failed || !strings.Contains(got.Description, "beta") || strings.Contains(got.Description, "alpha") {
		t.Fatalf("after the deadline: %s %q, want failed naming beta only", got.State, got.Description)
	}
	invariant.Require(t, r.client, invariant.Options{Settled: true, Feed: true})
}

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
