package functions

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"cloud.google.com/go/pubsub/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"google.golang.org/api/idtoken"

	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/config/gcs"
	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/feed"
	"github.com/specsync/specsync/pkg/hooks"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	// Auth type google's access tokens: the function's service account.
	_ "github.com/specsync/specsync/pkg/registry/gcpauth"
	"github.com/specsync/specsync/pkg/settings"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/telemetry"
	// Signature verification of registries with a verify block: without
	// it, their fetches fail (registry.ErrVerifierNotLinked).
	_ "github.com/specsync/specsync/pkg/verify"
	"github.com/specsync/specsync/pkg/web"
	"github.com/specsync/specsync/pkg/worker"
)

// The constructors below are what a cold start does; the local stack and
// the tests call them too, with their own environment.

// setup is what every cold start shares: the logger and tracing.
func setup(ctx context.Context, r settings.Runtime) (*slog.Logger, error) {
	log := logging.New(LogOutput, r.LogLevel, logging.Project(r.Project))
	if err := telemetry.Setup(ctx, telemetry.Config{Exporter: r.Tracing.Exporter, SampleRatio: r.Tracing.SampleRatio, Project: r.Project,
		Endpoint: r.Tracing.OTLPEndpoint, Protocol: r.Tracing.OTLPProtocol, Logger: log}); err != nil {
		return nil, err
	}
	return log, nil
}

// open is setup and the store: what every function but the hooks
// function needs. The functions that need the registries file
// (bootstrap, hooks, reconcile) load it themselves; the catalog never
// does.
func open(ctx context.Context, c settings.Common) (*slog.Logger, *store.Store, error) {
	log, err := setup(ctx, c.Runtime)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, c.Project, c.Database)
	if err != nil {
		return nil, nil, err
	}
	return log, st, nil
}

// newBootstrap builds the bootstrap handler from env: POST /bootstrap
// and its last_operation.
func newBootstrap(ctx context.Context, env settings.Lookup) (http.Handler, error) {
	s, err := settings.LoadBootstrap(env)
	if err != nil {
		return nil, err
	}
	log, st, err := open(ctx, s.Common)
	if err != nil {
		return nil, err
	}
	src, ps, err := registriesAndPubSub(ctx, s.RegistriesFile, s.Project, log)
	if err != nil {
		return nil, err
	}
	admin := verifyAdmin(s.Admin, log)
	base := bootstrap.Service{
		Operations:  bootstrap.NewOperations(st, s.Deadline, s.Retention),
		Publisher:   queue.NewPublisher(ps, s.Topic),
		VerifyAdmin: admin,
		Logger:      log,
	}
	// The registries a bootstrap fans out to are the file's current ones:
	// a Service (its clients shared) for each configuration.
	services := config.Derive(src, func(c *config.Config) http.Handler {
		svc := base
		svc.Registries = c.Names()
		return svc.Handler()
	})
	// The bootstrap takes no body: one whose Content-Length is over the
	// broker's default limit is refused unread (413), as the catalog does.
	// Every request is a server span; a bootstrap the admin asked for is
	// kept whatever the sampling ratio, and with it everything its
	// messages start.
	return telemetry.Handler("bootstrap", web.LimitBody(web.DefaultMaxBodyBytes, current(services)), adminBootstrap(admin)), nil
}

// registries opens the registries file SPECSYNC_REGISTRIES names: a path,
// read once, or a config bundle in Cloud Storage (gs://BUCKET/OBJECT),
// read again when it changes (config.Source; a storage client is made
// only for an object).
func registries(ctx context.Context, location string, log *slog.Logger) (*config.Source, error) {
	return config.LoadSource(ctx, location, config.SourceOptions{OpenObject: gcs.Open, Interval: registriesRefresh, Logger: log})
}

// registriesAndPubSub opens the registries file (registries) and a
// Pub/Sub client for project: what the bootstrap, hooks and reconcile
// functions all start from.
func registriesAndPubSub(ctx context.Context, location, project string, log *slog.Logger) (*config.Source, *pubsub.Client, error) {
	src, err := registries(ctx, location, log)
	if err != nil {
		return nil, nil, err
	}
	ps, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to Pub/Sub project %s: %w", project, err)
	}
	return src, ps, nil
}

// registriesRefresh is how often an instance checks a config bundle for a
// change (config.RefreshInterval); tests shorten it.
var registriesRefresh = config.RefreshInterval

// current serves each request with the handler for the configuration
// current when it comes.
func current(h *config.Derived[http.Handler]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Current(r.Context()).ServeHTTP(w, r) })
}

// newHooks builds the hooks handler from env: the registries' webhooks
// (POST /hooks/{registry}), which publish reconcile messages to the
// bootstrap's topic. It is a function of its own because it is public
// (a registry must reach it without a Google identity) while the
// bootstrap is not, and it opens no Firestore: each request is checked
// against its own registry's hook secret, and all it can do is publish.
func newHooks(ctx context.Context, env settings.Lookup) (http.Handler, error) {
	s, err := settings.LoadHooks(env)
	if err != nil {
		return nil, err
	}
	log, err := setup(ctx, s.Runtime)
	if err != nil {
		return nil, err
	}
	src, ps, err := registriesAndPubSub(ctx, s.RegistriesFile, s.Project, log)
	if err != nil {
		return nil, err
	}
	// Each webhook authenticates with its own registry's secret, not the
	// admin token: a registry can notify, and nothing more. The hook
	// blocks and selections are the file's current ones; the windows
	// carry over a change.
	base := hooks.New(hooks.Config{Publisher: queue.NewPublisher(ps, s.Topic), Window: s.Window, Logger: log})
	webhooks := config.Derive(src, func(c *config.Config) http.Handler { return base.With(hooks.FromConfig(c)).Handler() })
	// A webhook's body is held to the broker's default limit: one whose
	// Content-Length is over it is refused unread (413).
	return telemetry.Handler("hooks", web.LimitBody(web.DefaultMaxBodyBytes, current(webhooks)), nil), nil
}

// adminBootstrap says a request starts a bootstrap and carries the
// admin's credential (the scheduler's token or an operator's). Its
// credential is checked here, before the span starts, because that is
// when the span is kept or not: anyone's POST /bootstrap kept would let
// anyone have a trace exported and flushed at will.
func adminBootstrap(verify func(*http.Request, string) bool) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Path == "/bootstrap" && web.IsAdmin(r, verify)
	}
}

type reconcileApp struct {
	// registries are the worker and routes of the registries file's
	// current configuration.
	registries *config.Derived[*configured]
	log        *slog.Logger
}

// configured is what the reconcile function makes of a configuration.
type configured struct {
	// worker finds the registries a run reads in it.
	worker *worker.Worker
	// routes are the registries an Artifact Registry notification may
	// concern (those whose source is a registry.Selector).
	routes []hooks.Registry
}

func newReconcile(ctx context.Context, env settings.Lookup) (*reconcileApp, error) {
	s, err := settings.LoadReconcile(env)
	if err != nil {
		return nil, err
	}
	log, st, err := open(ctx, s.Common)
	if err != nil {
		return nil, err
	}
	src, ps, err := registriesAndPubSub(ctx, s.RegistriesFile, s.Project, log)
	if err != nil {
		return nil, err
	}
	commits := queue.NewCommitPublisher(ps, s.CommitTopic)
	committer := &reconcile.Committer{Store: st, Logger: log, Retention: s.ChangeRetention}
	if s.ChangesTopic != "" {
		committer.Publisher = feed.NewPublisher(ps, s.ChangesTopic)
	}
	base := worker.Worker{
		// The deadline only matters to Get's failing of stuck operations;
		// the reconcile side uses the same retention as bootstrap.
		Operations: bootstrap.NewOperations(st, 0, s.Retention),
		Runner:     &reconcile.Runner{Store: st, Logger: log, LeaseTTL: s.LeaseTTL, Commits: commits},
		Commits:    commits,
		Committer:  committer,
		Logger:     log,
		// Events coalesce: one run a cooldown at most per registry.
		EventCooldown:  s.EventCooldown,
		EventClockSkew: s.EventClockSkew,
	}
	// A run reads a registry as the file's current configuration has it:
	// a Worker (its clients shared) and routes for each configuration.
	return &reconcileApp{log: log, registries: config.Derive(src, func(c *config.Config) *configured {
		regs := reconcile.FromConfig(c)
		w := base
		w.Lookup = regs.Lookup
		routes := make([]hooks.Registry, len(regs))
		for i, r := range regs {
			routes[i] = hooks.Registry{Name: r.Name, Source: r.Source}
		}
		return &configured{worker: &w, routes: routes}
	})}, nil
}

// handle dispatches one message on its body: a reconcile message or a
// commit request to the worker, an Artifact Registry notification to
// hooks.Artifact (which runs it through the worker for every registry it
// concerns). Returning an error makes Pub/Sub redeliver; nil
// acknowledges.
func (a *reconcileApp) handle(ctx context.Context, e event.Event) (err error) {
	ev, id, err := queue.FromEvent(e.Data())
	ctx, span := messageSpan(ctx, ev, id)
	cur := a.registries.Current(ctx)
	defer func() {
		endMessageSpan(span, err)
		// A kept trace's spans leave before the function returns (the
		// CPU is throttled once it has); a trace not kept has none.
		if span.SpanContext().IsSampled() {
			telemetry.Flush(ctx)
		}
	}()
	switch {
	case ev.Artifact != nil:
		return hooks.Artifact(ctx, a.log.With("message_id", id), *ev.Artifact, err, cur.routes, e.Time(), cur.worker.Handle)
	case err != nil && strings.HasSuffix(e.Source(), "/topics/"+queue.ArtifactRegistryTopic):
		// Whatever else is published on the gcr topic is not ours.
		a.log.DebugContext(ctx, "ignoring a message on the gcr topic that is not an Artifact Registry event", "message_id", id, "error", err)
		return nil
	case err != nil:
		a.log.ErrorContext(ctx, "dropping an undecodable event", "event_id", e.ID(), "message_id", id, "error", err)
		return nil
	case ev.Commit != nil:
		return cur.worker.HandleCommit(ctx, *ev.Commit)
	}
	return cur.worker.Handle(ctx, *ev.Reconcile)
}

func newCatalog(ctx context.Context, env settings.Lookup) (http.Handler, error) {
	s, err := settings.LoadCatalog(env)
	if err != nil {
		return nil, err
	}
	log, st, err := open(ctx, s.Common)
	if err != nil {
		return nil, err
	}
	views, err := brokerViews(s.BrokerViews, env, log)
	if err != nil {
		return nil, err
	}
	b := osb.NewBroker(st, osb.Config{
		Username:       s.BrokerUsername,
		VerifyPassword: match(s.BrokerPassword, 0, log),
		Views:          views,
		VerifyAdmin:    verifyAdmin(s.Admin, log),
		MaxBodyBytes:   s.MaxBodyBytes,
		RefreshWindow:  s.RefreshWindow,
		MaxWait:        s.MaxWait,
		Logger:         log,
		DashboardURL:   s.DashboardURL,
	})
	b.Cache.MaxBytes = s.MaxCatalogBytes // SPECSYNC_CATALOG_MAX_BYTES: a catalog over it is refused, never cut
	return telemetry.Handler("catalog", b.Handler(), nil), nil
}

// brokerViews builds the broker's views from SPECSYNC_BROKER_VIEWS
// (none when it is unset: the default view of the broker's own
// credential), each password read as the broker's own is.
func brokerViews(value string, env settings.Lookup, log *slog.Logger) ([]osb.View, error) {
	if value == "" {
		return nil, nil
	}
	f, err := config.ReadViews(value)
	if err != nil {
		return nil, failure.Wrap(failure.Invalid, err)
	}
	out := make([]osb.View, 0, len(f.Views))
	for i := range f.Views {
		v := &f.Views[i]
		cred, err := settings.ReadCredential(env, v.PasswordEnv)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", v.Name, err)
		}
		ov := osb.View{Name: v.Name, Username: v.Username, Password: match(cred, 0, log), Tag: v.Digest(), Rules: v.Describe()}
		if !v.All() {
			ov.Match = func(s osb.ServiceFacts) bool { return v.Allows(s.Registry, s.Name, s.Tags, s.AnyTags) }
		}
		out = append(out, ov)
	}
	return out, nil
}

// match is the check of a presented credential against c, whichever
// source it comes from; an unset c accepts nothing.
func match(c settings.Credential, minLen int, log *slog.Logger) func(string) bool {
	switch {
	case c.Value != "":
		return web.MatchPlain(c.Value)
	case len(c.SHA256) > 0:
		return web.MatchSHA256(c.SHA256...)
	case c.File != "":
		// Read on use, not at cold start: a volume whose secret has no
		// version yet must not fail the instance for good (the scheduler's
		// OIDC token works meanwhile), and a rotated version is picked up.
		return web.MatchFile(c.File, minLen, web.FileCredentialRefresh, log)
	}
	return func(string) bool { return false }
}

// verifyAdmin accepts the shared admin token and, when configured, the
// Google-signed identity token Cloud Scheduler attaches to its calls.
func verifyAdmin(a settings.Admin, log *slog.Logger) func(*http.Request, string) bool {
	static := match(a.Token, settings.AdminTokenMinLength, log)
	return func(r *http.Request, token string) bool {
		if a.Token.IsSet() && static(token) {
			return true
		}
		if a.SchedulerAudience == "" {
			return false
		}
		p, err := idtoken.Validate(r.Context(), token, a.SchedulerAudience)
		if err != nil {
			return false
		}
		email, _ := p.Claims["email"].(string)
		verified, _ := p.Claims["email_verified"].(bool)
		return verified && email == a.SchedulerServiceAccount
	}
}
