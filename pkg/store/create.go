package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
)

// encodeOffer is the stored form of an offered spec: its JSON and its
// platforms as strings.
func encodeOffer(o Offer) ([]byte, []string, error) {
	body, err := json.Marshal(o.Spec)
	if err != nil {
		return nil, nil, failure.Wrap(failure.Invalid, fmt.Errorf("spec %s: encode: %w", o.Spec.ID, err))
	}
	platforms := make([]string, len(o.Spec.Platforms))
	for i, p := range o.Spec.Platforms {
		platforms[i] = p.String()
	}
	return body, platforms, nil
}

// encoded is an offer with its stored form (see encodeOffer).
type encoded struct {
	Offer
	body      []byte
	platforms []string
}

// create writes a new spec, generation 1, and its pending "created"
// change in tx. tx.Create carries Firestore's must-not-exist
// precondition: the commit fails if the document appeared meanwhile.
func (s *Store) create(tx *firestore.Transaction, e encoded, now time.Time) error {
	if err := tx.Create(s.specs().Doc(e.Spec.ID), SpecRecord{
		ID: e.Spec.ID, Registry: e.Registry, Entry: e.Entry, Ref: e.Ref, Name: e.Spec.Name,
		Digest: e.Digest, SpecJSON: string(e.body), State: api.SpecActive, Platforms: e.platforms,
		Generation: 1, CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		return err
	}
	return s.pend(tx, Change{Kind: api.ChangeCreated, Generation: 1, SpecID: e.Spec.ID, Registry: e.Registry,
		Name: e.Spec.Name, SpecJSON: string(e.body), SpecCreatedAt: now, Run: e.Run})
}

// Limits of one CreateSpecs batch: two writes a spec (the spec and its
// change), well under Firestore's 500 writes a commit, and the spec JSON,
// which both documents carry, well under the 10 MiB a commit may hold (a
// spec is at most spec.MaxSpecBytes). Fifty a batch import as fast as a
// hundred on the emulator and hold half as much in flight (the 10,000-spec
// benchmark peaked at 92 MiB, against 99 to 111 with a hundred).
const (
	createBatch      = 50
	createBatchBytes = 4 << 20
)

// CreateBatch is a group of offers CreateSpecs writes in one commit.
type CreateBatch struct{ offers []encoded }

// Len is the number of offers in the batch.
func (b CreateBatch) Len() int { return len(b.offers) }

// CreateBatches groups offers of specs the caller believes absent into
// batches for CreateSpecs, in order.
func CreateBatches(offers []Offer) ([]CreateBatch, error) {
	var out []CreateBatch
	var cur CreateBatch
	size := 0
	for _, o := range offers {
		body, platforms, err := encodeOffer(o)
		if err != nil {
			return nil, err
		}
		if cur.Len() > 0 && (cur.Len() == createBatch || size+2*len(body) > createBatchBytes) {
			out, cur, size = append(out, cur), CreateBatch{}, 0
		}
		cur.offers = append(cur.offers, encoded{o, body, platforms})
		size += 2 * len(body)
	}
	if cur.Len() > 0 {
		out = append(out, cur)
	}
	return out, nil
}

// CreateSpecs creates a batch of specs the caller believes absent (they
// were not among the registry's specs it just read) with their pending
// changes, in one transaction that reads nothing: a first import costs a
// commit per fifty specs instead of a read-write transaction per spec.
// If any of them exists after all (owned by another registry, or created
// since), the precondition fails the whole commit, atomically, and each
// offer of the batch goes through UpsertSpec, which sorts out conflicts.
// Results are in the batch's order.
func (s *Store) CreateSpecs(ctx context.Context, b CreateBatch) ([]UpsertResult, error) {
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		now := s.now().UTC()
		for _, e := range b.offers {
			if err := s.create(tx, e, now); err != nil {
				return err
			}
		}
		return nil
	})
	if status.Code(err) == codes.AlreadyExists {
		out := make([]UpsertResult, len(b.offers))
		for i, e := range b.offers {
			if out[i], err = s.UpsertSpec(ctx, e.Offer); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if err != nil {
		return nil, classify(err, "create %d specs (first %s)", len(b.offers), b.offers[0].Spec.ID)
	}
	s.ops.write(2 * len(b.offers))
	out := make([]UpsertResult, len(b.offers))
	for i := range out {
		out[i] = UpsertResult{Outcome: Created}
	}
	return out, nil
}
