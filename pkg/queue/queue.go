// Package queue is the reconcile fan-out over Pub/Sub: one message per
// registry per bootstrap. A message carries identity only (operation id
// and registry name), never a spec, a URL or a credential: the reconcile
// function re-reads everything else from its own configuration.
package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"

	"cloud.google.com/go/pubsub/v2"

	"github.com/specsync/specsync/pkg/failure"
)

// Message is the body of a reconcile message.
type Message struct {
	Operation string `json:"operation"`
	Registry  string `json:"registry"`
}

var (
	registryName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	operationID  = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,128}$`)
)

// Validate checks a message; a bad one is failure.Invalid (poison: drop it).
func (m Message) Validate() error {
	if !operationID.MatchString(m.Operation) {
		return failure.New(failure.Invalid, "reconcile message: operation %q is not an operation id", m.Operation)
	}
	if !registryName.MatchString(m.Registry) {
		return failure.New(failure.Invalid, "reconcile message: registry %q is not a registry name", m.Registry)
	}
	return nil
}

// Encode returns the message body.
func (m Message) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// Decode parses and validates a message body; anything wrong is
// failure.Invalid.
func Decode(data []byte) (Message, error) {
	var m Message
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Message{}, failure.New(failure.Invalid, "reconcile message: not a JSON message: %v", err)
	}
	return m, m.Validate()
}

// Publisher publishes reconcile messages to a topic.
type Publisher struct {
	pub *pubsub.Publisher
}

// NewPublisher publishes to topic (a topic id or full name) with client.
func NewPublisher(client *pubsub.Client, topic string) *Publisher {
	return &Publisher{pub: client.Publisher(topic)}
}

// Publish sends every message and waits for all of them; the error names
// each message that failed. Messages are independent: ones that went out
// are not recalled (their reconciles are harmless on their own).
func (p *Publisher) Publish(ctx context.Context, msgs []Message) error {
	results := make([]*pubsub.PublishResult, len(msgs))
	for i, m := range msgs {
		body, err := m.Encode()
		if err != nil {
			return err
		}
		results[i] = p.pub.Publish(ctx, &pubsub.Message{Data: body, Attributes: map[string]string{"operation": m.Operation, "registry": m.Registry}})
	}
	var failed []string
	var first error
	for i, r := range results {
		if _, err := r.Get(ctx); err != nil {
			failed = append(failed, msgs[i].Registry)
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		return failure.Annotate(first, "publish reconcile messages for registries %v", failed)
	}
	return nil
}

// Stop flushes and stops the publisher.
func (p *Publisher) Stop() { p.pub.Stop() }

// pushEnvelope is the data of a google.cloud.pubsub.topic.v1.messagePublished
// CloudEvent (and of a Pub/Sub push request body).
type pushEnvelope struct {
	Message struct {
		Data        []byte            `json:"data"` // base64 in JSON
		Attributes  map[string]string `json:"attributes"`
		MessageID   string            `json:"messageId"`
		PublishTime string            `json:"publishTime"`
	} `json:"message"`
	Subscription string `json:"subscription"`
}

// FromEvent decodes the CloudEvent data of a published message into a
// reconcile message and its Pub/Sub message id. Anything malformed is
// failure.Invalid: redelivering it cannot help.
func FromEvent(data []byte) (Message, string, error) {
	var env pushEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return Message{}, "", failure.New(failure.Invalid, "pubsub event: data is not a messagePublished envelope: %v", err)
	}
	if len(env.Message.Data) == 0 {
		return Message{}, env.Message.MessageID, failure.New(failure.Invalid, "pubsub event %s: message has no data", env.Message.MessageID)
	}
	m, err := Decode(env.Message.Data)
	return m, env.Message.MessageID, err
}
