// Package queue is specsync's work on Pub/Sub: the reconcile fan-out, one
// message per registry per bootstrap, and the commit requests that ask
// the one committer to number the pending catalog changes and carry the
// registries' reports to their operation. A message carries identity
// (operation id, registry name, run id) and, for a report, the result the
// operation records and shows to whoever polls it (counts, the run's
// error); never a spec or a credential: the reconcile function re-reads
// everything else from its own configuration and from Firestore.
package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
)

// Message is the body of a reconcile message: a bootstrap's (Operation
// set), or an event's (EventAt set: a registry said something changed, or
// a webhook asked for the registry to be reconciled now), which belongs to
// no bootstrap and reports to none.
type Message struct {
	Operation string `json:"operation,omitempty"`
	Registry  string `json:"registry"`
	// Entries, on an event's message, names the entries the events say
	// changed: the run fetches only those and never marks another (a
	// targeted run). Empty: the whole registry.
	Entries []string `json:"entries,omitempty"`
	// EventAt is when the newest event behind an event's message was
	// received: a run of the registry (of those entries) that started
	// after it has read what the event announced.
	EventAt time.Time `json:"event_at,omitzero"`
}

// MaxEntries bounds the entries one message names; a burst that names more
// is several messages.
const MaxEntries = 100

// MaxEntryBytes bounds an entry name (a repository path is at most 255
// characters in the distribution spec's common practice).
const MaxEntryBytes = 512

// Event reports whether the message is an event's, not a bootstrap's.
func (m Message) Event() bool { return m.Operation == "" }

var (
	operationID = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,128}$`)
	// Run ids are the runner's (UUIDs, or a test's names).
	runID = operationID
)

// Validate checks a message; a bad one is failure.Invalid (poison: drop it).
func (m Message) Validate() error {
	if !api.IsRegistryName(m.Registry) {
		return failure.New(failure.Invalid, "reconcile message: registry %q is not a registry name", m.Registry)
	}
	if !m.Event() {
		switch {
		case !operationID.MatchString(m.Operation):
			return failure.New(failure.Invalid, "reconcile message: operation %q is not an operation id", m.Operation)
		case !m.EventAt.IsZero() || len(m.Entries) > 0:
			return failure.New(failure.Invalid, "reconcile message: a bootstrap's message (operation %s) names no event or entries", m.Operation)
		}
		return nil
	}
	if m.EventAt.IsZero() {
		return failure.New(failure.Invalid, "reconcile message: neither an operation nor an event time")
	}
	if len(m.Entries) > MaxEntries {
		return failure.New(failure.Invalid, "reconcile message: %d entries, more than %d", len(m.Entries), MaxEntries)
	}
	for i, e := range m.Entries {
		switch {
		case e == "" || len(e) > MaxEntryBytes || !utf8.ValidString(e):
			return failure.New(failure.Invalid, "reconcile message: entries[%d] is not an entry name (empty, over %d bytes or not UTF-8)", i, MaxEntryBytes)
		case slices.Contains(m.Entries[:i], e):
			return failure.New(failure.Invalid, "reconcile message: entries[%d] %q is named twice", i, e)
		}
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

// Decode parses and validates a reconcile message body; anything wrong
// (a commit request too) is failure.Invalid.
func Decode(data []byte) (Message, error) {
	ev, err := DecodeBody(data)
	if err != nil {
		return Message{}, err
	}
	if ev.Reconcile == nil {
		return Message{}, failure.New(failure.Invalid, "reconcile message: a commit request, not a reconcile message")
	}
	return *ev.Reconcile, nil
}

// CommitRequest asks the committer to number every pending catalog
// change (of every registry, not only the asker's). Registry and Run say
// who asked, for the logs; Operation, when set, is a bootstrap whose
// registries have all reported: the committer finishes it once the
// changes are committed, with the revision they reached.
//
// With a Report, it is a registry's report to the bootstrap Operation
// instead: the committer records it, and commits and finishes the
// operation only if it was the last one. Reports ride the commit topic
// because its ordered subscription applies them one at a time: reports
// written by the runs themselves, all to the operation's one document,
// aborted each other when runs finished together.
type CommitRequest struct {
	Operation string `json:"operation,omitempty"`
	Registry  string `json:"registry,omitempty"`
	Run       string `json:"run,omitempty"`
	// EventAt, on the request of an event's run, is its message's
	// EventAt: once the run's changes are committed, the committer logs
	// how long they took from the event to the catalog
	// (logging.EventFreshness).
	EventAt time.Time `json:"event_at,omitzero"`
	// Report is Registry's result for Operation, as the operation
	// records it.
	Report *api.RegistryResult `json:"report,omitempty"`
}

// Validate checks a commit request; every field is optional, but a
// report needs the operation and the registry it is for.
func (c CommitRequest) Validate() error {
	switch {
	case c.Operation != "" && !operationID.MatchString(c.Operation):
		return failure.New(failure.Invalid, "commit request: operation %q is not an operation id", c.Operation)
	case c.Registry != "" && !api.IsRegistryName(c.Registry):
		return failure.New(failure.Invalid, "commit request: registry %q is not a registry name", c.Registry)
	case c.Run != "" && !runID.MatchString(c.Run):
		return failure.New(failure.Invalid, "commit request: run %q is not a run id", c.Run)
	case c.Report != nil && (c.Operation == "" || c.Registry == ""):
		return failure.New(failure.Invalid, "commit request: a report needs the operation and the registry it is for")
	}
	return nil
}

// Encode returns the request's body: {"commit": {...}}, which no
// reconcile message can be mistaken for.
func (c CommitRequest) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(body{Commit: &c})
}

// Event is a decoded message: exactly one of Reconcile, Commit and
// Artifact is set. Every kind reaches the reconcile function (from its
// own subscription), which dispatches on the body, so a message handled
// by the wrong code is impossible whatever subscription delivered it.
type Event struct {
	Reconcile *Message
	Commit    *CommitRequest
	// Artifact is Artifact Registry's notification (artifactregistry.go).
	Artifact *ArtifactEvent
	// Attributes are the Pub/Sub message's (FromEvent): among them the
	// traceparent of the trace that published it.
	Attributes map[string]string
}

// body is the union of the two message bodies.
type body struct {
	Operation string         `json:"operation,omitempty"`
	Registry  string         `json:"registry,omitempty"`
	Entries   []string       `json:"entries,omitempty"`
	EventAt   time.Time      `json:"event_at,omitzero"`
	Commit    *CommitRequest `json:"commit,omitempty"`
}

// DecodeBody parses and validates a message body of any kind; anything
// wrong is failure.Invalid (poison: drop it). A body with an action is
// Artifact Registry's; a bad one still comes back with Artifact set.
func DecodeBody(data []byte) (Event, error) {
	if isArtifactEvent(data) {
		return decodeArtifactEvent(data)
	}
	var b body
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return Event{}, failure.New(failure.Invalid, "message: not a JSON message: %v", err)
	}
	if b.Commit != nil {
		if b.Operation != "" || b.Registry != "" || len(b.Entries) > 0 || !b.EventAt.IsZero() {
			return Event{}, failure.New(failure.Invalid, "message: both a commit request and a reconcile message")
		}
		return Event{Commit: b.Commit}, b.Commit.Validate()
	}
	m := Message{Operation: b.Operation, Registry: b.Registry, Entries: b.Entries, EventAt: b.EventAt}
	return Event{Reconcile: &m}, m.Validate()
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
func (p *Publisher) Publish(ctx context.Context, msgs []Message) (err error) {
	ctx, end := publishSpan(ctx, "publish reconcile messages", len(msgs))
	defer func() { end(err) }()
	results := make([]*pubsub.PublishResult, len(msgs))
	for i, m := range msgs {
		body, err := m.Encode()
		if err != nil {
			return err
		}
		attrs := map[string]string{"registry": m.Registry}
		if m.Event() {
			attrs["kind"] = "event"
		} else {
			attrs["operation"] = m.Operation
		}
		carry(ctx, attrs)
		results[i] = p.pub.Publish(ctx, &pubsub.Message{Data: body, Attributes: attrs})
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
// reconcile message or a commit request, and its Pub/Sub message id.
// Anything malformed is failure.Invalid: redelivering it cannot help.
func FromEvent(data []byte) (Event, string, error) {
	var env pushEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return Event{}, "", failure.New(failure.Invalid, "pubsub event: data is not a messagePublished envelope: %v", err)
	}
	if len(env.Message.Data) == 0 {
		return Event{Attributes: env.Message.Attributes}, env.Message.MessageID, failure.New(failure.Invalid, "pubsub event %s: message has no data", env.Message.MessageID)
	}
	ev, err := DecodeBody(env.Message.Data)
	ev.Attributes = env.Message.Attributes
	return ev, env.Message.MessageID, err
}

// CommitOrderingKey puts every commit request on one ordered stream: a
// subscription with message ordering pushes them one at a time, each
// after the previous was acknowledged (until its ack deadline passes:
// ordering is not a lock, see ordering_test.go).
const CommitOrderingKey = "catalog"

// CommitPublisher publishes commit requests to the commit topic.
type CommitPublisher struct {
	pub *pubsub.Publisher
}

// NewCommitPublisher publishes to topic (an id or full name) with client.
func NewCommitPublisher(client *pubsub.Client, topic string) *CommitPublisher {
	p := client.Publisher(topic)
	p.EnableMessageOrdering = true
	return &CommitPublisher{pub: p}
}

// RequestCommit publishes one commit request and waits for it.
func (p *CommitPublisher) RequestCommit(ctx context.Context, req CommitRequest) (err error) {
	name := "request commit"
	if req.Report != nil {
		name = "publish report"
	}
	ctx, end := publishSpan(ctx, name, 1)
	defer func() { end(err) }()
	data, err := req.Encode()
	if err != nil {
		return err
	}
	attrs := map[string]string{"kind": "commit"}
	if req.Report != nil {
		attrs["kind"] = "report"
	}
	if req.Operation != "" {
		attrs["operation"] = req.Operation
	}
	if req.Registry != "" {
		attrs["registry"] = req.Registry
	}
	carry(ctx, attrs)
	r := p.pub.Publish(ctx, &pubsub.Message{Data: data, OrderingKey: CommitOrderingKey, Attributes: attrs})
	if _, err := r.Get(ctx); err != nil {
		// An ordered key stops after a failure until resumed; the caller
		// (or Pub/Sub's redelivery of what it was handling) asks again.
		p.pub.ResumePublish(CommitOrderingKey)
		return failure.Annotate(err, "publish a commit request")
	}
	return nil
}

// Stop flushes and stops the publisher.
func (p *CommitPublisher) Stop() { p.pub.Stop() }
