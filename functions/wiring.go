package functions

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/idtoken"

	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/feed"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/settings"
	"github.com/specsync/specsync/pkg/store"
)

// The constructors below are what a cold start does; the local stack and
// the tests call them too, with their own environment.

// open is what every cold start shares: the logger and the store. The
// functions that need the registries file (bootstrap, reconcile) load it
// themselves with reconcile.LoadRegistries; the catalog never does.
func open(ctx context.Context, c settings.Common) (*slog.Logger, *store.Store, error) {
	log := logging.New(os.Stderr, c.LogLevel)
	st, err := store.Open(ctx, c.Project, c.Database)
	if err != nil {
		return nil, nil, err
	}
	return log, st, nil
}

// newBootstrap builds the bootstrap handler from env.
func newBootstrap(ctx context.Context, env settings.Lookup) (http.Handler, error) {
	s, err := settings.LoadBootstrap(env)
	if err != nil {
		return nil, err
	}
	regs, err := reconcile.LoadRegistries(s.RegistriesFile)
	if err != nil {
		return nil, err
	}
	log, st, err := open(ctx, s.Common)
	if err != nil {
		return nil, err
	}
	ps, err := pubsub.NewClient(ctx, s.Project)
	if err != nil {
		return nil, fmt.Errorf("connect to Pub/Sub project %s: %w", s.Project, err)
	}
	svc := &bootstrap.Service{
		Operations:  bootstrap.NewOperations(st, s.Deadline, s.Retention),
		Publisher:   queue.NewPublisher(ps, s.Topic),
		Registries:  regs.Names(),
		VerifyAdmin: verifyAdmin(s.Admin, log),
		Logger:      log,
	}
	// The bootstrap takes no body: one whose Content-Length is over the
	// broker's default limit is refused unread (413), as the catalog does.
	return osb.LimitBody(osb.DefaultMaxBodyBytes, svc.Handler()), nil
}

type reconcileApp struct {
	worker *bootstrap.Worker
}

func newReconcile(ctx context.Context, env settings.Lookup) (*reconcileApp, error) {
	s, err := settings.LoadReconcile(env)
	if err != nil {
		return nil, err
	}
	regs, err := reconcile.LoadRegistries(s.RegistriesFile)
	if err != nil {
		return nil, err
	}
	log, st, err := open(ctx, s.Common)
	if err != nil {
		return nil, err
	}
	ps, err := pubsub.NewClient(ctx, s.Project)
	if err != nil {
		return nil, fmt.Errorf("connect to Pub/Sub project %s: %w", s.Project, err)
	}
	commits := queue.NewCommitPublisher(ps, s.CommitTopic)
	committer := &reconcile.Committer{Store: st, Logger: log, Retention: s.ChangeRetention}
	if s.ChangesTopic != "" {
		committer.Publisher = feed.NewPublisher(ps, s.ChangesTopic)
	}
	return &reconcileApp{worker: &bootstrap.Worker{
		// The deadline only matters to Get's failing of stuck operations;
		// the reconcile side uses the same retention as bootstrap.
		Operations: bootstrap.NewOperations(st, 0, s.Retention),
		Runner:     &reconcile.Runner{Store: st, Logger: log, LeaseTTL: s.LeaseTTL, Commits: commits},
		Lookup:     regs.Lookup,
		Commits:    commits,
		Committer:  committer,
		Logger:     log,
		// Events coalesce: one run a cooldown at most per registry.
		EventCooldown:  s.EventCooldown,
		EventClockSkew: s.EventClockSkew,
	}}, nil
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
	b := osb.NewBroker(st, osb.Config{
		Username:       s.BrokerUsername,
		VerifyPassword: match(s.BrokerPassword, 0, log),
		VerifyAdmin:    verifyAdmin(s.Admin, log),
		MaxBodyBytes:   s.MaxBodyBytes,
		RefreshWindow:  s.RefreshWindow,
		MaxWait:        s.MaxWait,
		Logger:         log,
	})
	return b.Handler(), nil
}

// match is the check of a presented credential against c, whichever
// source it comes from; an unset c accepts nothing.
func match(c settings.Credential, minLen int, log *slog.Logger) func(string) bool {
	switch {
	case c.Value != "":
		return osb.MatchPlain(c.Value)
	case len(c.SHA256) > 0:
		return osb.MatchSHA256(c.SHA256...)
	case c.File != "":
		// Read on use, not at cold start: a volume whose secret has no
		// version yet must not fail the instance for good (the scheduler's
		// OIDC token works meanwhile), and a rotated version is picked up.
		return osb.MatchFile(c.File, minLen, osb.FileCredentialRefresh, log)
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
