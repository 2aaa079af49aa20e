// Package settings reads each component's configuration from the
// environment once, typed, with defaults, and checks it: a function that
// cannot be configured fails its cold start with every problem listed,
// instead of failing requests one by one later.
package settings

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/failure"
)

// Common is what every function needs.
type Common struct {
	Project        string // GOOGLE_CLOUD_PROJECT (required)
	Database       string // FIRESTORE_DATABASE, default "(default)"
	LogLevel       string // LOG_LEVEL, default info
	RegistriesFile string // SPECSYNC_REGISTRIES, default registries.yaml
}

// Bootstrap configures the bootstrap function.
type Bootstrap struct {
	Common
	Topic     string        // SPECSYNC_TOPIC, default specsync-reconcile
	Deadline  time.Duration // SPECSYNC_OPERATION_DEADLINE, default 15m
	Retention time.Duration // SPECSYNC_OPERATION_RETENTION, default 24h
	Admin     Admin
}

// Admin is how admin endpoints authenticate callers.
type Admin struct {
	Token string // SPECSYNC_ADMIN_TOKEN: a shared bearer token (secret)
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
	LeaseTTL  time.Duration // SPECSYNC_LEASE_TTL, default 10m
	Retention time.Duration // SPECSYNC_OPERATION_RETENTION (must match bootstrap's)
	// ChangesTopic is the Pub/Sub topic catalog changes are published to
	// (SPECSYNC_CHANGES_TOPIC); empty publishes nothing (the HTTP feed
	// works either way).
	ChangesTopic string
	// ChangeRetention is how long change records stay readable in the
	// feed (SPECSYNC_CHANGE_RETENTION, default 168h); older ones expire
	// through the Firestore TTL policy on changes.expires_at.
	ChangeRetention time.Duration
}

// Catalog configures the catalog function.
type Catalog struct {
	Common
	BrokerUsername string        // SPECSYNC_BROKER_USERNAME (required)
	BrokerPassword string        // SPECSYNC_BROKER_PASSWORD (required, secret)
	RefreshWindow  time.Duration // SPECSYNC_CATALOG_REFRESH, default 5s
	MaxBodyBytes   int64         // SPECSYNC_MAX_BODY_BYTES, default 65536
	// MaxWait bounds the wait of a change feed long-poll
	// (SPECSYNC_CHANGES_MAX_WAIT, default 50s: under the function's
	// request timeout).
	MaxWait time.Duration
	Admin   Admin
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

func (r *reader) common() Common {
	return Common{
		Project:        r.required("GOOGLE_CLOUD_PROJECT"),
		Database:       r.str("FIRESTORE_DATABASE", "(default)"),
		LogLevel:       r.str("LOG_LEVEL", "info"),
		RegistriesFile: r.str("SPECSYNC_REGISTRIES", "registries.yaml"),
	}
}

func (r *reader) admin() Admin {
	a := Admin{
		Token:                   r.str("SPECSYNC_ADMIN_TOKEN", ""),
		SchedulerAudience:       r.str("SPECSYNC_SCHEDULER_AUDIENCE", ""),
		SchedulerServiceAccount: r.str("SPECSYNC_SCHEDULER_SERVICE_ACCOUNT", ""),
	}
	if a.Token == "" && a.SchedulerAudience == "" {
		r.problems = append(r.problems, "SPECSYNC_ADMIN_TOKEN or SPECSYNC_SCHEDULER_AUDIENCE is required (admin endpoints must authenticate)")
	}
	if (a.SchedulerAudience == "") != (a.SchedulerServiceAccount == "") {
		r.problems = append(r.problems, "SPECSYNC_SCHEDULER_AUDIENCE and SPECSYNC_SCHEDULER_SERVICE_ACCOUNT go together")
	}
	if a.Token != "" && len(a.Token) < 16 {
		r.problems = append(r.problems, "SPECSYNC_ADMIN_TOKEN must be at least 16 characters")
	}
	return a
}

// Lookup is how settings read the environment; os.LookupEnv in production.
type Lookup func(string) (string, bool)

// FromEnv is the process environment.
var FromEnv Lookup = os.LookupEnv

// LoadBootstrap reads the bootstrap function's settings.
func LoadBootstrap(env Lookup) (Bootstrap, error) {
	r := &reader{lookup: env}
	b := Bootstrap{
		Common:    r.common(),
		Topic:     r.str("SPECSYNC_TOPIC", "specsync-reconcile"),
		Deadline:  r.duration("SPECSYNC_OPERATION_DEADLINE", 15*time.Minute),
		Retention: r.duration("SPECSYNC_OPERATION_RETENTION", 24*time.Hour),
		Admin:     r.admin(),
	}
	return b, r.err("bootstrap")
}

// LoadReconcile reads the reconcile function's settings.
func LoadReconcile(env Lookup) (Reconcile, error) {
	r := &reader{lookup: env}
	c := Reconcile{
		Common:          r.common(),
		LeaseTTL:        r.duration("SPECSYNC_LEASE_TTL", 10*time.Minute),
		Retention:       r.duration("SPECSYNC_OPERATION_RETENTION", 24*time.Hour),
		ChangesTopic:    r.str("SPECSYNC_CHANGES_TOPIC", ""),
		ChangeRetention: r.duration("SPECSYNC_CHANGE_RETENTION", 7*24*time.Hour),
	}
	return c, r.err("reconcile")
}

// LoadCatalog reads the catalog function's settings.
func LoadCatalog(env Lookup) (Catalog, error) {
	r := &reader{lookup: env}
	c := Catalog{
		Common:         r.common(),
		BrokerUsername: r.required("SPECSYNC_BROKER_USERNAME"),
		BrokerPassword: r.required("SPECSYNC_BROKER_PASSWORD"),
		RefreshWindow:  r.duration("SPECSYNC_CATALOG_REFRESH", 5*time.Second),
		MaxBodyBytes:   r.int64("SPECSYNC_MAX_BODY_BYTES", 64<<10),
		MaxWait:        r.duration("SPECSYNC_CHANGES_MAX_WAIT", 50*time.Second),
		Admin:          r.admin(),
	}
	return c, r.err("catalog")
}
