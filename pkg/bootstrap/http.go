package bootstrap

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/web"
)

// Publisher sends reconcile messages (queue.Publisher in production).
type Publisher interface {
	Publish(ctx context.Context, msgs []queue.Message) error
}

// Service is the bootstrap HTTP surface.
type Service struct {
	Operations *Operations
	Publisher  Publisher
	// Registries are the names of the configured registries.
	Registries []string
	// VerifyAdmin accepts admin bearer tokens.
	VerifyAdmin func(r *http.Request, token string) bool
	// RetryAfter is what clients are told to wait between polls.
	RetryAfter time.Duration
	Logger     *slog.Logger
}

// Handler routes POST /bootstrap and GET /bootstrap/last_operation.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	admin := func(h http.Handler) http.Handler { return web.AdminAuth(s.VerifyAdmin, h) }
	mux.Handle("/bootstrap", admin(web.Methods(map[string]http.HandlerFunc{http.MethodPost: s.start})))
	mux.Handle("/bootstrap/last_operation", admin(web.Methods(map[string]http.HandlerFunc{http.MethodGet: s.lastOperation})))
	mux.HandleFunc("/", web.NotFound)
	return mux
}

func (s *Service) retryAfter() string {
	d := s.RetryAfter
	if d <= 0 {
		d = 5 * time.Second
	}
	return strconv.Itoa(int((d + time.Second - 1) / time.Second))
}

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Service) start(w http.ResponseWriter, r *http.Request) {
	dryRun := false
	for k, v := range r.URL.Query() { // each given once (web.Methods)
		if k != "dry_run" {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "unknown query parameter %q (only dry_run is known)", k)
			return
		}
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			web.WriteError(w, http.StatusBadRequest, "BadRequest", "dry_run=%q is not true or false", v[0])
			return
		}
		dryRun = b
	}
	has, err := hasBody(r)
	if err != nil {
		// A body that did not arrive (the read deadline) or broke off is
		// not an empty one: nothing starts.
		web.ReadBodyError(w, err, web.DefaultMaxBodyBytes)
		return
	}
	if has {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "POST /bootstrap takes no body")
		return
	}
	op, started, err := s.Operations.Start(r.Context(), s.Registries, dryRun)
	if err != nil {
		web.WriteFailure(w, err)
		return
	}
	// The request's span (pkg/telemetry) says which operation it started
	// or joined: the operation id finds the bootstrap's trace.
	trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("specsync.operation", op.ID), attribute.Bool("specsync.coalesced", !started))
	if started {
		msgs := make([]queue.Message, len(op.Registries))
		for i, name := range op.Registries {
			msgs[i] = queue.Message{Operation: op.ID, Registry: name}
		}
		if err := s.Publisher.Publish(r.Context(), msgs); err != nil {
			desc := fmt.Sprintf("publishing the reconcile messages failed: %v", err)
			s.logger().ErrorContext(r.Context(), "bootstrap failed to publish", "operation", op.ID, "error", err)
			if ferr := s.Operations.Fail(context.WithoutCancel(r.Context()), op.ID, desc); ferr != nil {
				s.logger().ErrorContext(r.Context(), "could not mark the operation failed", "operation", op.ID, "error", ferr)
			} else {
				ended := *op
				ended.State, ended.Description = api.Failed, desc
				LogEnded(logging.WithContext(s.logger(), r.Context()), &ended, s.Operations.now())
			}
			web.WriteError(w, http.StatusServiceUnavailable, "PublishFailed", "bootstrap %s failed: %s", op.ID, desc)
			return
		}
		s.logger().InfoContext(r.Context(), "bootstrap started", "operation", op.ID, "registries", len(op.Registries))
	}
	w.Header().Set("Location", "/bootstrap/last_operation?operation="+url.QueryEscape(op.ID))
	w.Header().Set("Retry-After", s.retryAfter())
	web.WriteJSON(w, http.StatusAccepted, api.BootstrapAccepted{Operation: op.ID, Coalesced: !started, DryRun: op.DryRun})
}

func (s *Service) lastOperation(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("operation")
	if id == "" {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "the operation query parameter is required")
		return
	}
	if err := web.CheckID("operation", id); err != nil {
		web.WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
		return
	}
	op, err := s.Operations.Get(r.Context(), id)
	if failure.Is(err, failure.NotFound) {
		web.WriteError(w, http.StatusNotFound, "NotFound", "%s", web.Describe(err))
		return
	}
	if err != nil {
		web.WriteFailure(w, err)
		return
	}
	body := api.LastOperation{State: op.State, DryRun: op.DryRun, Description: op.Description, Operation: op.ID, Registries: op.Results,
		Pending: op.Pending(), CatalogRevision: op.CatalogRevision, StartedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt}
	if op.AwaitsCommit() {
		body.Committing = &op.Commit.Changes
	}
	if body.Registries == nil {
		body.Registries = map[string]api.RegistryResult{}
	}
	if op.State == api.InProgress {
		w.Header().Set("Retry-After", s.retryAfter())
	}
	web.WriteJSON(w, http.StatusOK, body)
}

// hasBody reports whether a request carries a body: a positive
// Content-Length, or, for a body of unknown length (chunked), a first
// byte. An empty chunked body is no body; one that could not be read
// (the client stalled past the server's read deadline, or broke the
// chunked encoding) is an error, never taken for no body.
func hasBody(r *http.Request) (bool, error) {
	if r.ContentLength >= 0 || r.Body == nil {
		return r.ContentLength > 0, nil
	}
	var b [1]byte
	n, err := io.ReadFull(r.Body, b[:])
	if n > 0 {
		return true, nil
	}
	if err == io.EOF {
		return false, nil
	}
	return false, err
}
