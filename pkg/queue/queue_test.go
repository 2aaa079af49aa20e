package queue_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/queue"
)

func TestDecode(t *testing.T) {
	good := `{"operation":"op-1","registry":"team-a"}`
	m, err := queue.Decode([]byte(good))
	if err != nil || m.Operation != "op-1" || m.Registry != "team-a" {
		t.Fatalf("decode: %+v %v", m, err)
	}
	for _, bad := range []string{``, `nope`, `{"operation":"op-1"}`, `{"operation":"","registry":"a"}`, `{"operation":"op","registry":"A_B"}`,
		`{"operation":"op","registry":"a","password":"x"}`} {
		if _, err := queue.Decode([]byte(bad)); !failure.Is(err, failure.Invalid) {
			t.Errorf("Decode(%q) = %v, want an invalid-input error", bad, err)
		}
	}
	if _, err := (queue.Message{Operation: "op"}).Encode(); !failure.Is(err, failure.Invalid) {
		t.Fatal("encoding a message without a registry must fail")
	}
}

func TestFromEvent(t *testing.T) {
	data := base64.StdEncoding.EncodeToString([]byte(`{"operation":"op-1","registry":"team-a"}`))
	env := fmt.Sprintf(`{"message":{"data":%q,"messageId":"42","attributes":{"registry":"team-a"}},"subscription":"projects/p/subscriptions/s"}`, data)
	ev, id, err := queue.FromEvent([]byte(env))
	if err != nil || id != "42" || ev.Commit != nil || ev.Reconcile == nil || ev.Reconcile.Registry != "team-a" {
		t.Fatalf("FromEvent: %+v %s %v", ev, id, err)
	}
	for _, bad := range []string{`{}`, `[]`, `{"message":{"data":"!!"}}`, `{"message":{"messageId":"1"}}`} {
		if _, _, err := queue.FromEvent([]byte(bad)); !failure.Is(err, failure.Invalid) {
			t.Errorf("FromEvent(%s) = %v, want invalid", bad, err)
		}
	}
}

// A commit request and a reconcile message cannot be mistaken for each
// other; a body that is neither, or both, is invalid.
func TestCommitRequestBody(t *testing.T) {
	req := queue.CommitRequest{Operation: "op-1", Registry: "team-a", Run: "3f2c"}
	b, err := req.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := queue.DecodeBody(b)
	if err != nil || ev.Reconcile != nil || ev.Commit == nil || *ev.Commit != req {
		t.Fatalf("commit request round trip: %s -> %+v %v", b, ev, err)
	}
	if _, err := queue.Decode(b); !failure.Is(err, failure.Invalid) {
		t.Fatalf("a commit request decoded as a reconcile message: %v", err)
	}
	if ev, err := queue.DecodeBody([]byte(`{"commit":{}}`)); err != nil || ev.Commit == nil {
		t.Fatalf("an empty commit request (every field is optional): %+v %v", ev, err)
	}
	for _, bad := range []string{`{"commit":{"operation":"a b"}}`, `{"commit":{"registry":"A_B"}}`, `{"commit":{"run":""},"registry":"a"}`,
		`{"commit":{"operation":"op","extra":1}}`, `{"commit":{"run":"r/1"}}`} {
		if _, err := queue.DecodeBody([]byte(bad)); !failure.Is(err, failure.Invalid) {
			t.Errorf("DecodeBody(%s) = %v, want an invalid-input error", bad, err)
		}
	}
	if _, err := (queue.CommitRequest{Registry: "Not A Name"}).Encode(); !failure.Is(err, failure.Invalid) {
		t.Fatal("encoding a commit request with a bad registry must fail")
	}
}

// A report rides a commit request: it round-trips whole, needs the
// operation and the registry it is for, and a report with a field no
// result has is invalid like any other unknown field.
func TestCommitRequestWithAReport(t *testing.T) {
	res := api.RegistryResult{State: api.Failed, Result: api.ResultFetchFailed, Counts: api.RunCounts{Created: 2, Changes: 2},
		Firestore: api.Counts{Reads: 3, Writes: 4}, Error: "fetch: 503", RunID: "run-1",
		Planned: []api.PlannedChange{{Change: api.PlannedCreate, SpecID: "a", Name: "a"}}}
	req := queue.CommitRequest{Operation: "op-1", Registry: "team-a", Run: "run-1", Report: &res}
	b, err := req.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := queue.DecodeBody(b)
	if err != nil || ev.Commit == nil || !reflect.DeepEqual(*ev.Commit, req) {
		t.Fatalf("report round trip: %s -> %+v %v", b, ev.Commit, err)
	}
	for _, bad := range []queue.CommitRequest{{Registry: "team-a", Report: &res}, {Operation: "op-1", Report: &res}} {
		if _, err := bad.Encode(); !failure.Is(err, failure.Invalid) {
			t.Errorf("%+v encoded: %v, want an invalid-input error", bad, err)
		}
	}
	for _, bad := range []string{`{"commit":{"registry":"a","report":{"state":"succeeded"}}}`,
		`{"commit":{"operation":"op","registry":"a","report":{"state":"succeeded","spec":"x"}}}`,
		`{"commit":{"operation":"op","registry":"a","report":"succeeded"}}`} {
		if _, err := queue.DecodeBody([]byte(bad)); !failure.Is(err, failure.Invalid) {
			t.Errorf("DecodeBody(%s) = %v, want an invalid-input error", bad, err)
		}
	}
}

// Commit requests go out on the commit ordering key, through the emulator.
func TestCommitPublisherThroughEmulator(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, project := emulatortest.PubSub(t)
	topic := "projects/" + project + "/topics/commit"
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	sub := "projects/" + project + "/subscriptions/pull"
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, EnableMessageOrdering: true}); err != nil {
		t.Fatal(err)
	}
	p := queue.NewCommitPublisher(client, topic)
	defer p.Stop()
	// An event run's request carries the event's time through Pub/Sub:
	// the committer's freshness line measures from it.
	want := queue.CommitRequest{Operation: "op-1", Registry: "a", Run: "run-1", EventAt: time.Date(2026, 12, 5, 10, 0, 0, 123456789, time.UTC)}
	if err := p.RequestCommit(ctx, want); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	var got queue.Event
	var key string
	err := client.Subscriber(sub).Receive(rctx, func(_ context.Context, msg *pubsub.Message) {
		got, _ = queue.DecodeBody(msg.Data)
		key = msg.OrderingKey
		msg.Ack()
		rcancel()
	})
	if err != nil && ctx.Err() != nil {
		t.Fatalf("receive: %v", err)
	}
	if got.Commit != nil && got.Commit.EventAt.Equal(want.EventAt) {
		got.Commit.EventAt = want.EventAt // the same instant, whatever its location
	}
	if got.Commit == nil || *got.Commit != want || key != queue.CommitOrderingKey {
		t.Fatalf("received %+v with ordering key %q", got, key)
	}
	missing := queue.NewCommitPublisher(client, "projects/"+project+"/topics/missing")
	defer missing.Stop()
	if err := missing.RequestCommit(ctx, want); err == nil {
		t.Fatal("publishing to a missing topic succeeded")
	}
	// The key resumed after the failure: the next request is not refused
	// for the one before (the topic is still missing, so it fails for that).
	if err := missing.RequestCommit(ctx, want); err == nil || errors.As(err, &pubsub.ErrPublishingPaused{}) {
		t.Fatalf("second request after a failure: %v", err)
	}
}

// Publish through the Pub/Sub emulator and read the messages back.
func TestPublishThroughEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, project := emulatortest.PubSub(t)
	topic := "projects/" + project + "/topics/reconcile"
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	sub := "projects/" + project + "/subscriptions/pull"
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic}); err != nil {
		t.Fatal(err)
	}
	p := queue.NewPublisher(client, topic)
	defer p.Stop()
	want := []queue.Message{{Operation: "op-1", Registry: "a"}, {Operation: "op-1", Registry: "b"}}
	if err := p.Publish(ctx, want); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	var mu sync.Mutex // Receive calls back from several goroutines
	rctx, rcancel := context.WithCancel(ctx)
	err := client.Subscriber(sub).Receive(rctx, func(_ context.Context, msg *pubsub.Message) {
		m, err := queue.Decode(msg.Data)
		mu.Lock()
		defer mu.Unlock()
		if err == nil && msg.Attributes["registry"] == m.Registry {
			got[m.Registry] = true
		}
		msg.Ack()
		if len(got) == len(want) {
			rcancel()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil && ctx.Err() != nil {
		t.Fatalf("receive: %v", err)
	}
	if !got["a"] || !got["b"] {
		t.Fatalf("received %v, want both registries", got)
	}
	// Publishing to a topic that does not exist fails with the registries named.
	missing := queue.NewPublisher(client, "projects/"+project+"/topics/missing")
	defer missing.Stop()
	if err := missing.Publish(ctx, want[:1]); err == nil {
		t.Fatal("publishing to a missing topic succeeded")
	}
}

// An event's message names a registry, when the event came and maybe
// entries; a bootstrap's names an operation and nothing of events.
func TestEventMessages(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 5, time.UTC)
	m := queue.Message{Registry: "team-a", Entries: []string{"redis", "db/postgres"}, EventAt: at}
	body, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := queue.Decode(body)
	if err != nil || !got.Event() || !got.EventAt.Equal(at) || !slices.Equal(got.Entries, m.Entries) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if strings.Contains(string(body), "operation") {
		t.Errorf("an event's body %s names an operation", body)
	}
	many := make([]string, queue.MaxEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf("e%d", i)
	}
	for name, bad := range map[string]queue.Message{
		"no operation, no event":        {Registry: "team-a"},
		"entries on a bootstrap's":      {Operation: "op-1", Registry: "team-a", Entries: []string{"x"}},
		"event time on a bootstrap's":   {Operation: "op-1", Registry: "team-a", EventAt: at},
		"an empty entry":                {Registry: "team-a", EventAt: at, Entries: []string{""}},
		"an entry twice":                {Registry: "team-a", EventAt: at, Entries: []string{"x", "x"}},
		"an entry not UTF-8":            {Registry: "team-a", EventAt: at, Entries: []string{"\xff"}},
		"more entries than one carries": {Registry: "team-a", EventAt: at, Entries: many},
	} {
		if _, err := bad.Encode(); !failure.Is(err, failure.Invalid) {
			t.Errorf("%s: Encode error %v, want Invalid", name, err)
		}
	}
	if _, err := queue.DecodeBody([]byte(`{"commit":{},"entries":["x"]}`)); !failure.Is(err, failure.Invalid) {
		t.Errorf("a commit request with entries: %v, want Invalid", err)
	}
}
