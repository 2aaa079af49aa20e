// Package settings reads each component's configuration from the
// environment once, typed, with defaults, and checks it: a function that
// cannot be configured fails its cold start with every problem listed,
// instead of failing requests one by one later.
package settings

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/failure"
)

// Runtime is what every function needs, whether it opens Firestore or
// not: its project, its logs and its traces.
type Runtime struct {
	Project  string // GOOGLE_CLOUD_PROJECT (required)
	LogLevel string // LOG_LEVEL, default info
	Tracing  Tracing
}

// Common is what every function that opens Firestore needs (all but the
// hooks function).
type Common struct {
	Runtime
	Database string // FIRESTORE_DATABASE, default "(default)"
}

// Tracing is how a function traces (pkg/telemetry).
type Tracing struct {
	// Exporter is where spans go (SPECSYNC_TRACE): "off" (the default:
	// nothing is recorded), "otlp" (to Google's Telemetry API, or to
	// OTLPEndpoint when one is set), "cloudtrace" (deprecated: Cloud
	// Trace's exporter until it is archived) or "stdout".
	Exporter string
	// SampleRatio is the share of requests' and registry events' traces
	// kept (SPECSYNC_TRACE_SAMPLE_RATIO, default 0.01, between 0 and 1):
	// a bootstrap the admin asked for is always kept, and what a kept
	// trace's messages start belongs to it.
	SampleRatio float64
	// OTLPEndpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT: empty, otlp goes to Google.
	OTLPEndpoint string
	// OTLPProtocol is how OTLPEndpoint is spoken
	// (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL):
	// "http/protobuf" (the default) or "grpc".
	OTLPProtocol string
}

// TraceExporters are the values SPECSYNC_TRACE accepts.
var TraceExporters = []string{"off", "otlp", "cloudtrace", "stdout"}

// OTLPProtocols are the OTLP protocols an endpoint may speak.
var OTLPProtocols = []string{"http/protobuf", "grpc"}

// DefaultTraceSampleRatio is SPECSYNC_TRACE_SAMPLE_RATIO's default.
const DefaultTraceSampleRatio = 0.01

// Bootstrap configures the bootstrap function.
type Bootstrap struct {
	Common
	// RegistriesFile is where the registries file is (SPECSYNC_REGISTRIES,
	// default registries.yaml: a path, or gs://BUCKET/OBJECT, pkg/config's
	// LoadSource): the bootstrap fans out one message per registry it
	// names.
	RegistriesFile string
	Topic          string        // SPECSYNC_TOPIC, default specsync-reconcile
	Deadline       time.Duration // SPECSYNC_OPERATION_DEADLINE, default 15m
	Retention      time.Duration // SPECSYNC_OPERATION_RETENTION, default 24h
	Admin          Admin
}

// Hooks configures the hooks function: the registries' webhooks. It
// reads no Firestore setting, because it opens no Firestore: it checks
// each request against its registry's own hook secret and publishes
// reconcile messages, nothing more, so a public endpoint holds no
// credential to the store.
type Hooks struct {
	Runtime
	// RegistriesFile is where the registries file is (SPECSYNC_REGISTRIES,
	// as the bootstrap's): each registry's hook block and selection.
	RegistriesFile string
	// Topic is where the reconcile messages go (SPECSYNC_TOPIC, default
	// specsync-reconcile: the bootstrap's topic).
	Topic string
	// Window is how long a registry's webhook events are merged into one
	// reconcile message after one was published at once
	// (SPECSYNC_HOOK_WINDOW, default 1s): a burst of pushes makes one
	// message per window, not one per push (pkg/hooks).
	Window time.Duration
}

// Credential is where a function learns the secret its callers must
// present, from exactly one source (the variable KEY, KEY_SHA256 or
// KEY_FILE); at most one field is set.
type Credential struct {
	// Value is the secret itself (KEY): local use, tests.
	Value string
	// SHA256 is the secret's SHA-256 digest (KEY_SHA256, 64 hex digits):
	// the function then holds no secret. Only for high-entropy secrets
	// (e.g. 32 random bytes): the digest of a guessable one can be
	// brute-forced.
	//
	// While a credential rotates it may hold two digests, comma-separated:
	// the new one and the one being retired, so clients can switch without
	// being refused in between.
	SHA256 [][]byte
	// File is a file holding the secret (KEY_FILE), re-read on use: a
	// Secret Manager volume, so a new version is picked up without a
	// redeploy.
	File string
}

// IsSet reports whether any source is set.
func (c Credential) IsSet() bool { return c.Value != "" || len(c.SHA256) > 0 || c.File != "" }

// String says where the credential comes from, never what it is, so that
// printing settings (%v, %+v, %#v) cannot leak it.
func (c Credential) String() string {
	switch {
	case c.Value != "":
		return "credential(value, redacted)"
	case len(c.SHA256) > 0:
		return fmt.Sprintf("credential(%d sha256 digests)", len(c.SHA256))
	case c.File != "":
		return "credential(file " + c.File + ")"
	}
	return "credential(unset)"
}

// GoString keeps %#v as safe as %v.
func (c Credential) GoString() string { return c.String() }

// Admin is how admin endpoints authenticate callers.
type Admin struct {
	// Token is the shared admin bearer token: SPECSYNC_ADMIN_TOKEN (at
	// least 16 characters), SPECSYNC_ADMIN_TOKEN_SHA256 or
	// SPECSYNC_ADMIN_TOKEN_FILE.
	Token Credential
	// SchedulerAudience and SchedulerServiceAccount, when set, also accept
	// a Google-signed identity token with that audience issued to that
	// service account: what Cloud Scheduler sends (SPECSYNC_SCHEDULER_AUDIENCE,
	// SPECSYNC_SCHEDULER_SERVICE_ACCOUNT).
	SchedulerAudience       string
	SchedulerServiceAccount string
}

// Reconcile configures the reconcile function.
type Reconcile struct {
	Common
	// RegistriesFile is where the registries file is (SPECSYNC_REGISTRIES,
	// as the bootstrap's): every registry's configuration.
	RegistriesFile string
	LeaseTTL       time.Duration // SPECSYNC_LEASE_TTL, default 10m
	Retention      time.Duration // SPECSYNC_OPERATION_RETENTION (must match bootstrap's)
	// ChangesTopic is the Pub/Sub topic catalog changes are published to
	// (SPECSYNC_CHANGES_TOPIC); empty publishes nothing (the HTTP feed
	// works either way).
	ChangesTopic string
	// CommitTopic is the Pub/Sub topic of commit requests
	// (SPECSYNC_COMMIT_TOPIC, default specsync-commit): runs that leave
	// pending changes, and the last report of a bootstrap, publish there;
	// its ordered push subscription brings each request back to this
	// function, one at a time, to the committer.
	CommitTopic string
	// ChangeRetention is how long change records stay readable in the
	// feed (SPECSYNC_CHANGE_RETENTION, default 168h); older ones expire
	// through the Firestore TTL policy on changes.expires_at.
	ChangeRetention time.Duration
	// EventCooldown is the least time between the starts of two runs of a
	// registry for events (SPECSYNC_EVENT_COOLDOWN, default 1s): an event
	// that comes sooner waits (Pub/Sub redelivers it), so a storm of
	// events makes one run a cooldown at most.
	EventCooldown time.Duration
	// EventClockSkew is how far the clocks of the instance that received
	// an event and the one that ran the registry may disagree
	// (SPECSYNC_EVENT_CLOCK_SKEW, default 1s): a run covers an event only
	// if it started at least this long after it.
	EventClockSkew time.Duration
}

// Catalog configures the catalog function.
type Catalog struct {
	Common
	BrokerUsername string // SPECSYNC_BROKER_USERNAME (required)
	// BrokerPassword is the platform's password (required):
	// SPECSYNC_BROKER_PASSWORD or SPECSYNC_BROKER_PASSWORD_SHA256.
	BrokerPassword Credential
	// BrokerViews is SPECSYNC_BROKER_VIEWS: the views file (its path, or
	// its JSON when it starts with "{"), the broker's credentials, each
	// with its part of the catalog (ReadViews in pkg/config/views.go). When set, it
	// replaces the broker username and password, which must be unset.
	BrokerViews   string
	RefreshWindow time.Duration // SPECSYNC_CATALOG_REFRESH, default 5s
	MaxBodyBytes  int64         // SPECSYNC_MAX_BODY_BYTES, default 65536
	// MaxCatalogBytes is the largest catalog body served, in either form
	// (SPECSYNC_CATALOG_MAX_BYTES, default 32 MiB: Cloud Run's limit on a
	// response that is not streamed); a larger one is refused, never cut.
	MaxCatalogBytes int64
	// MaxWait bounds the wait of a change feed long-poll
	// (SPECSYNC_CHANGES_MAX_WAIT, default 50s: under the function's
	// request timeout).
	MaxWait time.Duration
	Admin   Admin
	// DashboardURL is the monitoring dashboard the status page links to
	// (SPECSYNC_DASHBOARD_URL, optional; terraform sets it).
	DashboardURL string
}

// reader collects every problem instead of stopping at the first.
type reader struct {
	lookup   func(string) (string, bool)
	problems []string
}

func (r *reader) str(key, def string) string {
	if v, ok := r.lookup(key); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

func (r *reader) required(key string) string {
	v := r.str(key, "")
	if v == "" {
		r.problems = append(r.problems, key+" is required")
	}
	return v
}

func (r *reader) duration(key string, def time.Duration) time.Duration {
	v := r.str(key, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.problems = append(r.problems, fmt.Sprintf("%s=%q is not a positive duration such as 30s or 10m", key, v))
		return def
	}
	return d
}

func (r *reader) int64(key string, def int64) int64 {
	v := r.str(key, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		r.problems = append(r.problems, fmt.Sprintf("%s=%q is not a positive integer", key, v))
		return def
	}
	return n
}

func (r *reader) err(component string) error {
	if len(r.problems) == 0 {
		return nil
	}
	return failure.Wrap(failure.Invalid, errors.New(component+" configuration: "+strings.Join(r.problems, "; ")))
}

func (r *reader) runtime() Runtime {
	return Runtime{
		Project:  r.required("GOOGLE_CLOUD_PROJECT"),
		LogLevel: r.str("LOG_LEVEL", "info"),
		Tracing:  r.tracing(),
	}
}

func (r *reader) common() Common {
	return Common{Runtime: r.runtime(), Database: r.str("FIRESTORE_DATABASE", "(default)")}
}

func (r *reader) tracing() Tracing {
	t := Tracing{Exporter: strings.ToLower(r.str("SPECSYNC_TRACE", "off")), SampleRatio: DefaultTraceSampleRatio}
	if !slices.Contains(TraceExporters, t.Exporter) {
		r.problems = append(r.problems, fmt.Sprintf("SPECSYNC_TRACE=%q is not one of %s", t.Exporter, strings.Join(TraceExporters, ", ")))
	}
	if v := r.str("SPECSYNC_TRACE_SAMPLE_RATIO", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			r.problems = append(r.problems, fmt.Sprintf("SPECSYNC_TRACE_SAMPLE_RATIO=%q is not a number between 0 and 1", v))
		} else {
			t.SampleRatio = f
		}
	}
	if t.Exporter != "otlp" {
		return t
	}
	t.OTLPEndpoint = r.str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", r.str("OTEL_EXPORTER_OTLP_ENDPOINT", ""))
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		v := r.str(k, "")
		if v == "" {
			continue
		}
		if !slices.Contains(OTLPProtocols, v) {
			r.problems = append(r.problems, fmt.Sprintf("%s=%q is not one of %s", k, v, strings.Join(OTLPProtocols, ", ")))
		}
		t.OTLPProtocol = v
		break
	}
	return t
}

func (r *reader) registriesFile() string { return r.str("SPECSYNC_REGISTRIES", "registries.yaml") }

// Credential sources: the variable's name plus one of these suffixes.
const (
	SuffixSHA256 = "_SHA256"
	SuffixFile   = "_FILE"
)

// MaxDigests is how many digests a KEY_SHA256 may hold: two while a
// credential rotates.
const MaxDigests = 2

// emptySHA256 is the digest of nothing: what `printf %s "$UNSET" |
// sha256sum` prints. It is never a real credential's.
var emptySHA256 = sha256.Sum256(nil)

// credential reads the credential key from the sources given (key itself,
// key+SuffixSHA256, key+SuffixFile). Every source is read (so the set of
// variables a loader reads does not depend on their values); at most one
// may be set. Problems name variables, never values: a value in the wrong
// variable may be the secret itself. reported says a problem was recorded
// (so the caller does not also call a badly set credential missing).
func (r *reader) credential(key string, minLen int, sources ...string) (c Credential, reported bool) {
	var set []string
	before := len(r.problems)
	for _, suffix := range sources {
		name := key + suffix
		v := r.str(name, "")
		if v == "" {
			continue
		}
		set = append(set, name)
		switch suffix {
		case "":
			c.Value = v
			if len(v) < minLen {
				r.problems = append(r.problems, fmt.Sprintf("%s must be at least %d characters", name, minLen))
			}
		case SuffixSHA256:
			parts := strings.Split(v, ",")
			if len(parts) > MaxDigests {
				r.problems = append(r.problems, fmt.Sprintf("%s holds %d digests; at most %d (the new one and the one being retired)", name, len(parts), MaxDigests))
				break
			}
			for i, part := range parts {
				sum, err := hex.DecodeString(strings.TrimSpace(part))
				where := name
				if len(parts) > 1 {
					where = fmt.Sprintf("%s (digest %d)", name, i+1)
				}
				switch {
				case err != nil || len(sum) != sha256.Size:
					r.problems = append(r.problems, where+" must be a SHA-256 digest: 64 hexadecimal characters (the first field of `printf %s \"$SECRET\" | sha256sum`)")
				case string(sum) == string(emptySHA256[:]):
					r.problems = append(r.problems, where+" is the digest of an empty string (was the secret's variable set when it was hashed?)")
				default:
					c.SHA256 = append(c.SHA256, sum)
				}
			}
		case SuffixFile:
			c.File = v
		default:
			panic("settings: unknown credential source " + suffix)
		}
	}
	if len(set) > 1 {
		r.problems = append(r.problems, "set only one of "+strings.Join(set, ", "))
		return Credential{}, true
	}
	return c, len(r.problems) > before
}

// ViewPasswordSources are where a view's password may come from
// (View.PasswordEnv in pkg/config/views.go names VAR): the password, its digests, or
// a file holding it (a Secret Manager volume, re-read, so a rotation
// needs no redeploy).
var ViewPasswordSources = []string{"", SuffixSHA256, SuffixFile}

// ReadCredential reads the credential key names from one of
// ViewPasswordSources, exactly as the broker's own password: one of them
// is required.
func ReadCredential(env Lookup, key string) (Credential, error) {
	r := &reader{lookup: env}
	c, reported := r.credential(key, 0, ViewPasswordSources...)
	if !c.IsSet() && !reported {
		r.problems = append(r.problems, "one of "+sourceNames(key, ViewPasswordSources...)+" is required")
	}
	return c, r.err("view password")
}

// sourceNames lists the variables a credential may come from.
func sourceNames(key string, sources ...string) string {
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = key + s
	}
	return strings.Join(names, ", ")
}

// AdminTokenMinLength is the shortest admin token accepted, from the
// environment or from a file.
const AdminTokenMinLength = 16

// adminSources are where the admin token may come from, in every function
// with admin endpoints.
var adminSources = []string{"", SuffixSHA256, SuffixFile}

func (r *reader) admin() Admin {
	token, reported := r.credential("SPECSYNC_ADMIN_TOKEN", AdminTokenMinLength, adminSources...)
	a := Admin{
		Token:                   token,
		SchedulerAudience:       r.str("SPECSYNC_SCHEDULER_AUDIENCE", ""),
		SchedulerServiceAccount: r.str("SPECSYNC_SCHEDULER_SERVICE_ACCOUNT", ""),
	}
	if !a.Token.IsSet() && a.SchedulerAudience == "" && !reported {
		r.problems = append(r.problems, "one of "+sourceNames("SPECSYNC_ADMIN_TOKEN", adminSources...)+", or SPECSYNC_SCHEDULER_AUDIENCE, is required (admin endpoints must authenticate)")
	}
	if (a.SchedulerAudience == "") != (a.SchedulerServiceAccount == "") {
		r.problems = append(r.problems, "SPECSYNC_SCHEDULER_AUDIENCE and SPECSYNC_SCHEDULER_SERVICE_ACCOUNT go together")
	}
	return a
}

// Lookup is how settings read the environment; os.LookupEnv in production.
type Lookup func(string) (string, bool)

// FromEnv is the process environment.
var FromEnv Lookup = os.LookupEnv

// DefaultHookWindow and MaxHookWindow bound SPECSYNC_HOOK_WINDOW: a
// webhook request that joins a window waits for it to close before it
// is answered, so a window is short next to a sender's timeout
// (distribution's default is 1 s per attempt, retried; GitHub's 10 s).
const (
	DefaultHookWindow = time.Second
	MaxHookWindow     = 30 * time.Second
)

// DefaultTopic is SPECSYNC_TOPIC's default: the topic of reconcile
// messages, which the bootstrap and the hooks function publish to.
const DefaultTopic = "specsync-reconcile"

// LoadBootstrap reads the bootstrap function's settings.
func LoadBootstrap(env Lookup) (Bootstrap, error) {
	r := &reader{lookup: env}
	b := Bootstrap{
		Common:         r.common(),
		RegistriesFile: r.registriesFile(),
		Topic:          r.str("SPECSYNC_TOPIC", DefaultTopic),
		Deadline:       r.duration("SPECSYNC_OPERATION_DEADLINE", 15*time.Minute),
		Retention:      r.duration("SPECSYNC_OPERATION_RETENTION", 24*time.Hour),
		Admin:          r.admin(),
	}
	return b, r.err("bootstrap")
}

// LoadHooks reads the hooks function's settings.
func LoadHooks(env Lookup) (Hooks, error) {
	r := &reader{lookup: env}
	h := Hooks{
		Runtime:        r.runtime(),
		RegistriesFile: r.registriesFile(),
		Topic:          r.str("SPECSYNC_TOPIC", DefaultTopic),
		Window:         r.duration("SPECSYNC_HOOK_WINDOW", DefaultHookWindow),
	}
	if h.Window > MaxHookWindow {
		r.problems = append(r.problems, fmt.Sprintf("SPECSYNC_HOOK_WINDOW=%s is longer than %s (a webhook's sender waits up to a window for its answer)", h.Window, MaxHookWindow))
	}
	return h, r.err("hooks")
}

// LoadReconcile reads the reconcile function's settings.
func LoadReconcile(env Lookup) (Reconcile, error) {
	r := &reader{lookup: env}
	c := Reconcile{
		Common:          r.common(),
		RegistriesFile:  r.registriesFile(),
		LeaseTTL:        r.duration("SPECSYNC_LEASE_TTL", 10*time.Minute),
		Retention:       r.duration("SPECSYNC_OPERATION_RETENTION", 24*time.Hour),
		ChangesTopic:    r.str("SPECSYNC_CHANGES_TOPIC", ""),
		CommitTopic:     r.str("SPECSYNC_COMMIT_TOPIC", "specsync-commit"),
		ChangeRetention: r.duration("SPECSYNC_CHANGE_RETENTION", 7*24*time.Hour),
		EventCooldown:   r.duration("SPECSYNC_EVENT_COOLDOWN", time.Second),
		EventClockSkew:  r.duration("SPECSYNC_EVENT_CLOCK_SKEW", time.Second),
	}
	return c, r.err("reconcile")
}

// brokerPasswordSources are where the broker password may come from: the
// catalog never needs a file (in Google Cloud it holds only the digest).
var brokerPasswordSources = []string{"", SuffixSHA256}

// LoadCatalog reads the catalog function's settings.
func LoadCatalog(env Lookup) (Catalog, error) {
	r := &reader{lookup: env}
	common := r.common()
	views := r.str("SPECSYNC_BROKER_VIEWS", "")
	username := r.str("SPECSYNC_BROKER_USERNAME", "")
	if username == "" && views == "" {
		r.problems = append(r.problems, "SPECSYNC_BROKER_USERNAME is required (or SPECSYNC_BROKER_VIEWS)")
	}
	password, reported := r.credential("SPECSYNC_BROKER_PASSWORD", 0, brokerPasswordSources...)
	if views != "" && (username != "" || password.IsSet()) {
		r.problems = append(r.problems, "set either SPECSYNC_BROKER_VIEWS or SPECSYNC_BROKER_USERNAME and its password, not both: with views, each view is a credential")
		reported = true
	}
	c := Catalog{
		Common:         common,
		BrokerUsername: username,
		BrokerPassword: password,
		BrokerViews:    views,
		RefreshWindow:  r.duration("SPECSYNC_CATALOG_REFRESH", 5*time.Second),
		MaxBodyBytes:   r.int64("SPECSYNC_MAX_BODY_BYTES", 64<<10),
		MaxWait:        r.duration("SPECSYNC_CHANGES_MAX_WAIT", 50*time.Second),
		Admin:          r.admin(),
		DashboardURL:   r.str("SPECSYNC_DASHBOARD_URL", ""),
	}
	if u := c.DashboardURL; u != "" && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		r.problems = append(r.problems, "SPECSYNC_DASHBOARD_URL must be an http(s) URL")
	}
	c.MaxCatalogBytes = r.int64("SPECSYNC_CATALOG_MAX_BYTES", 32<<20)
	if views == "" && !c.BrokerPassword.IsSet() && !reported {
		r.problems = append(r.problems, "one of "+sourceNames("SPECSYNC_BROKER_PASSWORD", brokerPasswordSources...)+" is required")
	}
	return c, r.err("catalog")
}
