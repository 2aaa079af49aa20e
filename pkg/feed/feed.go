// Package feed is the catalog change feed as clients see it: a committed
// store.Change rendered as an api.Change, the same JSON over HTTP
// (GET /v2/catalog/changes) and on the changes Pub/Sub topic.
//
// A change carries the whole new state of one service: Service when the
// service is in the catalog after the change, nothing when it left it. A
// watcher applies a change by putting Service under ServiceID, or removing
// ServiceID when Service is absent; applying a change twice is harmless,
// which is what makes list-then-watch exact: list /v2/catalog (its
// X-Catalog-Revision header is R), then follow the feed from R.
package feed

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"cloud.google.com/go/pubsub/v2"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// FromChange renders a committed change.
func FromChange(c store.Change) api.Change {
	it := api.Change{Revision: c.Revision, Kind: c.Kind, ServiceID: c.SpecID, Registry: c.Registry, Name: c.Name, At: c.At,
		HeldBack: (*api.HeldBackSpec)(c.HeldBack)}
	if !c.InCatalog() {
		return it
	}
	var s spec.Spec
	if err := json.Unmarshal([]byte(c.SpecJSON), &s); err != nil {
		it.Problem = fmt.Sprintf("stored spec does not decode: %v", err)
		return it
	}
	svc, err := catalog.RenderService(catalog.Offering{Spec: &s, Generation: c.Generation})
	if err != nil {
		// The catalog leaves such a spec out too.
		it.Problem = err.Error()
		return it
	}
	it.Service = &svc
	return it
}

// Publisher publishes committed changes to a Pub/Sub topic: the data is
// the api.Change's JSON, the attributes its revision, kind, service id and
// registry. Delivery is at least once and, with an ordering-enabled
// subscription, in revision order; subscribers dedupe by revision.
type Publisher struct {
	pub *pubsub.Publisher
}

// orderingKey puts every change on one ordered stream.
const orderingKey = "catalog"

// NewPublisher publishes to topic (an id or full name) with client.
func NewPublisher(client *pubsub.Client, topic string) *Publisher {
	p := client.Publisher(topic)
	p.EnableMessageOrdering = true
	return &Publisher{pub: p}
}

// PublishChanges publishes changes in order and waits for all of them.
func (p *Publisher) PublishChanges(ctx context.Context, changes []store.Change) error {
	results := make([]*pubsub.PublishResult, len(changes))
	for i, c := range changes {
		it := FromChange(c)
		body, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("encode change %d: %w", c.Revision, err)
		}
		results[i] = p.pub.Publish(ctx, &pubsub.Message{
			Data:        body,
			OrderingKey: orderingKey,
			Attributes: map[string]string{
				"revision": strconv.FormatInt(c.Revision, 10), "kind": string(c.Kind),
				"service_id": c.SpecID, "registry": c.Registry,
			},
		})
	}
	for i, r := range results {
		if _, err := r.Get(ctx); err != nil {
			// An ordered key stops after a failure until resumed; the
			// changes are published again from the first one not marked.
			p.pub.ResumePublish(orderingKey)
			return fmt.Errorf("publish change %d: %w", changes[i].Revision, err)
		}
	}
	return nil
}

// Stop flushes and stops the publisher.
func (p *Publisher) Stop() { p.pub.Stop() }
