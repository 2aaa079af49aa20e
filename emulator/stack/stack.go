// Package stack runs specsync locally exactly as production wires it:
// the bootstrap publishes to the Pub/Sub emulator, a push subscription
// delivers to the reconcile function through functions-framework-go (which
// turns the push body into the CloudEvent production delivers), and the
// catalog reads what reconcile wrote in the Firestore emulator. Every
// function is served by one process on one port.
//
// The functions build their clients from the environment once per
// process, so a process runs one stack; tests start the stack as a
// subprocess (specsync-local run) per scenario.
package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/functions"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/hooks"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// Defaults of a local stack; the credentials are for a laptop only.
const (
	DefaultProject    = "specsync-local"
	DefaultTopic      = "specsync-reconcile"
	DefaultAdminToken = "local-admin-token-change-me"
	DefaultBrokerUser = "specsync"
	DefaultBrokerPass = "local-broker-password"
	// DefaultChangesTopic receives every committed catalog change.
	DefaultChangesTopic = "specsync-catalog-changes"
	// DefaultCommitTopic carries the commit requests to the committer.
	DefaultCommitTopic = "specsync-commit"
	// DefaultPruneInterval is how often expired changes are deleted.
	DefaultPruneInterval = time.Minute
	// DefaultHookSecret is the secret of the example registry's webhook,
	// which the local registry's notifications carry (SPECSYNC_LOCAL_HOOK_SECRET).
	DefaultHookSecret = "local-hook-secret-change-me"
)

// Options configure a stack. Zero values take the defaults above; every
// field can also come from the environment variable the functions read.
type Options struct {
	Addr string // listen address, default 127.0.0.1:$PORT or :8080
	// RegistryAddr is the local OCI registry's listen address (default
	// 127.0.0.1:0, a free port; `specsync-local run` listens on a fixed
	// one, so that `specsync-local push` finds it).
	RegistryAddr   string
	RegistriesFile string // SPECSYNC_REGISTRIES, default examples/registries.yaml
	// SpecsDir holds the spec files the local OCI registry serves, read
	// again before every bootstrap (SPECSYNC_LOCAL_SPECS; default
	// DefaultSpecsDir when the working directory has it, else the example
	// specs built into the binary).
	SpecsDir string
	// BootstrapInterval, when set, bootstraps periodically (standing in
	// for Cloud Scheduler).
	BootstrapInterval time.Duration
	// Timeouts bound slow clients (zero fields take DefaultTimeouts').
	Timeouts Timeouts
	// PruneInterval is how often expired change records are deleted
	// (default DefaultPruneInterval; SPECSYNC_CHANGE_RETENTION sets how
	// long they live).
	PruneInterval time.Duration
	// PushAddr is the loopback address of the push endpoint, where the
	// Pub/Sub emulator delivers to the reconcile function (default
	// SPECSYNC_LOCAL_PUSH_ADDR, else 127.0.0.1:0). It is never the
	// broker's port: in Google Cloud only the subscription's identity may
	// invoke the reconcile function, and locally only the holder of
	// PushToken may push.
	PushAddr string
	// PushToken is the secret first segment of every push URL (default
	// SPECSYNC_LOCAL_PUSH_TOKEN, else random).
	PushToken string
	Logger    *slog.Logger
	// Seed, when set, pushes more to the local registry (host) after the
	// example specs and before the registry notifies any webhook, so a
	// benchmark's thousands of images are not thousands of events.
	Seed func(ctx context.Context, host string) error
}

// Timeouts are the local server's limits on slow or greedy clients. In
// Google Cloud the functions' front end enforces its own; locally these
// stand in for them.
type Timeouts struct {
	ReadHeader time.Duration // the request line and headers
	Read       time.Duration // the whole request, body included
	// Write bounds a response; it must outlast the longest change-feed
	// long-poll (SPECSYNC_CHANGES_MAX_WAIT).
	Write          time.Duration
	Idle           time.Duration // a kept-alive connection between requests
	MaxHeaderBytes int
}

// DefaultTimeouts are the local stack's limits.
var DefaultTimeouts = Timeouts{
	ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 2 * time.Minute,
	Idle: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
}

func newServer(h http.Handler, t Timeouts, log *slog.Logger) *http.Server {
	d := DefaultTimeouts
	pick := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	maxHeader := t.MaxHeaderBytes
	if maxHeader <= 0 {
		maxHeader = d.MaxHeaderBytes
	}
	return &http.Server{
		Handler:           headerLimit(maxHeader, h),
		ReadHeaderTimeout: pick(t.ReadHeader, d.ReadHeader),
		ReadTimeout:       pick(t.Read, d.Read),
		WriteTimeout:      pick(t.Write, d.Write),
		IdleTimeout:       pick(t.Idle, d.Idle),
		// The server's own cut is far above the limit: past it the
		// server answers a bare 431 without running a handler, and
		// headerLimit answers the rest with the request identity echoed.
		MaxHeaderBytes: hardHeaderFactor * maxHeader,
		// The server's own complaints as JSON lines of the stack's log.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// hardHeaderFactor is how far above the header limit the server itself
// stops reading headers.
const hardHeaderFactor = 4

// headerLimit answers 431 to a request whose request line and headers
// are over limit bytes (counted as they travel), echoing its request
// identity as every broker answer does; the server's bare 431 is left
// for headers hardHeaderFactor times over.
func headerLimit(limit int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
		for k, vs := range r.Header {
			for _, v := range vs {
				n += len(k) + len(v) + 4
			}
		}
		if n > limit {
			web.EchoRequestIdentity(w, r)
			w.Header().Set("Connection", "close")
			web.WriteError(w, http.StatusRequestHeaderFieldsTooLarge, "RequestHeaderFieldsTooLarge", "the request line and headers are %d bytes; at most %d are allowed", n, limit)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Stack is a running local stack.
type Stack struct {
	URL        string
	Project    string
	AdminToken string
	BrokerUser string
	BrokerPass string
	Registry   string // host of the seeded local OCI registry
	// OCI is the local OCI registry itself (its request counts).
	OCI *emulator.Registry
	// ChangesTopic is the topic catalog changes are published to.
	ChangesTopic string
	// CommitTopic is the topic of commit requests; its push subscription
	// has message ordering, as in production.
	CommitTopic string
	// Hooks are the registries whose webhook the local registry notifies
	// of every push and delete.
	Hooks []string
	// SpecsFrom is where the local registry's specs come from (a
	// directory, re-read before every bootstrap).
	SpecsFrom string

	// PushURL is the push endpoint's base, token included: a push
	// subscription delivers to PushURL + "/projects/P/topics/T".
	PushURL string

	stops      []func()
	server     *http.Server
	pushServer *http.Server
	errc       chan error
}

// setCredentialDefault is setDefault unless key+suffix is set for one of
// the suffixes; then the plain value is unknown here ("").
func setCredentialDefault(key, val string, suffixes ...string) string {
	for _, sfx := range suffixes {
		if os.Getenv(key+sfx) != "" {
			return os.Getenv(key)
		}
	}
	return setDefault(key, val)
}

func setDefault(key, val string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	os.Setenv(key, val)
	return val
}

// Start brings the stack up; Close takes down what it started.
func Start(ctx context.Context, opts Options) (s *Stack, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s = &Stack{errc: make(chan error, 3)}
	// Every failure below returns a nil stack: what was started is
	// closed through this copy (Close on the nil result panicked, and
	// the panic hid the error that made Start fail).
	started := s
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	s.Project = setDefault("GOOGLE_CLOUD_PROJECT", DefaultProject)
	topic := setDefault("SPECSYNC_TOPIC", DefaultTopic)
	s.ChangesTopic = setDefault("SPECSYNC_CHANGES_TOPIC", DefaultChangesTopic)
	s.CommitTopic = setDefault("SPECSYNC_COMMIT_TOPIC", DefaultCommitTopic)
	// The laptop credentials only when no other form of them is set: the
	// settings refuse two forms of one credential.
	s.AdminToken = setCredentialDefault("SPECSYNC_ADMIN_TOKEN", DefaultAdminToken, "_SHA256", "_FILE")
	if os.Getenv("SPECSYNC_BROKER_VIEWS") == "" {
		// With views, each view is a credential and the broker's own
		// must stay unset (the settings refuse both).
		s.BrokerUser = setDefault("SPECSYNC_BROKER_USERNAME", DefaultBrokerUser)
		s.BrokerPass = setCredentialDefault("SPECSYNC_BROKER_PASSWORD", DefaultBrokerPass, "_SHA256")
	}
	if opts.RegistriesFile != "" {
		os.Setenv("SPECSYNC_REGISTRIES", opts.RegistriesFile)
	}
	setDefault("SPECSYNC_REGISTRIES", "examples/registries.yaml")
	setDefault("SPECSYNC_LOCAL_HOOK_SECRET", DefaultHookSecret)

	if err := s.emulators(ctx, log); err != nil {
		return nil, err
	}
	regAddr := opts.RegistryAddr
	if regAddr == "" {
		regAddr = "127.0.0.1:0"
	}
	reg, err := emulator.StartRegistry(regAddr)
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { reg.Close() })
	specsDir := opts.SpecsDir
	if specsDir == "" {
		specsDir = os.Getenv("SPECSYNC_LOCAL_SPECS")
	}
	files, err := openSpecFiles(reg, specsDir)
	if err != nil {
		return nil, err
	}
	if _, _, err := files.sync(ctx); err != nil {
		return nil, fmt.Errorf("seed the local registry: %w", err)
	}
	s.SpecsFrom = files.from
	if opts.Seed != nil {
		if err := opts.Seed(ctx, reg.Host()); err != nil {
			return nil, fmt.Errorf("seed the local registry: %w", err)
		}
	}
	s.Registry, s.OCI = reg.Host(), reg
	setDefault("SPECSYNC_DEMO_REGISTRY", reg.Host())

	// The reconcile function behind functions-framework-go, as the
	// buildpack serves it: FUNCTION_TARGET set, served at "/".
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	innerPort := inner.Addr().(*net.TCPAddr).Port
	inner.Close()
	os.Setenv("FUNCTION_TARGET", "Reconcile")
	// What the framework prints raw on stderr (a body it cannot parse, a
	// returned error) becomes JSON lines of this log.
	if err := s.relayStderr(log); err != nil {
		return nil, err
	}
	go func() { s.errc <- funcframework.StartHostPort("127.0.0.1", fmt.Sprint(innerPort)) }()
	innerURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", innerPort))
	if err := waitListening(ctx, innerURL.Host); err != nil {
		return nil, fmt.Errorf("functions framework did not start: %w", err)
	}

	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:" + setDefault("PORT", "8080")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	s.URL = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	// Before a bootstrap, the registry takes up what changed in the spec
	// files: an edit is exactly that change on the next bootstrap.
	mux.HandleFunc("/bootstrap", files.beforeBootstrap(functions.Bootstrap, log))
	mux.HandleFunc("/bootstrap/", functions.Bootstrap)
	mux.HandleFunc("/hooks/", functions.Hooks) // the registries' webhooks
	// /hooks itself is the hooks function's 404 (a registry's name is
	// missing), not the mux's redirect to /hooks/.
	mux.HandleFunc("/hooks", functions.Hooks)
	mux.HandleFunc("/v2/", functions.Catalog)
	mux.HandleFunc("/registries", functions.Catalog)
	mux.HandleFunc("/admin/", functions.Catalog) // operator endpoints and status page
	mux.HandleFunc("/status", functions.Catalog)
	mux.HandleFunc("/", web.NotFound)
	s.server = newServer(mux, opts.Timeouts, log)
	go func() { s.errc <- s.server.Serve(ln) }()

	// The push endpoint, on a loopback port of its own behind a token:
	// the topic's path, as the framework expects it, below the token.
	if err := s.servePush(opts, innerURL, log); err != nil {
		return nil, err
	}

	// Both push to the reconcile function, which tells a reconcile
	// message from a commit request (or a registry's report riding one)
	// by its body; the commit requests' subscription is ordered, so they
	// come one at a time, and so do the reports to an operation.
	if err := s.pushSubscription(ctx, topic, false); err != nil {
		return nil, err
	}
	if err := s.pushSubscription(ctx, s.CommitTopic, true); err != nil {
		return nil, err
	}
	if err := s.createTopic(ctx, s.ChangesTopic); err != nil {
		return nil, err
	}
	if err := s.pruner(ctx, opts.PruneInterval, log); err != nil {
		return nil, err
	}
	s.Hooks = s.notifyHooks(reg, log)
	if opts.BootstrapInterval > 0 {
		s.periodic(opts.BootstrapInterval, log)
	}
	log.Info("local stack up", "url", s.URL, "project", s.Project, "registry", s.Registry)
	return s, nil
}

func (s *Stack) emulators(ctx context.Context, log *slog.Logger) error {
	type want struct {
		env   string
		start func() (*emulator.Process, error)
	}
	for _, w := range []want{
		{emulator.FirestoreEnv, func() (*emulator.Process, error) { return emulator.StartFirestore(ctx) }},
		{emulator.PubSubEnv, func() (*emulator.Process, error) { return emulator.StartPubSub(ctx, s.Project) }},
	} {
		if host := os.Getenv(w.env); host != "" && emulator.Ready(ctx, host) {
			log.Info("reusing emulator", "env", w.env, "host", host)
			continue
		}
		p, err := w.start()
		if err != nil {
			return err
		}
		s.stops = append(s.stops, func() { p.Stop() })
		os.Setenv(w.env, p.Host)
	}
	return nil
}

// pushSubscription creates the topic and a push subscription to this
// process's push endpoint, replacing one left by an earlier stack;
// ordered enables message ordering (one message of a key at a time).
func (s *Stack) pushSubscription(ctx context.Context, topic string, ordered bool) error {
	c, err := pubsub.NewClient(ctx, s.Project)
	if err != nil {
		return err
	}
	defer c.Close()
	topicName := fmt.Sprintf("projects/%s/topics/%s", s.Project, topic)
	subName := fmt.Sprintf("projects/%s/subscriptions/%s-push", s.Project, topic)
	if err := s.createTopic(ctx, topic); err != nil {
		return err
	}
	err = c.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: subName})
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("replace subscription %s: %w", subName, err)
	}
	_, err = c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name:                  subName,
		Topic:                 topicName,
		PushConfig:            &pubsubpb.PushConfig{PushEndpoint: s.PushURL + "/" + topicName},
		AckDeadlineSeconds:    60,
		EnableMessageOrdering: ordered,
		RetryPolicy: &pubsubpb.RetryPolicy{
			MinimumBackoff: durationpb.New(time.Second),
			MaximumBackoff: durationpb.New(10 * time.Second),
		},
	})
	if err != nil {
		return fmt.Errorf("create push subscription %s: %w", subName, err)
	}
	return nil
}

// notifyHooks makes the local registry notify the webhook of every
// registry of the registries file that reads it and has a bearer hook, as
// a distribution registry's notifications.endpoints (with an
// Authorization header) would: a push to the local registry then reaches
// the catalog with no bootstrap. It returns those registries. A file that
// does not load is the functions' to report; an HMAC hook cannot be
// served (distribution's notifications send headers, not signatures) and
// is logged.
func (s *Stack) notifyHooks(reg *emulator.Registry, log *slog.Logger) []string {
	cfg, err := config.Load(os.Getenv("SPECSYNC_REGISTRIES"))
	if err != nil {
		log.Warn("the local registry notifies no webhook: the registries file does not load", "error", err)
		return nil
	}
	var names []string
	for _, r := range cfg.Registries {
		oci, _ := r.Block().(*registry.OCIBlock)
		if r.Hook == nil || oci == nil || !strings.EqualFold(oci.Host, reg.Host()) {
			continue
		}
		if r.Hook.Type != config.HookBearer {
			log.Warn("the local registry cannot notify an hmac webhook (a distribution registry sends headers, not signatures)", "registry", r.Name)
			continue
		}
		secret, err := hooks.Secret(*r.Hook)
		if err != nil {
			log.Warn("the local registry notifies no webhook of registry: its secret is unusable", "registry", r.Name, "error", err)
			continue
		}
		reg.Notify(s.URL+"/hooks/"+r.Name, http.Header{"Authorization": {"Bearer " + secret}}, log)
		names = append(names, r.Name)
	}
	return names
}

// createTopic creates a topic unless it exists.
func (s *Stack) createTopic(ctx context.Context, topic string) error {
	c, err := pubsub.NewClient(ctx, s.Project)
	if err != nil {
		return err
	}
	defer c.Close()
	name := fmt.Sprintf("projects/%s/topics/%s", s.Project, topic)
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name}); err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	return nil
}

// pruner deletes expired change records: what the Firestore TTL policy
// does in production (the emulator has no TTL).
func (s *Stack) pruner(ctx context.Context, every time.Duration, log *slog.Logger) error {
	if every <= 0 {
		every = DefaultPruneInterval
	}
	st, err := store.Open(ctx, s.Project, "")
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(context.Background())
	s.stops = append(s.stops, func() { cancel(); st.Close() })
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
				n, err := st.PruneChanges(pctx, time.Now(), 500)
				if err != nil && pctx.Err() == nil {
					log.Warn("pruning expired changes failed", "error", err)
				} else if n > 0 {
					log.Info("pruned expired changes", "deleted", n)
				}
			}
		}
	}()
	return nil
}

func (s *Stack) periodic(every time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	s.stops = append(s.stops, cancel)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/bootstrap", nil)
				req.Header.Set("Authorization", "Bearer "+s.AdminToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					log.Warn("periodic bootstrap failed", "error", err)
					continue
				}
				resp.Body.Close()
				log.Info("periodic bootstrap", "status", resp.StatusCode)
			}
		}
	}()
}

// Wait blocks until ctx is done or a server fails.
func (s *Stack) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// Close stops everything Start started, newest first. Closing a nil
// stack (what a failed Start returns) does nothing.
func (s *Stack) Close() {
	if s == nil {
		return
	}
	for _, srv := range []*http.Server{s.server, s.pushServer} {
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			srv.Shutdown(ctx)
			cancel()
		}
	}
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

func waitListening(ctx context.Context, host string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", host, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("nothing listens on %s: %w", host, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
