package store

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/spec"
)

// ChangesCollection holds the change feed: changes/{id}, one document per
// visible catalog change.
const ChangesCollection = "changes"

// Change kinds: what happened to a spec, as the catalog sees it.
const (
	KindCreated  = "created"
	KindUpdated  = "updated"   // a new version adopted
	KindUnmarked = "unmarked"  // offered again: back in the catalog
	KindMarked   = "marked"    // no longer offered: out of the catalog, kept until unreferenced
	KindDeleted  = "deleted"   // gone for good
	KindHeldBack = "held_back" // a new version not adopted; the served one is unchanged
)

// Change is a changes/{id} document.
//
// A change is written in the same transaction as the spec write it
// describes, as pending: no revision yet, tagged with its registry. At the
// end of the run CommitChanges numbers the registry's pending changes in
// batches, each one transaction that reads meta/catalog, gives the batch
// the next revisions and moves meta/catalog on. So revisions are dense,
// every revision up to meta/catalog's is readable the moment it is
// visible, and the one hot document is written once per batch instead of
// once per spec. A run that dies before committing leaves its changes
// pending; the registry's next run commits them.
type Change struct {
	// Revision is 0 (absent) while pending; absent fields are outside
	// every "revision >" query, so a pending change is never served.
	Revision int64  `firestore:"revision,omitempty"`
	Kind     string `firestore:"kind"`
	SpecID   string `firestore:"spec_id"`
	Registry string `firestore:"registry"`
	Name     string `firestore:"name"`
	// SpecJSON is the spec as the catalog serves it after the change (see
	// SpecRecord.SpecJSON), Generation its adopted version; both are empty
	// when the spec left the catalog (marked, deleted). A change carries
	// the whole new state, so applying one twice is harmless.
	SpecJSON   string `firestore:"spec,omitempty"`
	Generation int64  `firestore:"generation,omitempty"`
	// SpecCreatedAt is the spec's created_at, set with SpecJSON: the
	// catalog resolves two specs claiming one name by it (the oldest
	// keeps the name), so a cache applying changes needs it. Changes
	// written before it existed lack it.
	SpecCreatedAt time.Time `firestore:"spec_created_at,omitempty"`
	// HeldBack is the version not adopted and what blocks it.
	HeldBack *HeldBackSpec `firestore:"held_back,omitempty"`
	Run      string        `firestore:"run,omitempty"`
	At       time.Time     `firestore:"at"`
	// Seq orders one process's changes written in the same instant.
	Seq int64 `firestore:"seq"`
	// PendingRegistry is set while the change waits for its revision.
	PendingRegistry string `firestore:"pending_registry,omitempty"`
	// ExpiresAt is when the Firestore TTL policy may delete the change.
	ExpiresAt time.Time `firestore:"expires_at,omitempty"`
	// WrittenAt is when the change was written: its document's create
	// time, which is the commit time of the transaction that wrote the
	// spec it describes (not stored; set when a change is read). A reader
	// that holds the specs as of a snapshot read time T knows that a change
	// written at or before T is already in it, whatever its revision. So
	// a change is numbered in place (its document updated), never copied
	// to a new document, which would move this time past its spec write.
	WrittenAt time.Time `firestore:"-"`
}

// fromSnapshot implements snapshotted.
func (c *Change) fromSnapshot(snap *firestore.DocumentSnapshot) { c.WrittenAt = snap.CreateTime }

// Spec decodes the spec the change carries (see InCatalog).
func (c *Change) Spec() (*spec.Spec, error) { return decodeSpec(c.SpecID, c.SpecJSON) }

// InCatalog reports whether the spec is in the catalog after the change.
func (c *Change) InCatalog() bool { return c.SpecJSON != "" }

// changeSeq breaks ties between changes stamped with the same time.
var changeSeq atomic.Int64

// commitAttempts is how often a commit transaction is tried: every
// registry's run ends by committing on meta/catalog, so runs that finish
// together contend there, and a lost round is cheap to try again.
const commitAttempts = 20

// changeBatch bounds one commit transaction: each change is one write,
// plus meta/catalog, well under Firestore's 500 writes per commit.
const changeBatch = 200

func (s *Store) changes() *firestore.CollectionRef { return s.client.Collection(ChangesCollection) }

func (s *Store) catalogMeta() *firestore.DocumentRef {
	return s.client.Collection(MetaCollection).Doc(catalogDoc)
}

// pend writes a pending change inside the transaction of the spec write
// (the caller counts the write once the transaction committed).
func (s *Store) pend(tx *firestore.Transaction, c Change) error {
	c.At = s.now().UTC()
	c.Seq = changeSeq.Add(1)
	c.PendingRegistry = c.Registry
	c.Revision = 0
	return tx.Create(s.changes().NewDoc(), c)
}

// catalogMetaDoc is meta/catalog.
type catalogMetaDoc struct {
	Revision int64 `firestore:"revision"`
	// Published is the highest revision pushed to the changes topic.
	Published int64     `firestore:"published"`
	UpdatedAt time.Time `firestore:"updated_at"`
}

// CommitChanges gives every pending change of the registry its revision,
// in the order they were written, and returns them as committed.
// Committed changes expire (ExpiresAt) after retention.
//
// Every registry's run ends here, so runs that finish together contend on
// meta/catalog: the transaction that holds it is kept short. The pending
// changes are read before it, outside any transaction (a query in a
// transaction would hold the changes collection's range while the others
// wait), and each is rewritten with its revision under a precondition on
// the update time that read saw: if another commit numbered one of them
// meanwhile (a run whose lease expired), this commit fails whole and the
// batch is read again, so no change is numbered twice.
func (s *Store) CommitChanges(ctx context.Context, registry string, retention time.Duration) ([]Change, error) {
	var all []Change
	stale := 0
	for {
		docs, err := s.changes().Where("pending_registry", "==", registry).Limit(changeBatch).Documents(ctx).GetAll()
		s.ops.read(len(docs))
		if err != nil {
			return all, classify(err, "read the pending changes of registry %s", registry)
		}
		if len(docs) == 0 {
			return all, nil
		}
		type pending struct {
			ref *firestore.DocumentRef
			at  time.Time // the document's update time, the precondition
			c   Change
		}
		ps := make([]pending, len(docs))
		for i, d := range docs {
			ps[i].ref, ps[i].at = d.Ref, d.UpdateTime
			if err := d.DataTo(&ps[i].c); err != nil {
				return all, classify(err, "decode change %s", d.Ref.ID)
			}
		}
		sort.SliceStable(ps, func(i, j int) bool {
			a, b := ps[i].c, ps[j].c
			if !a.At.Equal(b.At) {
				return a.At.Before(b.At)
			}
			return a.Seq < b.Seq
		})
		var batch []Change
		err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			batch = nil
			meta, err := txGet[catalogMetaDoc](s, tx, s.catalogMeta())
			if err != nil {
				return err
			}
			rev := int64(0)
			if meta != nil {
				rev = meta.Revision
			}
			now := s.now().UTC()
			for _, p := range ps {
				rev++
				c := p.c
				c.Revision, c.PendingRegistry, c.ExpiresAt = rev, "", now.Add(retention)
				if err := tx.Update(p.ref, []firestore.Update{
					{Path: "revision", Value: c.Revision},
					{Path: "pending_registry", Value: firestore.Delete},
					{Path: "expires_at", Value: c.ExpiresAt},
				}, firestore.LastUpdateTime(p.at)); err != nil {
					return err
				}
				batch = append(batch, c)
			}
			return tx.Set(s.catalogMeta(), map[string]any{"revision": rev, "updated_at": now}, firestore.MergeAll)
		}, firestore.MaxAttempts(commitAttempts))
		if status.Code(err) == codes.FailedPrecondition && stale < commitAttempts {
			// A change of the batch was numbered (or pruned) since it was
			// read: read the batch again.
			stale++
			continue
		}
		if err != nil {
			return all, classify(err, "commit the changes of registry %s", registry)
		}
		s.ops.write(len(batch) + 1)
		all = append(all, batch...)
		if len(batch) < changeBatch {
			return all, nil
		}
	}
}

// ChangesAfter returns up to limit committed changes after revision since,
// in revision order.
func (s *Store) ChangesAfter(ctx context.Context, since int64, limit int) ([]Change, error) {
	q := s.changes().Where("revision", ">", since).OrderBy("revision", firestore.Asc).Limit(limit)
	return queryAll[Change](ctx, s, q, fmt.Sprintf("changes after revision %d", since))
}

// Unpublished returns up to limit committed changes not yet published to
// the changes topic, in revision order.
func (s *Store) Unpublished(ctx context.Context, limit int) ([]Change, error) {
	snap, err := s.catalogMeta().Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classify(err, "read the published revision")
	}
	var meta catalogMetaDoc
	if err := snap.DataTo(&meta); err != nil {
		return nil, classify(err, "decode meta/catalog")
	}
	if meta.Published >= meta.Revision {
		return nil, nil
	}
	return s.ChangesAfter(ctx, meta.Published, limit)
}

// MarkPublished records that every change up to revision was published.
// It never moves the mark back: two runs publishing at once may both
// publish a change (subscribers dedupe by revision), never skip one.
func (s *Store) MarkPublished(ctx context.Context, revision int64) error {
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		meta, err := txGet[catalogMetaDoc](s, tx, s.catalogMeta())
		if err != nil {
			return err
		}
		if meta != nil && meta.Published >= revision {
			return nil
		}
		s.ops.write(1)
		return tx.Set(s.catalogMeta(), map[string]any{"published": revision}, firestore.MergeAll)
	})
	if err != nil {
		return classify(err, "record published revision %d", revision)
	}
	return nil
}

// PruneChanges deletes up to limit committed changes that expired before
// now and returns how many it deleted. Production leaves this to the
// Firestore TTL policy on expires_at; the local stack calls it.
func (s *Store) PruneChanges(ctx context.Context, now time.Time, limit int) (int, error) {
	docs, err := s.changes().Where("expires_at", "<", now).Limit(limit).Documents(ctx).GetAll()
	s.ops.read(len(docs))
	if err != nil {
		return 0, classify(err, "find expired changes")
	}
	if len(docs) == 0 {
		return 0, nil
	}
	bw := s.client.BulkWriter(ctx)
	jobs := make([]*firestore.BulkWriterJob, 0, len(docs))
	for _, d := range docs {
		job, err := bw.Delete(d.Ref)
		if err != nil {
			bw.End()
			return 0, classify(err, "prune change %s", d.Ref.ID)
		}
		jobs = append(jobs, job)
	}
	bw.End()
	deleted := 0
	for i, job := range jobs {
		if _, err := job.Results(); err != nil {
			s.ops.delete(deleted)
			return deleted, classify(err, "prune change %s", docs[i].Ref.ID)
		}
		deleted++
	}
	s.ops.delete(deleted)
	return deleted, nil
}
