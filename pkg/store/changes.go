package store

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/specsync/specsync/pkg/api"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/spec"
)

// ChangesCollection holds the change feed: changes/{id}, one document per
// visible catalog change.
const ChangesCollection = "changes"

// Change is a changes/{id} document.
//
// A change is written in the same transaction as the spec write it
// describes, as pending: no revision yet, stamped with when it was
// written (PendingAt). No reconcile run numbers changes: one serialized
// committer (CommitPending, called by the commit request's handler)
// numbers every registry's pending changes in write order, in batches,
// each one short transaction that reads meta/catalog, gives the batch the
// next revisions and moves meta/catalog on. So revisions are dense, every
// revision up to meta/catalog's is readable the moment it is visible, the
// one hot document is written by one writer at a time, and a run that
// dies leaves its changes pending for the next commit, whoever asks for
// it.
type Change struct {
	// Revision is 0 (absent) while pending; absent fields are outside
	// every "revision >" query, so a pending change is never served.
	Revision int64          `firestore:"revision,omitempty"`
	Kind     api.ChangeKind `firestore:"kind"`
	SpecID   string         `firestore:"spec_id"`
	Registry string         `firestore:"registry"`
	Name     string         `firestore:"name"`
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
	// PendingAt is set while the change waits for its revision: the
	// commit time of its spec write (see pendingWrite). The committer's
	// query orders on it, and a field only pending changes have selects
	// exactly them (a query ordered on a field leaves out the documents
	// without it). A batch never ends inside a tie of several commits
	// (see CommitPending), so batches follow one total order.
	PendingAt time.Time `firestore:"pending_at,omitempty"`
	// LegacyPendingRegistry is what marked a pending change before the
	// committer (one registry's run committed its own). Only a run of
	// that version that crashed leaves one; the registry's next recovery
	// run adopts it (AdoptLegacyPending).
	LegacyPendingRegistry string `firestore:"pending_registry,omitempty"`
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

// Pending reports whether the change waits for its revision.
func (c *Change) Pending() bool { return c.Revision == 0 }

// InCatalog reports whether the spec is in the catalog after the change.
func (c *Change) InCatalog() bool { return c.SpecJSON != "" }

// commitAttempts bounds the tries of one commit: a commit whose batch
// was numbered meanwhile by another (a redelivered commit request running
// beside the first) reads its batch again.
const commitAttempts = 20

// changeBatch bounds one commit transaction: each change is one write,
// plus meta/catalog, under Firestore's 500 writes per commit.
const changeBatch = 400

// WithCommitBatch returns a store whose commits (CommitPending) number at
// most n pending changes a transaction instead of changeBatch: tests use
// it to cross batch boundaries with a handful of changes (a committer
// that dies between two batches). n must be 1..changeBatch; anything
// else is a caller's bug and panics.
func (s *Store) WithCommitBatch(n int) *Store {
	if n < 1 || n > changeBatch {
		panic(fmt.Sprintf("store: commit batch %d is outside 1..%d (Firestore takes 500 writes a commit, meta/catalog is one of them)", n, changeBatch))
	}
	c := *s
	c.commitBatch = n
	return &c
}

// batch is how many pending changes one commit transaction numbers.
func (s *Store) batch() int {
	if s.commitBatch > 0 {
		return s.commitBatch
	}
	return changeBatch
}

func (s *Store) changes() *firestore.CollectionRef { return s.client.Collection(ChangesCollection) }

func (s *Store) catalogMeta() *firestore.DocumentRef {
	return s.client.Collection(MetaCollection).Doc(catalogDoc)
}

// pend writes a pending change inside the transaction of the spec write
// (the caller counts the write once the transaction committed).
func (s *Store) pend(tx *firestore.Transaction, c Change) error {
	c.At = s.now().UTC()
	c.Revision = 0
	return tx.Create(s.changes().NewDoc(), pendingWrite{Change: c})
}

// pendingWrite is a change as pend writes it. Its pending_at is the
// commit time of the transaction that writes it and its spec, filled in
// by Firestore, not the writer's clock: the committer numbers changes in
// pending_at order, so revisions follow the order the spec writes
// committed. Two writes of one spec (a delete by one registry, the create
// of the same explicit id by another) are serialized by Firestore, so the
// later always gets the later revision, whatever the clocks of the
// function instances that wrote them say. A change committed later than
// a commit's read of its batch has a later commit time than every change
// of that batch (Firestore's reads are strongly consistent), so batch
// boundaries keep the order too; changes of one commit tie, and the
// committer orders them by the writer's clock. (The emulator stamps
// pending_at to the millisecond, so changes of different commits can tie
// there too: the committer then orders them by their documents' create
// times, and never ends a batch inside such a tie, see CommitPending.)
type pendingWrite struct {
	Change
	PendingAt time.Time `firestore:"pending_at,serverTimestamp"`
}

// catalogMetaDoc is meta/catalog.
type catalogMetaDoc struct {
	Revision int64 `firestore:"revision"`
	// Epoch names this store's catalog: written with the first commit
	// of a new store (or the first after an upgrade from a version
	// without it), never changed after. A store recreated or restored
	// gets another, so a watcher can tell its revisions from this one's
	// (the feed's epoch parameter, api.EpochHeader).
	Epoch string `firestore:"epoch,omitempty"`
	// Published is the highest revision pushed to the changes topic.
	Published int64     `firestore:"published"`
	UpdatedAt time.Time `firestore:"updated_at"`
}

// Committed is what one CommitPending did.
type Committed struct {
	// Changes is how many pending changes it numbered.
	Changes int
	// Revision and Published are meta/catalog's after it: every change
	// pending when the commit began has a revision at or below Revision.
	Revision  int64
	Published int64
}

// CommitPending gives every pending change, of every registry, its
// revision, in the order they were written (PendingAt, then the create
// time of its document, then the writer's clock), in batches, until none
// is left. Committed changes expire (ExpiresAt) after retention. It is the committer's: reconcile runs only write
// pending changes, so meta/catalog has one writer at a time.
//
// Each batch is read before its transaction, outside any (a query in a
// transaction would hold the changes collection's range), and the
// transaction only reads meta/catalog and writes: it holds the hot
// document for one read and one commit. Each change is rewritten under a
// precondition on the update time the read saw: if another commit
// numbered one of them meanwhile (a redelivered commit request running
// beside this one), this transaction fails whole and the batch is read
// again, so no change is ever numbered twice.
func (s *Store) CommitPending(ctx context.Context, retention time.Duration) (Committed, error) {
	var out Committed
	stale := 0
	batch := s.batch()
	for {
		// One change more than a batch says whether the batch's last
		// changes tie with the next (below).
		docs, err := s.changes().OrderBy("pending_at", firestore.Asc).Limit(batch + 1).Documents(ctx).GetAll()
		s.ops.read(len(docs))
		if err != nil {
			return out, classify(err, "read the pending changes")
		}
		var next *firestore.DocumentSnapshot
		if len(docs) > batch {
			next, docs = docs[batch], docs[:batch]
		}
		if len(docs) == 0 {
			// Nothing (more) to number: report where the catalog is.
			meta, err := s.readCatalogMeta(ctx)
			if err != nil {
				return out, err
			}
			out.Revision, out.Published = meta.Revision, meta.Published
			return out, nil
		}
		type pending struct {
			ref *firestore.DocumentRef
			at  time.Time // the document's update time, the precondition
			// pendingAt is what the query orders by; created is the
			// change document's create time, the commit time of the spec
			// write at full resolution; written is the writer's clock:
			// changes of one commit (a batch of creates) tie on the first
			// two and keep the order they were written in by the third.
			pendingAt, created, written time.Time
		}
		ps := make([]pending, len(docs))
		for i, d := range docs {
			var c Change
			if err := d.DataTo(&c); err != nil {
				return out, classify(err, "decode pending change %s", d.Ref.ID)
			}
			ps[i] = pending{d.Ref, d.UpdateTime, c.PendingAt, d.CreateTime, c.At}
		}
		if next != nil {
			// The query orders a tie on pending_at by document id, so a
			// full batch may end inside one. On Firestore only the
			// changes of one commit tie (different specs, a batch of
			// creates: their order is the writer's, and harmless). The
			// emulator cuts pending_at to the millisecond and repeats it
			// for tens of milliseconds when loaded, so there changes of
			// several commits tie, two writes of one spec among them, and
			// a batch cut between those would number the later first (a
			// feed that ends saying "marked" for a spec the store holds).
			// So a batch that ends inside a tie of more than one commit
			// (create times differ) leaves that tie to the next batch,
			// which reads it whole; a tie of one commit, Firestore's
			// only kind, costs nothing but the one read past the batch.
			// (A tie longer than a batch is numbered as read.)
			var c Change
			if err := next.DataTo(&c); err != nil {
				return out, classify(err, "decode pending change %s", next.Ref.ID)
			}
			last := ps[len(ps)-1].pendingAt
			k, commits := len(ps), false
			for c.PendingAt.Equal(last) && k > 0 && ps[k-1].pendingAt.Equal(last) {
				commits = commits || !ps[k-1].created.Equal(next.CreateTime)
				k--
			}
			if commits && k > 0 {
				ps = ps[:k]
			}
		}
		// Within the batch, pending_at then the create time (the commit
		// time at full resolution, which tells the emulator's ties
		// apart), then the writer's clock (the changes of one commit).
		sort.SliceStable(ps, func(i, j int) bool {
			switch {
			case !ps[i].pendingAt.Equal(ps[j].pendingAt):
				return ps[i].pendingAt.Before(ps[j].pendingAt)
			case !ps[i].created.Equal(ps[j].created):
				return ps[i].created.Before(ps[j].created)
			}
			return ps[i].written.Before(ps[j].written)
		})
		var meta catalogMetaDoc
		err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			m, err := txGet[catalogMetaDoc](s, tx, s.catalogMeta())
			if err != nil {
				return err
			}
			meta = catalogMetaDoc{}
			if m != nil {
				meta = *m
			}
			now := s.now().UTC()
			fields := map[string]any{"updated_at": now}
			if meta.Epoch == "" {
				meta.Epoch = newEpoch()
				fields["epoch"] = meta.Epoch
			}
			for _, p := range ps {
				meta.Revision++
				if err := tx.Update(p.ref, []firestore.Update{
					{Path: "revision", Value: meta.Revision},
					{Path: "pending_at", Value: firestore.Delete},
					{Path: "expires_at", Value: now.Add(retention)},
				}, firestore.LastUpdateTime(p.at)); err != nil {
					return err
				}
			}
			fields["revision"] = meta.Revision
			return tx.Set(s.catalogMeta(), fields, firestore.MergeAll)
		}, firestore.MaxAttempts(commitAttempts))
		if status.Code(err) == codes.FailedPrecondition && stale < commitAttempts {
			// A change of the batch was numbered (or pruned) since it was
			// read: read the batch again.
			stale++
			continue
		}
		if err != nil {
			return out, classify(err, "commit %d pending changes", len(ps))
		}
		s.ops.write(len(ps) + 1)
		out.Changes += len(ps)
		out.Revision, out.Published = meta.Revision, meta.Published
		if next == nil {
			return out, nil
		}
	}
}

// readCatalogMeta reads meta/catalog (zero before the first change).
func (s *Store) readCatalogMeta(ctx context.Context) (catalogMetaDoc, error) {
	var meta catalogMetaDoc
	snap, err := s.catalogMeta().Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return meta, nil
	}
	if err != nil {
		return meta, classify(err, "read meta/catalog")
	}
	if err := snap.DataTo(&meta); err != nil {
		return meta, classify(err, "decode meta/catalog")
	}
	return meta, nil
}

// AdoptLegacyPending turns the changes a run of the version before the
// committer left pending for registry (it crashed before committing them
// itself) into pending changes the committer numbers. The runner calls it
// only in a recovery run (the previous run did not finish), so it costs
// one read where nothing is left, and nothing otherwise.
func (s *Store) AdoptLegacyPending(ctx context.Context, registry string) (int, error) {
	adopted := 0
	for {
		docs, err := s.changes().Where("pending_registry", "==", registry).Limit(changeBatch).Documents(ctx).GetAll()
		s.ops.read(len(docs))
		if err != nil {
			return adopted, classify(err, "read the legacy pending changes of registry %s", registry)
		}
		if len(docs) == 0 {
			return adopted, nil
		}
		err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			for _, d := range docs {
				at, _ := d.DataAt("at")
				if err := tx.Update(d.Ref, []firestore.Update{
					{Path: "pending_at", Value: at},
					{Path: "pending_registry", Value: firestore.Delete},
				}, firestore.LastUpdateTime(d.UpdateTime)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return adopted, classify(err, "adopt %d legacy pending changes of registry %s", len(docs), registry)
		}
		s.ops.write(len(docs))
		adopted += len(docs)
		if len(docs) < changeBatch {
			return adopted, nil
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
	meta, err := s.readCatalogMeta(ctx)
	if err != nil {
		return nil, err
	}
	return s.UnpublishedAfter(ctx, meta.Published, meta.Revision, limit)
}

// UnpublishedAfter is Unpublished for a caller that has just read
// meta/catalog (the committer): the changes after published, if any are
// at or below revision.
func (s *Store) UnpublishedAfter(ctx context.Context, published, revision int64, limit int) ([]Change, error) {
	if published >= revision {
		return nil, nil
	}
	return s.ChangesAfter(ctx, published, limit)
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
