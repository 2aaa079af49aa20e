package config

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RefreshInterval is the least time between two checks of a config
// bundle's generation by one instance: an edit takes effect within about
// this long, for one metadata read per instance per interval.
const RefreshInterval = 30 * time.Second

// DefaultCheckTimeout bounds one check: the metadata read and, when the
// object changed, its read. The check runs in the request that finds it
// due (an instance between requests may get no CPU, so nothing runs in
// the background), and that request waits for it.
const DefaultCheckTimeout = 10 * time.Second

// coldStartTimeout bounds the first read of the object. The storage
// client retries what is worth retrying (a 503, a reset connection) until
// then; past it, the cold start fails with what went wrong.
const coldStartTimeout = 30 * time.Second

// ObjectScheme starts a location that is an object in Cloud Storage
// (gs://BUCKET/OBJECT) rather than a path.
const ObjectScheme = "gs://"

// Object is a config bundle kept in an object store that numbers each
// version of an object: Cloud Storage, whose generation changes with
// every write (pkg/config/gcs).
type Object interface {
	// Generation returns the object's current generation: a metadata
	// read, not its content.
	Generation(ctx context.Context) (int64, error)
	// Read returns the object's content and the generation read, which
	// may be newer than the one Generation returned.
	Read(ctx context.Context) ([]byte, int64, error)
	// String names the object in logs and errors (gs://BUCKET/OBJECT).
	String() string
}

// SourceOptions configure LoadSource.
type SourceOptions struct {
	// OpenObject opens the object a gs:// location names (gcs.Open in the
	// functions); nil refuses such a location. It is an option, not an
	// import, so that `specsync config check`, which links this package,
	// links no cloud client.
	OpenObject func(ctx context.Context, location string) (Object, error)
	// Interval is the least time between two checks of the object's
	// generation (RefreshInterval when zero).
	Interval time.Duration
	// CheckTimeout bounds a check (DefaultCheckTimeout when zero).
	CheckTimeout time.Duration
	// Logger gets what a check finds: a new configuration, an invalid
	// one, a failed read (slog.Default when nil).
	Logger *slog.Logger
	// Now is the clock the interval is measured on (time.Now when nil):
	// a test moves it by hand, so that what it asserts about the
	// interval does not depend on how fast the machine runs.
	Now func() time.Time
}

// Source is the registries file a function reads on every request or
// message: a file, read once at cold start, or a config bundle in Cloud
// Storage, read at cold start and read again when it changes, so an edit
// takes effect without a redeploy.
//
// A bundle is checked lazily, by the first Current call at least
// Interval after the last check: one metadata read, and the object's
// read only when its generation moved. A new generation that does not
// parse is logged (object, generation, what is wrong) and the last good
// configuration stays; a failed read (Cloud Storage down, the object
// deleted) is logged and changes nothing. A check never fails a request.
type Source struct {
	location     string
	object       Object // nil: a file, read once
	interval     time.Duration
	checkTimeout time.Duration
	log          *slog.Logger
	now          func() time.Time

	current atomic.Pointer[loaded]
	// nextCheck is when a check is due (Unix nanoseconds): read without
	// the lock, so a request that is not due takes none.
	nextCheck atomic.Int64

	// mu is held by the one check in progress; a request that finds it
	// held serves the configuration current, never waits or checks too.
	mu sync.Mutex
	// rejected is the last generation that did not parse: it is not read
	// again (nor logged again) until the object changes once more.
	rejected int64
}

// loaded is a configuration and the generation it was read from (0 for
// a file).
type loaded struct {
	cfg        *Config
	generation int64
}

// LoadSource reads the registries file at location: a path (Load), or
// gs://BUCKET/OBJECT, a config bundle (ParseBundle) opened with
// opts.OpenObject. A file or bundle that cannot be read or does not parse
// is an error naming it: a function's cold start fails with it.
func LoadSource(ctx context.Context, location string, opts SourceOptions) (*Source, error) {
	s := &Source{
		location:     location,
		interval:     opts.Interval,
		checkTimeout: opts.CheckTimeout,
		log:          opts.Logger,
		now:          opts.Now,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.interval <= 0 {
		s.interval = RefreshInterval
	}
	if s.checkTimeout <= 0 {
		s.checkTimeout = DefaultCheckTimeout
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if !strings.HasPrefix(location, ObjectScheme) {
		cfg, err := Load(location)
		if err != nil {
			return nil, err
		}
		s.current.Store(&loaded{cfg: cfg})
		return s, nil
	}
	if opts.OpenObject == nil {
		return nil, fmt.Errorf("registries file %s: this program reads no Cloud Storage object", location)
	}
	ctx, cancel := context.WithTimeout(ctx, coldStartTimeout)
	defer cancel()
	obj, err := opts.OpenObject(ctx, location)
	if err != nil {
		return nil, fmt.Errorf("registries file %s: %w", location, err)
	}
	data, gen, err := obj.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("registries file: %w", err)
	}
	cfg, err := ParseBundle(data, fmt.Sprintf("%s (generation %d)", obj, gen))
	if err != nil {
		return nil, err
	}
	s.object = obj
	s.current.Store(&loaded{cfg: cfg, generation: gen})
	s.nextCheck.Store(s.now().Add(s.interval).UnixNano())
	return s, nil
}

// String is the location the source reads.
func (s *Source) String() string { return s.location }

// Current returns the configuration to use now and the generation of
// the object it was read from (0 for a file), checking the object first
// when a check is due (see Source). It always returns a configuration:
// the one loaded at cold start, or a newer good one.
func (s *Source) Current(ctx context.Context) (*Config, int64) {
	if s.object != nil && s.now().UnixNano() >= s.nextCheck.Load() {
		s.check(ctx)
	}
	l := s.current.Load()
	return l.cfg, l.generation
}

// check reads the object's generation and, when it moved, the object,
// swapping in what it holds if it parses.
func (s *Source) check(ctx context.Context) {
	if !s.mu.TryLock() {
		return // another request is checking: serve what is current
	}
	defer s.mu.Unlock()
	if s.now().UnixNano() < s.nextCheck.Load() {
		return // checked while this request waited for the lock
	}
	// Due again an interval after this check ends, whatever it finds: a
	// slow or failing read (up to the check's bound) is not followed at
	// once by another one, nor retried by every request.
	defer func() { s.nextCheck.Store(s.now().Add(s.interval).UnixNano()) }()
	// The check is the instance's, not the request's: a request that
	// gives up does not make it fail; it is bounded on its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.checkTimeout)
	defer cancel()
	cur := s.current.Load()
	log := s.log.With("object", s.object.String(), "serving_generation", cur.generation)
	gen, err := s.object.Generation(ctx)
	if err != nil {
		log.ErrorContext(ctx, "the registries file's object could not be checked for a change; the configuration loaded stays", "error", err)
		return
	}
	if gen == cur.generation || gen == s.rejected {
		return
	}
	data, read, err := s.object.Read(ctx)
	if err != nil {
		log.ErrorContext(ctx, "the registries file's object changed and could not be read; the configuration loaded stays", "generation", gen, "error", err)
		return
	}
	if gen = read; gen == cur.generation || gen == s.rejected {
		return // changed back (or to the rejected one) before the read
	}
	cfg, err := ParseBundle(data, fmt.Sprintf("%s (generation %d)", s.object, gen))
	if err != nil {
		s.rejected = gen
		log.ErrorContext(ctx, "the registries file's object changed to an invalid configuration; the last good one stays", "generation", gen, "error", err)
		return
	}
	s.current.Store(&loaded{cfg: cfg, generation: gen})
	log.InfoContext(ctx, "the registries file's object changed; its new configuration is in use", "generation", gen, "registries", len(cfg.Registries))
}

// Derived is what a function builds from the registries file (the names
// a bootstrap fans out to, the webhooks, the registries a run reads):
// built from the Source's current configuration, and built again only
// when the Source swaps in another, so the clients it holds are shared
// and nothing is rebuilt per request.
type Derived[T any] struct {
	src   *Source
	build func(*Config) T

	mu  sync.Mutex
	cfg *Config // what val was built from
	val T
}

// Derive returns the value build makes of src's current configuration.
func Derive[T any](src *Source, build func(*Config) T) *Derived[T] {
	return &Derived[T]{src: src, build: build}
}

// Current returns the value for the configuration current now (Source's
// Current: a check may run first).
func (d *Derived[T]) Current(ctx context.Context) T {
	cfg, _ := d.src.Current(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg != cfg {
		d.val, d.cfg = d.build(cfg), cfg
	}
	return d.val
}
