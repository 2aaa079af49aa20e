package store

import (
	"context"
	"time"

	"github.com/specsync/specsync/pkg/api"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/pkg/failure"
)

// The registries/{name} document is the api type a GET /registries
// answers, field for field.
type (
	RegistryStatus = api.RegistryStatus
	ManifestHeader = api.ManifestHeader
	Run            = api.Run
	RunCounts      = api.RunCounts
	HeldBackSpec   = api.HeldBackSpec
	EntryError     = api.EntryError
	KeptSpec       = api.KeptSpec
	SpecConflict   = api.SpecConflict
	Lease          = api.Lease
	CoveredEntry   = api.CoveredEntry
)

// MaxBlockingInstances bounds the instance ids a held-back version lists.
const MaxBlockingInstances = 20

// RegistryStatus reads a registry's status; a registry never run has a
// zero status with its name.
func (s *Store) RegistryStatus(ctx context.Context, name string) (*RegistryStatus, error) {
	st, _, err := s.statusSnap(ctx, name)
	return st, err
}

// statusSnap is RegistryStatus with the snapshot it was read from (one
// read): ClaimLease writes on condition of its update time, or of its
// absence (Exists false) for a registry never run.
func (s *Store) statusSnap(ctx context.Context, name string) (*RegistryStatus, *firestore.DocumentSnapshot, error) {
	snap, err := s.registries().Doc(name).Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return &RegistryStatus{Name: name}, snap, nil
	}
	if err != nil {
		return nil, nil, classify(err, "read status of registry %s", name)
	}
	var st RegistryStatus
	if err := snap.DataTo(&st); err != nil {
		return nil, nil, classify(err, "decode status of registry %s", name)
	}
	st.Name = name
	return &st, snap, nil
}

// RegistryStatuses reads every registry's status, in name order.
func (s *Store) RegistryStatuses(ctx context.Context) ([]RegistryStatus, error) {
	snaps, err := s.registries().OrderBy(firestore.DocumentID, firestore.Asc).Documents(ctx).GetAll()
	s.ops.read(len(snaps))
	if err != nil {
		return nil, classify(err, "read registry statuses")
	}
	out := make([]RegistryStatus, 0, len(snaps))
	for _, snap := range snaps {
		var st RegistryStatus
		if err := snap.DataTo(&st); err != nil {
			return nil, classify(err, "decode %s", snap.Ref.Path)
		}
		st.Name = snap.Ref.ID
		out = append(out, st)
	}
	return out, nil
}

// RecordRun writes the outcome of a run. success says whether the listing
// digest and ETag become the new baseline; a failed or guarded run keeps
// the old baseline so the next run does the full work again. Fields other
// registries or other components own (contested_by, leases) are left alone.
func (s *Store) RecordRun(ctx context.Context, name string, run Run, success bool, digest, etag string, marked int) error {
	data := runRecord(name, run, success, digest, etag, marked)
	if _, err := s.registries().Doc(name).Set(ctx, data, firestore.Merge(mergePaths(data)...)); err != nil {
		return classify(err, "record run of registry %s", name)
	}
	s.ops.write(1)
	return nil
}

// runRecord is what recording a run writes, each top-level field merged
// whole (mergePaths): last_run is replaced whole (MergeAll would merge it
// leaf by leaf and keep, say, an old run's error).
func runRecord(name string, run Run, success bool, digest, etag string, marked int) map[string]any {
	data := map[string]any{
		"name":     name,
		"last_run": run,
		"marked":   marked,
	}
	if success {
		data["listing_digest"] = digest
		data["etag"] = etag
		data["last_success_at"] = run.FinishedAt
	}
	return data
}

// mergePaths are data's top-level fields, for a Set that merges each of
// them whole (firestore.MergeAll would merge a map value leaf by leaf).
func mergePaths(data map[string]any) []firestore.FieldPath {
	paths := make([]firestore.FieldPath, 0, len(data))
	for k := range data {
		paths = append(paths, firestore.FieldPath{k})
	}
	return paths
}

// SetContested records on owner's status which spec ids registry offers
// that owner holds (an empty list removes the record).
func (s *Store) SetContested(ctx context.Context, owner, registry string, ids []string) error {
	var val any = ids
	if len(ids) == 0 {
		val = firestore.Delete
	}
	_, err := s.registries().Doc(owner).Set(ctx, map[string]any{
		"contested_by": map[string]any{registry: val},
	}, firestore.MergeAll)
	if err != nil {
		return classify(err, "record contested specs on registry %s", owner)
	}
	s.ops.write(1)
	return nil
}

// AcquireLease takes the registry's lease for holder until ttl from now
// (TakeLease, for a holder that needs nothing of the status).
func (s *Store) AcquireLease(ctx context.Context, registry, holder string, ttl time.Duration) error {
	_, err := s.TakeLease(ctx, registry, Lease{Holder: holder}, ttl)
	return err
}

// TakeLease takes the registry's lease for l.Holder until ttl from now
// (l.ExpiresAt is set here; l.StartedAt and l.Entries say what the
// holding run reads, for whoever finds the lease held), and records the
// holder as the registry's writer (BeginWriting) in the same write. It
// returns the registry's status as it was just before: the state the
// holder works from, read in the transaction that took the lease, so no
// run recorded after it. A lease held by another holder and not yet
// expired is a failure.Precondition: the caller should retry later (for
// Pub/Sub: return the error so the message is redelivered with backoff),
// not wait here. A holder re-acquiring its own lease extends it.
func (s *Store) TakeLease(ctx context.Context, registry string, l Lease, ttl time.Duration) (*RegistryStatus, error) {
	ref := s.registries().Doc(registry)
	var before *RegistryStatus
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := txGet[RegistryStatus](s, tx, ref)
		if err != nil {
			return err
		}
		if cur == nil {
			cur = &RegistryStatus{}
		}
		cur.Name = registry
		before = cur
		now := s.now().UTC()
		if err := heldByAnother(registry, cur.Lease, l.Holder, now); err != nil {
			return err
		}
		l.ExpiresAt = now.Add(ttl)
		return tx.Set(ref, map[string]any{"lease": l, "writer": l.Holder},
			firestore.Merge(firestore.FieldPath{"lease"}, firestore.FieldPath{"writer"}))
	})
	if err != nil {
		return nil, classify(err, "acquire lease of registry %s", registry)
	}
	s.ops.write(1)
	return before, nil
}

// heldByAnother refuses a lease that another holder has and has not let
// expire (a failure.Precondition: retry later); TakeLease and ClaimLease
// both take a lease by it.
func heldByAnother(registry string, h *Lease, holder string, now time.Time) error {
	if h != nil && h.Holder != holder && now.Before(h.ExpiresAt) {
		return failure.New(failure.Precondition, "registry %s is being reconciled by %s until %s", registry, h.Holder, h.ExpiresAt.Format(time.RFC3339))
	}
	return nil
}

// heldBy reports whether the status shows the lease held by holder,
// expired or not: what giving it up checks (releaseLease, RecordChecked,
// RecordTargetedRun), so that no holder ever deletes another's lease.
func heldBy(st *RegistryStatus, holder string) bool {
	return st != nil && st.Lease != nil && st.Lease.Holder == holder
}

// ClaimLease is TakeLease without a transaction, for the runs events ask
// for, which may try many at once: it reads the status and writes the
// lease (and the writer) on condition that the document is as read (its
// update time; must not exist, when it did not). Many runs trying at once
// never wait on each other's locks: one wins, the others find the status
// changed and are busy, as if they had found the lease held (a
// failure.Precondition). It returns the status as read, which is what
// the holder works from.
func (s *Store) ClaimLease(ctx context.Context, registry string, l Lease, ttl time.Duration) (*RegistryStatus, error) {
	before, snap, err := s.statusSnap(ctx, registry)
	if err != nil {
		return nil, err
	}
	ref := s.registries().Doc(registry)
	now := s.now().UTC()
	if err := heldByAnother(registry, before.Lease, l.Holder, now); err != nil {
		return nil, err
	}
	l.ExpiresAt = now.Add(ttl)
	if snap != nil && snap.Exists() {
		_, err = ref.Update(ctx, []firestore.Update{{Path: "lease", Value: l}, {Path: "writer", Value: l.Holder}}, firestore.LastUpdateTime(snap.UpdateTime))
	} else {
		_, err = ref.Create(ctx, map[string]any{"lease": l, "writer": l.Holder})
	}
	if c := status.Code(err); c == codes.FailedPrecondition || c == codes.AlreadyExists {
		return nil, failure.New(failure.Precondition, "registry %s changed while a run of it took the lease: another run is taking it", registry)
	}
	if err != nil {
		return nil, classify(err, "acquire lease of registry %s", registry)
	}
	s.ops.write(1)
	return before, nil
}

// RecordChecked records that run, for an event, found the registry
// unchanged (checked_at: its start, never moved back), and gives its
// lease up if it still holds it, in one write, putting the registry's
// writer back to writer, as ReleaseLeaseWriting does (it wrote nothing).
func (s *Store) RecordChecked(ctx context.Context, registry string, run Run, writer string) error {
	ref := s.registries().Doc(registry)
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := txGet[RegistryStatus](s, tx, ref)
		if err != nil {
			return err
		}
		data := map[string]any{"checked_at": run.StartedAt}
		if cur != nil && cur.CheckedAt.After(run.StartedAt) {
			data["checked_at"] = cur.CheckedAt
		}
		if heldBy(cur, run.ID) {
			data["lease"] = firestore.Delete
		}
		if cur != nil && cur.Writer == run.ID {
			data["writer"] = restoredWriter(writer)
		}
		return tx.Set(ref, data, firestore.Merge(mergePaths(data)...))
	})
	if err != nil {
		return classify(err, "record the check of registry %s", registry)
	}
	s.ops.write(1)
	return nil
}

// ReleaseLease gives the lease up if holder still has it.
func (s *Store) ReleaseLease(ctx context.Context, registry, holder string) error {
	return s.releaseLease(ctx, registry, holder, nil)
}

// ReleaseLeaseWriting is ReleaseLease for a holder that wrote nothing and
// records nothing (it found the registry unchanged): the lease named it
// the registry's writer, and that goes back to writer, the one it found,
// so that a run that never recorded is not taken for one that died
// part-way (RegistryStatus.Interrupted).
func (s *Store) ReleaseLeaseWriting(ctx context.Context, registry, holder, writer string) error {
	return s.releaseLease(ctx, registry, holder, &writer)
}

func (s *Store) releaseLease(ctx context.Context, registry, holder string, writer *string) error {
	ref := s.registries().Doc(registry)
	released := false
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		released = false
		doc, err := txGet[RegistryStatus](s, tx, ref)
		if err != nil || doc == nil {
			return err
		}
		if !heldBy(doc, holder) {
			return nil
		}
		released = true
		updates := []firestore.Update{{Path: "lease", Value: firestore.Delete}}
		if writer != nil && doc.Writer == holder {
			updates = append(updates, firestore.Update{Path: "writer", Value: restoredWriter(*writer)})
		}
		return tx.Update(ref, updates)
	})
	if err != nil {
		return classify(err, "release lease of registry %s", registry)
	}
	if released {
		s.ops.write(1)
	}
	return nil
}

// restoredWriter is the value that puts writer back ("": none).
func restoredWriter(writer string) any {
	if writer == "" {
		return firestore.Delete
	}
	return writer
}
