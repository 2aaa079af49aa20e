package store

// Bootstrap operations: operations/{id}, one document per bootstrap, and
// meta/bootstrap, which names the operation in progress so that
// concurrent bootstraps coalesce onto it.
//
// The store reads and writes them; what an operation does (when a start
// joins the one in progress, its deadline, which report counts, when it
// waits for its commit and when it finishes) is pkg/bootstrap's. Every
// write that must not race is one transaction here that reads the
// documents, hands what it read to the caller's decision, and writes what
// the decision returns: read-modify-write, with the rules kept out of the
// cloud. A transaction can run more than once (Firestore retries one that
// contends), so a decision must be a function of what it is given.

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
)

// OperationsCollection holds the bootstrap operations.
const OperationsCollection = "operations"

// bootstrapDoc, in MetaCollection, names the operation in progress.
const bootstrapDoc = "bootstrap"

// currentOperation is the meta/bootstrap document.
type currentOperation struct {
	Operation string    `firestore:"operation"`
	UpdatedAt time.Time `firestore:"updated_at"`
}

func (s *Store) operations() *firestore.CollectionRef {
	return s.client.Collection(OperationsCollection)
}

func (s *Store) currentOperationRef() *firestore.DocumentRef {
	return s.client.Collection(MetaCollection).Doc(bootstrapDoc)
}

// CurrentOperation reads the operation meta/bootstrap names, with plain
// reads and no transaction: nil when none is named or it is gone. Under
// load (a bootstrap in progress, many callers) this is what a start costs,
// two reads, instead of a transaction on meta/bootstrap per caller.
func (s *Store) CurrentOperation(ctx context.Context) (*api.Operation, error) {
	snap, err := s.currentOperationRef().Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classify(err, "read meta/%s", bootstrapDoc)
	}
	var cur currentOperation
	if err := snap.DataTo(&cur); err != nil {
		return nil, classify(err, "decode meta/%s", bootstrapDoc)
	}
	if cur.Operation == "" {
		return nil, nil
	}
	op, err := s.GetOperation(ctx, cur.Operation)
	if failure.Is(err, failure.NotFound) {
		return nil, nil
	}
	return op, err
}

// OperationStart is what a start transaction writes, as the caller decided
// it from the operation meta/bootstrap names.
type OperationStart struct {
	// Join is the operation to coalesce onto: when set, nothing is written.
	Join *api.Operation
	// Supersede, when set, is the operation meta/bootstrap named, as it is
	// to be rewritten (ended, say, because its deadline passed).
	Supersede *api.Operation
	// Create is the new operation, created and named in meta/bootstrap.
	Create *api.Operation
}

// StartOperation runs a start transaction: it reads meta/bootstrap and
// the operation it names (current is nil when there is none), and writes
// what decide returns. It costs 2 reads (1 when meta/bootstrap names
// nothing) and, for a new operation, 2 writes, plus 1 for a superseded
// one.
func (s *Store) StartOperation(ctx context.Context, decide func(current *api.Operation) OperationStart) (OperationStart, error) {
	var out OperationStart
	writes := 0
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		out, writes = OperationStart{}, 0
		cur, err := txGet[currentOperation](s, tx, s.currentOperationRef())
		if err != nil {
			return err
		}
		var current *api.Operation
		if cur != nil && cur.Operation != "" {
			if current, err = txGet[api.Operation](s, tx, s.operations().Doc(cur.Operation)); err != nil {
				return err
			}
		}
		out = decide(current)
		if out.Join != nil {
			return nil
		}
		if out.Supersede != nil {
			if err := tx.Set(s.operations().Doc(out.Supersede.ID), out.Supersede); err != nil {
				return err
			}
			writes++
		}
		if out.Create == nil {
			return nil
		}
		if err := tx.Create(s.operations().Doc(out.Create.ID), out.Create); err != nil {
			return err
		}
		writes += 2
		return tx.Set(s.currentOperationRef(), currentOperation{Operation: out.Create.ID, UpdatedAt: out.Create.CreatedAt})
	})
	if err != nil {
		return OperationStart{}, classify(err, "start bootstrap")
	}
	s.ops.write(writes)
	return out, nil
}

// UpdateOperation runs a read-modify-write transaction on operations/{id}:
// decide gets the operation as stored, changes it in place and says
// whether to write it back (a decision that changes nothing writes
// nothing). A missing operation is failure.NotFound; that and an error of
// decide are returned as they are, a Firestore error with context. It returns the operation as decide left it, and costs
// 1 read and at most 1 write.
func (s *Store) UpdateOperation(ctx context.Context, id string, decide func(op *api.Operation) (write bool, err error)) (*api.Operation, error) {
	ref := s.operations().Doc(id)
	var (
		op      *api.Operation
		written bool
		decided error
	)
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		written, decided = false, nil
		var err error
		if op, err = txGet[api.Operation](s, tx, ref); err != nil {
			return err
		}
		if op == nil {
			decided = failure.New(failure.NotFound, "operation %s does not exist (expired or never started)", id)
			return decided
		}
		write, err := decide(op)
		if err != nil {
			decided = err
			return err
		}
		if !write {
			return nil
		}
		written = true
		return tx.Set(ref, op)
	})
	if decided != nil {
		return nil, decided
	}
	if err != nil {
		return nil, classify(err, "update operation %s", id)
	}
	if written {
		s.ops.write(1)
	}
	return op, nil
}

// FailOperation ends operations/{id} as failed, with description, by a
// plain update of its state, description, updated_at and expires_at (no
// transaction: the caller fails an operation it knows is stuck, or that it
// just started and could not publish).
func (s *Store) FailOperation(ctx context.Context, id, description string, at, expiresAt time.Time) error {
	_, err := s.operations().Doc(id).Update(ctx, []firestore.Update{
		{Path: "state", Value: api.Failed},
		{Path: "description", Value: description},
		{Path: "updated_at", Value: at},
		{Path: "expires_at", Value: expiresAt},
	})
	if err != nil {
		return classify(err, "fail operation %s", id)
	}
	s.ops.write(1)
	return nil
}

// GetOperation reads operations/{id}; a missing one is failure.NotFound.
func (s *Store) GetOperation(ctx context.Context, id string) (*api.Operation, error) {
	snap, err := s.operations().Doc(id).Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return nil, failure.New(failure.NotFound, "operation %s does not exist", id)
	}
	if err != nil {
		return nil, classify(err, "read operation %s", id)
	}
	var op api.Operation
	if err := snap.DataTo(&op); err != nil {
		return nil, classify(err, "decode operation %s", id)
	}
	return &op, nil
}

// RecentOperations returns up to limit bootstrap operations, newest
// first. A finished operation past its retention is left out, as every
// read treats it (the TTL policy deletes it within a day).
func (s *Store) RecentOperations(ctx context.Context, limit int) ([]api.Operation, error) {
	it := s.operations().OrderBy("created_at", firestore.Desc).Limit(limit).Documents(ctx)
	defer it.Stop()
	now := s.now().UTC()
	var out []api.Operation
	n := 0
	for {
		snap, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return nil, classify(err, "query recent operations")
		}
		n++
		var op api.Operation
		if err := snap.DataTo(&op); err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		if op.Expired(now) {
			continue
		}
		out = append(out, op)
	}
	s.ops.read(n)
	return out, nil
}
