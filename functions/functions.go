// Package functions holds specsync's Cloud Functions entry points. Each
// one decodes its trigger, calls pkg/, and encodes the answer; the
// clients it needs are built once per instance, and a cold start that
// cannot build them fails every call loudly with the reason instead of
// running with a nil client.
package functions

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/web"
)

// LogOutput is where the functions' JSON log lines go: stderr as the
// process started with it. (The local stack hands os.Stderr itself to a
// relay that turns what the functions framework prints raw into JSON
// lines; the functions' own lines must not go through it.)
var LogOutput io.Writer = os.Stderr

func init() {
	// Whatever logs through slog's default (and the standard log
	// package, which slog's default takes over) writes JSON lines too:
	// a line of plain text on stderr is one Cloud Logging cannot read,
	// and one an attacker's newline could follow with a forged one.
	slog.SetDefault(logging.New(LogOutput, os.Getenv("LOG_LEVEL"), logging.Project(os.Getenv("GOOGLE_CLOUD_PROJECT"))))
	functions.HTTP("Bootstrap", Bootstrap)
	functions.HTTP("Hooks", Hooks)
	functions.CloudEvent("Reconcile", Reconcile)
	functions.HTTP("Catalog", Catalog)
}

// once builds a value the first time it is needed and keeps the error
// with it: every later call sees the same failure.
type once[T any] struct {
	once sync.Once
	val  T
	err  error
}

func (o *once[T]) get(build func() (T, error)) (T, error) {
	o.once.Do(func() { o.val, o.err = build() })
	return o.val, o.err
}

var (
	bootstrapDeps once[http.Handler]
	hooksDeps     once[http.Handler]
	reconcileDeps once[*reconcileApp]
	catalogDeps   once[http.Handler]
)

func logger() *slog.Logger { return slog.Default() }

// coldStartFailed answers every request of an instance whose cold start
// failed, with the reason (configuration errors name variables, never
// values).
func coldStartFailed(w http.ResponseWriter, err error) {
	logger().Error("cold start failed", "error", err)
	web.WriteError(w, http.StatusServiceUnavailable, "ColdStartFailed", "the function is misconfigured: %s", err)
}

// Bootstrap serves POST /bootstrap and GET /bootstrap/last_operation.
func Bootstrap(w http.ResponseWriter, r *http.Request) {
	h, err := bootstrapDeps.get(func() (http.Handler, error) { return newBootstrap(context.Background(), os.LookupEnv) })
	if err != nil {
		coldStartFailed(w, err)
		return
	}
	h.ServeHTTP(w, r)
}

// Hooks serves the registries' webhooks: POST /hooks/{registry}.
func Hooks(w http.ResponseWriter, r *http.Request) {
	h, err := hooksDeps.get(func() (http.Handler, error) { return newHooks(context.Background(), os.LookupEnv) })
	if err != nil {
		coldStartFailed(w, err)
		return
	}
	h.ServeHTTP(w, r)
}

// Catalog serves the OSB API and GET /registries.
func Catalog(w http.ResponseWriter, r *http.Request) {
	h, err := catalogDeps.get(func() (http.Handler, error) { return newCatalog(context.Background(), os.LookupEnv) })
	if err != nil {
		coldStartFailed(w, err)
		return
	}
	h.ServeHTTP(w, r)
}

// Reconcile handles one google.cloud.pubsub.topic.v1.messagePublished
// event: a reconcile message (from the work topic's subscription), a
// commit request, which may carry a registry's report to its bootstrap
// (from the commit topic's ordered subscription, so reports are recorded
// one at a time), or an Artifact Registry notification (from the gcr
// topic's subscription), told apart by the message body. Returning an
// error makes Pub/Sub redeliver; nil acknowledges. The committer and the
// Artifact Registry events live here rather than in functions of their
// own: they need exactly what this function already has (Firestore, the
// worker, the changes topic, the operations), so a subscription more
// costs no function, service account or grants.
func Reconcile(ctx context.Context, e event.Event) error {
	app, err := reconcileDeps.get(func() (*reconcileApp, error) { return newReconcile(context.Background(), os.LookupEnv) })
	if err != nil {
		// Retrying cannot fix configuration, but acknowledging would lose
		// the message while the deployment is broken: let Pub/Sub retry
		// (and dead-letter) until it is fixed.
		logger().Error("cold start failed", "error", err)
		return redeliver(e, err)
	}
	if err := app.handle(ctx, e); err != nil {
		// The functions framework prints a returned error raw on stderr
		// (as a format string, too): text from upstream, or a message's,
		// could put a line of its choosing into the log. So the error is
		// logged here as a JSON field, and the framework gets a sentence
		// of ours.
		return redeliver(e, err)
	}
	return nil
}

// redeliver logs that the message goes back to Pub/Sub, and why, and
// returns the error that sends it back. The line is the contract one
// (logging.EventMessageRetry) the message retries metric reads: after
// max_delivery_attempts of these, Pub/Sub dead-letters the message.
func redeliver(e event.Event, err error) error {
	logger().Warn("the message will be redelivered", logging.FieldEvent, logging.EventMessageRetry,
		logging.FieldTopic, topicOf(e.Source()), "event_id", e.ID(), "error", err.Error())
	return errRedeliver
}

// topicOf is the topic's name in an event's source
// ("//pubsub.googleapis.com/projects/P/topics/T"): a bounded value.
func topicOf(source string) string {
	if _, t, ok := strings.Cut(source, "/topics/"); ok {
		return t
	}
	return source
}

// errRedeliver is what Reconcile returns for a message Pub/Sub should
// deliver again; the reason is in the log line before it.
var errRedeliver = errors.New("the message will be redelivered: the reason is in the log line before this one")
