package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/specsync/specsync/emulator/emulatortest"
)

// pushProbe is a push endpoint that records, per delivery, when it
// started and ended and how many deliveries were in flight at once.
type pushProbe struct {
	mu       sync.Mutex
	inFlight int
	maxIn    int
	order    []string
	hold     time.Duration
	fail     map[string]int // message data -> how many deliveries to refuse
	done     chan struct{}
	want     int
	acked    int
}

// pushedData is the data of the message a push request carries.
func pushedData(r *http.Request) string {
	body, _ := io.ReadAll(r.Body)
	var env struct {
		Message struct {
			Data []byte `json:"data"`
		} `json:"message"`
	}
	_ = json.Unmarshal(body, &env)
	return string(env.Message.Data)
}

func (p *pushProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data := pushedData(r)
	p.mu.Lock()
	p.inFlight++
	p.maxIn = max(p.maxIn, p.inFlight)
	p.order = append(p.order, data)
	refuse := p.fail[data] > 0
	if refuse {
		p.fail[data]--
	}
	p.mu.Unlock()
	time.Sleep(p.hold)
	p.mu.Lock()
	p.inFlight--
	if !refuse {
		p.acked++
		if p.acked == p.want {
			close(p.done)
		}
	}
	p.mu.Unlock()
	if refuse {
		http.Error(w, "refused", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// What the committer's serialization rests on, checked in the emulator:
// a push subscription with message ordering enabled pushes the messages
// of one ordering key one at a time, the next only after the previous
// push was acknowledged, in publish order, and a refused push is
// redelivered before the next message of its key goes out. (Without
// ordering the same emulator pushes them concurrently: the control case,
// so the test cannot pass by accident.)
func TestPubSubPushOrderingHoldsTheKey(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordering=%v", ordered), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			client, project := emulatortest.PubSub(t)
			const n = 5
			probe := &pushProbe{hold: 300 * time.Millisecond, fail: map[string]int{}, done: make(chan struct{}), want: n}
			if ordered {
				probe.fail["m1"] = 1 // refused once: must come again before m2
			}
			srv := httptest.NewServer(probe)
			defer srv.Close()
			topic := emulatortest.PushTopic(t, client, project, "commit", srv.URL, ordered, 10*time.Second)
			pub := client.Publisher(topic)
			pub.EnableMessageOrdering = true
			defer pub.Stop()
			var results []*pubsub.PublishResult
			for i := range n {
				results = append(results, pub.Publish(ctx, &pubsub.Message{Data: fmt.Appendf(nil, "m%d", i), OrderingKey: "catalog"}))
			}
			for _, r := range results {
				if _, err := r.Get(ctx); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-probe.done:
			case <-ctx.Done():
				t.Fatalf("only %d of %d messages acknowledged", probe.acked, n)
			}
			probe.mu.Lock()
			defer probe.mu.Unlock()
			t.Logf("ordering=%v: at most %d pushes in flight; deliveries %v", ordered, probe.maxIn, probe.order)
			if !ordered {
				if probe.maxIn < 2 {
					t.Fatalf("without ordering the emulator pushed one at a time too (%v): the ordered case proves nothing", probe.order)
				}
				return
			}
			if probe.maxIn != 1 {
				t.Fatalf("with ordering, %d pushes of one key were in flight at once", probe.maxIn)
			}
			want := []string{"m0", "m1", "m1", "m2", "m3", "m4"}
			if fmt.Sprint(probe.order) != fmt.Sprint(want) {
				t.Fatalf("deliveries %v, want %v (a refused push comes again before the next of its key)", probe.order, want)
			}
		})
	}
}

// Ordering is not a lock: a push still running when the subscription's
// ack deadline passes is delivered again, and the next messages of its
// key follow, while the first push still runs. So two commits can run at
// once (the committer's preconditions make that harmless), and the
// commit subscription's ack deadline is at least the function's timeout.
func TestPubSubPushOrderingIsNoLockPastTheAckDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	client, project := emulatortest.PubSub(t)
	const deadline = 10 * time.Second // the smallest ack deadline Pub/Sub accepts
	var mu sync.Mutex
	var order []string
	inFlight, maxIn := 0, 0
	firstDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data := pushedData(r)
		mu.Lock()
		first := len(order) == 0
		order = append(order, data)
		inFlight++
		maxIn = max(maxIn, inFlight)
		mu.Unlock()
		if first {
			time.Sleep(deadline + 3*time.Second)
			defer close(firstDone)
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	topic := emulatortest.PushTopic(t, client, project, "commit", srv.URL, true, deadline)
	pub := client.Publisher(topic)
	pub.EnableMessageOrdering = true
	defer pub.Stop()
	for i := range 2 {
		if _, err := pub.Publish(ctx, &pubsub.Message{Data: fmt.Appendf(nil, "m%d", i), OrderingKey: "catalog"}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-firstDone:
	case <-ctx.Done():
		t.Fatal("the first push never ended")
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("deliveries %v, at most %d in flight", order, maxIn)
	if maxIn < 2 || len(order) < 2 || order[1] != "m0" {
		t.Fatalf("deliveries %v, at most %d in flight: the emulator no longer redelivers past the ack deadline while the push runs (update the committer's notes)", order, maxIn)
	}
}
