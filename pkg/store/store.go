// Package store is specsync's Firestore storage: specs, instances,
// registry status, the catalog revision, the change feed and bootstrap
// operations. It is a concrete type tested
// against the Firestore emulator; every operation that must not race is a
// transaction that re-reads what it depends on.
//
// Collections (Firestore native mode):
//
//	specs/{id}          a spec, its owner, digest, state, instance count
//	instances/{id}      a service instance: spec id, plan id (pins the spec)
//	instances/{id}/bindings/{binding_id}
//	                    a service binding of that instance (pins nothing)
//	tombstones/{key}    what a deprovision or unbind left, for last_operation
//	registries/{name}   status of a registry's last runs
//	meta/catalog        the catalog revision (the last committed change) and the store's epoch
//	changes/{id}        the change feed (see Change)
//	operations/{id}     a bootstrap operation (operations.go)
//	meta/bootstrap      names the operation in progress
//
// It is the one package that reads and writes Firestore (the invariant
// checker and test helpers aside): packages above it name no collection
// and open no transaction. Where a write depends on rules of their own
// (pkg/bootstrap's operations), they pass the decision in, and the store
// runs it inside its transaction.
package store

import (
	"context"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
)

// Collection names.
const (
	SpecsCollection      = "specs"
	InstancesCollection  = "instances"
	RegistriesCollection = "registries"
	MetaCollection       = "meta"
	catalogDoc           = "catalog"
)

// Ops counts billable Firestore operations. A document read costs one read
// (a missing document too); a query costs one read per result, at least one.
type Ops struct {
	Reads   atomic.Int64
	Writes  atomic.Int64
	Deletes atomic.Int64
}

// Counts is a snapshot of Ops (the cost a run or a bootstrap reports).
type Counts = api.Counts

// Snapshot returns the current counts.
func (o *Ops) Snapshot() Counts {
	if o == nil {
		return Counts{}
	}
	return Counts{Reads: o.Reads.Load(), Writes: o.Writes.Load(), Deletes: o.Deletes.Load()}
}

func (o *Ops) read(n int) {
	if o == nil {
		return
	}
	if n < 1 {
		n = 1
	}
	o.Reads.Add(int64(n))
}

func (o *Ops) write(n int) {
	if o != nil {
		o.Writes.Add(int64(n))
	}
}

func (o *Ops) delete(n int) {
	if o != nil {
		o.Deletes.Add(int64(n))
	}
}

// Store is the Firestore store. The zero value is not usable; call New.
type Store struct {
	client *firestore.Client
	ops    *Ops
	now    func() time.Time
	// commitBatch is how many pending changes one commit transaction
	// numbers (0: changeBatch); see WithCommitBatch.
	commitBatch int
}

// New returns a store on client.
func New(client *firestore.Client) *Store {
	return &Store{client: client, now: time.Now}
}

// WithOps returns a store that counts its operations into ops.
func (s *Store) WithOps(ops *Ops) *Store {
	c := *s
	c.ops = ops
	return &c
}

// WithClock returns a store that stamps what it writes (marked_at,
// created_at, a change's at, ...) with now instead of time.Now: tests use
// it to stand in for function instances whose clocks disagree.
func (s *Store) WithClock(now func() time.Time) *Store {
	c := *s
	c.now = now
	return &c
}

func (s *Store) specs() *firestore.CollectionRef { return s.client.Collection(SpecsCollection) }
func (s *Store) instances() *firestore.CollectionRef {
	return s.client.Collection(InstancesCollection)
}
func (s *Store) registries() *firestore.CollectionRef {
	return s.client.Collection(RegistriesCollection)
}

// classify maps a Firestore error into the failure vocabulary with context.
// What Firestore itself says (its status text names the project, the
// database and the document path) is marked internal: logged, never
// answered (failure.Describe). A name in the context that is not UTF-8
// is the caller's mistake whatever the client library made of it (it
// refuses such a document id before sending anything, with an error of
// no kind): failure.Invalid, never a retryable failure.
func classify(err error, format string, args ...any) error {
	err = failure.AnnotateBackend(err, format, args...)
	for _, a := range args {
		if s, ok := a.(string); ok && !utf8.ValidString(s) && failure.KindOf(err) == failure.Unknown {
			return failure.Wrap(failure.Invalid, err)
		}
	}
	return err
}

func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// Revision returns the catalog revision (0 before the first change).
func (s *Store) Revision(ctx context.Context) (int64, error) {
	rev, _, err := s.RevisionAt(ctx)
	return rev, err
}

// RevisionAt is Revision with the read time of the snapshot it came from:
// every change with a revision up to the one returned was committed by
// then (ActiveSpecsAt reads the specs as of the same instant).
func (s *Store) RevisionAt(ctx context.Context) (int64, time.Time, error) {
	m, at, err := s.CatalogMetaAt(ctx)
	return m.Revision, at, err
}

// CatalogMeta is the catalog's revision and the epoch of the store it is
// a revision of ("" until the first commit of a new store).
type CatalogMeta struct {
	Revision int64
	Epoch    string
}

// CatalogMetaAt reads meta/catalog once: the revision, the store's epoch,
// and the read time of the snapshot (as RevisionAt).
func (s *Store) CatalogMetaAt(ctx context.Context) (CatalogMeta, time.Time, error) {
	snap, err := s.client.Collection(MetaCollection).Doc(catalogDoc).Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return CatalogMeta{}, snap.ReadTime, nil
	}
	if err != nil {
		return CatalogMeta{}, time.Time{}, classify(err, "read catalog revision")
	}
	var m catalogMetaDoc
	if err := snap.DataTo(&m); err != nil {
		return CatalogMeta{}, time.Time{}, classify(err, "decode catalog revision")
	}
	return CatalogMeta{Revision: m.Revision, Epoch: m.Epoch}, snap.ReadTime, nil
}

// newEpoch is a new store's epoch: random, so that no two stores (a
// database recreated, a restore from backup next to the original) share
// one.
func newEpoch() string { return uuid.NewString() }

// Open connects to Firestore: the emulator when FIRESTORE_EMULATOR_HOST is
// set (the client library does that by itself), Google Cloud otherwise.
// database "" is the default database.
func Open(ctx context.Context, project, database string) (*Store, error) {
	if project == "" {
		return nil, failure.New(failure.Invalid, "no Google Cloud project: set GOOGLE_CLOUD_PROJECT (or pass -project)")
	}
	if database == "" {
		database = firestore.DefaultDatabaseID
	}
	c, err := firestore.NewClientWithDatabase(ctx, project, database)
	if err != nil {
		return nil, classify(err, "connect to Firestore project %s database %s", project, database)
	}
	return New(c), nil
}

// Close releases the client.
func (s *Store) Close() error { return s.client.Close() }

// txGet reads a document inside a transaction into a T, counting the
// read; a missing document is (nil, nil), which is what every
// check-then-write here wants to branch on.
func txGet[T any](s *Store, tx *firestore.Transaction, ref *firestore.DocumentRef) (*T, error) {
	snap, err := tx.Get(ref)
	s.ops.read(1)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v T
	if err := dataTo(snap, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
