package feed_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/feed"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

func specJSON(t *testing.T, name string) string {
	t.Helper()
	s := &spec.Spec{Name: name, Description: "d", Plans: []spec.Plan{{Name: "small", Description: "p"}}}
	if err := spec.Validate(s); err != nil {
		t.Fatal(err)
	}
	spec.AssignIDs(s, "r1")
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFromChange(t *testing.T) {
	in := feed.FromChange(store.Change{Revision: 3, Kind: api.ChangeUpdated, SpecID: "id", Registry: "r1", Name: "db", SpecJSON: specJSON(t, "db"), Generation: 2})
	if in.Service == nil || in.Service.Name != "db" || in.Problem != "" {
		t.Fatalf("in-catalog change: %+v", in)
	}
	if mi := in.Service.Plans[0].MaintenanceInfo; mi == nil || mi.Version != "2.0.0" {
		t.Fatalf("maintenance_info %+v, want version 2.0.0", mi)
	}
	out := feed.FromChange(store.Change{Revision: 4, Kind: api.ChangeMarked, SpecID: "id", Registry: "r1", Name: "db"})
	if out.Service != nil || out.Kind != api.ChangeMarked {
		t.Fatalf("marked change: %+v", out)
	}
	b, _ := json.Marshal(out)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if _, ok := m["service"]; ok {
		t.Fatalf("a change out of the catalog encodes a service: %s", b)
	}
	bad := feed.FromChange(store.Change{Revision: 5, Kind: api.ChangeCreated, SpecID: "id", Name: "db", SpecJSON: "{not json"})
	if bad.Service != nil || bad.Problem == "" {
		t.Fatalf("undecodable spec: %+v", bad)
	}
}

// Published changes arrive with their revision attribute, in order, with
// the same JSON the HTTP feed serves.
func TestPublisherThroughEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, project := emulatortest.PubSub(t)
	topic := "projects/" + project + "/topics/changes"
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	sub := "projects/" + project + "/subscriptions/tail"
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, EnableMessageOrdering: true}); err != nil {
		t.Fatal(err)
	}
	p := feed.NewPublisher(client, topic)
	defer p.Stop()
	var changes []store.Change
	for i := int64(1); i <= 5; i++ {
		changes = append(changes, store.Change{Revision: i, Kind: api.ChangeCreated, SpecID: "id" + strconv.FormatInt(i, 10), Registry: "r1", Name: "db", SpecJSON: specJSON(t, "db")})
	}
	if err := p.PublishChanges(ctx, changes); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int64
	rctx, rcancel := context.WithCancel(ctx)
	err := client.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		var it api.Change
		if err := json.Unmarshal(m.Data, &it); err != nil {
			t.Errorf("data is not an item: %v", err)
		}
		rev, _ := strconv.ParseInt(m.Attributes["revision"], 10, 64)
		mu.Lock()
		if rev == it.Revision && it.Service != nil && m.Attributes["kind"] == string(api.ChangeCreated) && m.Attributes["service_id"] == it.ServiceID {
			order = append(order, rev)
		}
		n := len(order)
		mu.Unlock()
		m.Ack()
		if n == len(changes) {
			rcancel()
		}
	})
	if err != nil && ctx.Err() != nil {
		t.Fatalf("receive: %v", err)
	}
	for i, r := range order {
		if r != int64(i+1) {
			t.Fatalf("received revisions %v, want 1..5 in order", order)
		}
	}
	if len(order) != len(changes) {
		t.Fatalf("received %v", order)
	}
	missing := feed.NewPublisher(client, "projects/"+project+"/topics/missing")
	defer missing.Stop()
	if err := missing.PublishChanges(ctx, changes[:1]); err == nil {
		t.Fatal("publishing to a missing topic succeeded")
	}
}
