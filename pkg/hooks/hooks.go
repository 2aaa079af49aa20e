// Package hooks turns what upstream registries say about themselves into
// reconcile messages: webhooks (POST /hooks/{registry} on the hooks
// function: a distribution registry's notification envelope, Harbor's
// artifact events, GitHub's package events, GitHub's and GitLab's Git
// pushes, a plain {"entries": [...]})
// and Artifact Registry's Pub/Sub notifications (Artifact, which the
// reconcile function calls with its worker, and Route). An event is a
// hint, never the truth: it names what to reconcile, and the run reads
// upstream's current state, so a replayed, duplicated or late event
// changes nothing a run would not.
//
// A webhook is authenticated per registry (the hook block of the
// registries file: a bearer secret or an HMAC-SHA256 signature), mapped
// through the registry's Selector to entry names (or, for a source that
// is no Selector, to the whole registry), and coalesced: a burst of
// events for one registry makes one message per window (coalesce.go).
package hooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/settings"
	"github.com/specsync/specsync/pkg/web"
)

// Publisher sends reconcile messages (queue.Publisher in production).
type Publisher interface {
	Publish(ctx context.Context, msgs []queue.Message) error
}

// Config configures the webhook endpoint.
type Config struct {
	// Registries are the configured registries; those with a Hook have a
	// webhook.
	Registries []Registry
	Publisher  Publisher
	// Window is the coalescing window (settings.DefaultHookWindow when
	// zero).
	Window time.Duration
	// MaxBodyBytes bounds a request body (web.DefaultMaxBodyBytes when
	// zero).
	MaxBodyBytes int64
	Logger       *slog.Logger
}

// Service serves the webhooks.
type Service struct {
	cfg       Config
	hooks     map[string]*hook
	coalescer *coalescer
}

// hook is a registry with a webhook.
type hook struct {
	Registry
	verifier *verifier
}

// New builds the webhook endpoint. No secret is read here: each is read
// when a request is checked.
func New(cfg Config) *Service {
	if cfg.Window <= 0 {
		cfg.Window = settings.DefaultHookWindow
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = web.DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, hooks: hooksOf(cfg.Registries, cfg.Logger), coalescer: newCoalescer(cfg.Window, cfg.Publisher)}
}

// With returns the webhook endpoint for regs, sharing s's settings and
// its coalescing (each registry's window and pending batch, by name):
// what a changed registries file makes, so that a burst across the
// change still makes one message a window, and a request waiting on a
// window is answered by the same publish.
func (s *Service) With(regs []Registry) *Service {
	cfg := s.cfg
	cfg.Registries = regs
	return &Service{cfg: cfg, hooks: hooksOf(regs, cfg.Logger), coalescer: s.coalescer}
}

// hooksOf returns the registries that have a webhook, by name.
func hooksOf(regs []Registry, log *slog.Logger) map[string]*hook {
	out := map[string]*hook{}
	for _, r := range regs {
		if r.Hook != nil {
			out[r.Name] = &hook{Registry: r, verifier: newVerifier(*r.Hook, log)}
		}
	}
	return out
}

// Handler routes POST /hooks/{registry}.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	// The query is checked in serve, once the request is authenticated.
	mux.Handle("/hooks/{registry}", web.MethodsOnly(map[string]http.HandlerFunc{http.MethodPost: s.serve}))
	mux.HandleFunc("/", web.NotFound)
	return mux
}

// serve handles one webhook: find the registry's hook, read the body
// (within the limit), check the secret or signature (before anything else
// about the request: a caller without it learns nothing of its query or
// payload), check the query, read the payload,
// map its events to entries, and answer once a published message carries
// them. Nothing is published for a request that fails any check.
func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	name := r.PathValue("registry")
	log := s.cfg.Logger.With("registry", name)
	h, ok := s.hooks[name]
	if !ok {
		// The same answer for a registry that is not configured and one
		// without a hook block: the endpoint is public, and tells nobody
		// which registries exist.
		web.WriteError(w, http.StatusNotFound, "NotFound", "no webhook for registry %q", name)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		// 413 past the limit, 408 for a body that stopped arriving, 400
		// for a broken one: the input contract every endpoint keeps.
		web.ReadBodyError(w, err, s.cfg.MaxBodyBytes)
		return
	}
	if err := h.verifier.verify(r, body); err != nil {
		log.WarnContext(r.Context(), "webhook refused", "reason", err, "remote", r.RemoteAddr)
		if h.Hook.Type == config.HookBearer {
			w.Header().Set("WWW-Authenticate", `Bearer realm="specsync-hooks"`)
		}
		if h.Hook.Type == config.HookBasic {
			w.Header().Set("WWW-Authenticate", `Basic realm="specsync-hooks"`)
		}
		web.WriteError(w, http.StatusUnauthorized, "Unauthorized", "webhook of registry %s: %s", name, err)
		return
	}
	if !web.CheckQuery(w, r) {
		return
	}
	kind, events, err := decodePayload(r.Header, body)
	if err != nil {
		code := "BadRequest"
		var pe errPayload
		if errors.As(err, &pe) {
			code = pe.code
		}
		log.InfoContext(r.Context(), "webhook payload refused", "error", err)
		web.WriteError(w, http.StatusBadRequest, code, "%s", err)
		return
	}
	req, tally := s.resolve(h, events, at)
	ans := api.HookAccepted{Registry: name, Kind: kind, Events: len(events), Entries: []string{}}
	if !req.whole && len(req.entries) == 0 {
		ans.Description = fmt.Sprintf("nothing enqueued: %s", tally)
		log.DebugContext(r.Context(), "webhook concerns nothing the registry selects", "kind", kind, "events", len(events), "tally", tally.String())
		web.WriteJSON(w, http.StatusAccepted, ans)
		return
	}
	res, err := s.coalescer.submit(r.Context(), name, req)
	if err != nil {
		log.ErrorContext(r.Context(), "webhook's reconcile message not published", "kind", kind, "error", err)
		web.WriteError(w, http.StatusServiceUnavailable, "PublishFailed", "the reconcile message for registry %s could not be published; send the event again: %v", name, err)
		return
	}
	ans.Enqueued, ans.WholeRegistry, ans.Coalesced = true, req.whole, res.coalesced
	if !req.whole {
		ans.Entries = req.entries
	}
	switch {
	case req.whole:
		ans.Description = fmt.Sprintf("the whole registry enqueued: %s", tally)
	default:
		ans.Description = fmt.Sprintf("%s enqueued: %s", api.Count(len(req.entries), "entry", "entries"), tally)
	}
	if res.coalesced {
		ans.Description += "; published with other requests' events at the end of the registry's window"
	}
	log.InfoContext(r.Context(), "webhook enqueued", "kind", kind, "events", len(events), "entries", len(ans.Entries), "whole_registry", req.whole, "coalesced", res.coalesced)
	web.WriteJSON(w, http.StatusAccepted, ans)
}

// tally counts what a request's events came to, for its answer.
type tally struct {
	selected, unselected int
	// referrers are the selected events that were a signature's push
	// (or another referrer's).
	referrers int
	whole     bool
	skipped   map[string]int
}

func (t tally) String() string {
	var parts []string
	if t.selected > 0 {
		parts = append(parts, api.Count(t.selected, "event", "events")+" for entries of the registry")
	}
	if t.referrers > 0 {
		parts = append(parts, fmt.Sprintf("%d of them a signature or another referrer pushed (its repository's entry is checked again)", t.referrers))
	}
	if t.whole {
		parts = append(parts, "the whole registry (its source names no entries from an event, or the payload asked for all of it)")
	}
	if t.unselected > 0 {
		parts = append(parts, api.Count(t.unselected, "event", "events")+" for nothing the registry selects (its host, prefix, repositories, allow, deny and tag decide)")
	}
	for _, why := range slices.Sorted(maps.Keys(t.skipped)) {
		parts = append(parts, fmt.Sprintf("%d ignored (%s)", t.skipped[why], why))
	}
	if len(parts) == 0 {
		return "the payload held no event"
	}
	return strings.Join(parts, ", ")
}

// resolve maps a request's events to what it asks to have reconciled.
func (s *Service) resolve(h *hook, events []event, at time.Time) (request, tally) {
	req := request{at: at}
	t := tally{skipped: map[string]int{}}
	sel, selector := h.Source.(registry.Selector)
	add := func(e string) {
		if !slices.Contains(req.entries, e) {
			req.entries = append(req.entries, e)
		}
	}
	for _, ev := range events {
		switch {
		case ev.skip != "":
			t.skipped[ev.skip]++
		case ev.push != nil:
			resolvePush(h.Source, *ev.push, &req, &t, add)
		case !selector || ev.whole:
			// A source that is no Selector takes any event as "reconcile
			// it now".
			req.whole, t.whole = true, true
		case len(ev.entries) > 0:
			// Named entries go through the registry's selection too: a
			// name its repository list, allow or deny leaves out is
			// never enqueued (nor reported as covered).
			es, canTell := h.Source.(registry.EntrySelector)
			for _, e := range ev.entries {
				if canTell && !es.SelectsEntry(e) {
					t.unselected++
					continue
				}
				t.selected++
				add(e)
			}
		case ev.change != nil:
			if e, ok := selectChange(sel, *ev.change); ok {
				t.selected++
				if referrer(*ev.change).Referrer {
					t.referrers++
				}
				add(e)
			} else {
				t.unselected++
			}
		}
	}
	slices.Sort(req.entries)
	return req, t
}
