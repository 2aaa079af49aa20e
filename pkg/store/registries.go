package store

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/specsync/specsync/pkg/failure"
)

// RunCounts are the per-run counters a registry status records.
type RunCounts struct {
	Created     int `json:"created" firestore:"created"`
	Updated     int `json:"updated" firestore:"updated"`
	Unchanged   int `json:"unchanged" firestore:"unchanged"`
	Unmarked    int `json:"unmarked" firestore:"unmarked"`
	Repaired    int `json:"repaired" firestore:"repaired"`
	Marked      int `json:"marked" firestore:"marked"`
	Deleted     int `json:"deleted" firestore:"deleted"`
	Kept        int `json:"kept_referenced" firestore:"kept_referenced"`
	EntryErrors int `json:"entry_errors" firestore:"entry_errors"`
	Conflicts   int `json:"conflicts" firestore:"conflicts"`
	HeldBack    int `json:"held_back" firestore:"held_back"`
	// Changes is how many catalog changes the run wrote; they are
	// pending until the committer numbers them.
	Changes int `json:"changes" firestore:"changes"`
}

// HeldBackSpec is a new version not adopted because instances would be
// stranded; the last good version keeps serving.
type HeldBackSpec struct {
	SpecID   string   `json:"spec_id" firestore:"spec_id"`
	Name     string   `json:"name" firestore:"name"`
	Digest   string   `json:"digest" firestore:"digest"` // of the held-back version
	Blockers []string `json:"blockers" firestore:"blockers"`
	// Instances are the ids of instances the version would strand (at
	// most MaxBlockingInstances; Blockers has the full counts).
	Instances []string `json:"instances,omitempty" firestore:"instances,omitempty"`
}

// MaxBlockingInstances bounds the instance ids a held-back version lists.
const MaxBlockingInstances = 20

// EntryError is one failed registry entry, as recorded.
type EntryError struct {
	Entry   string `json:"entry" firestore:"entry"`
	Ref     string `json:"ref,omitempty" firestore:"ref,omitempty"`
	SpecID  string `json:"spec_id,omitempty" firestore:"spec_id,omitempty"`
	Message string `json:"message" firestore:"message"`
}

// KeptSpec is a marked spec kept because instances still use it.
type KeptSpec struct {
	SpecID    string `json:"spec_id" firestore:"spec_id"`
	Name      string `json:"name" firestore:"name"`
	Instances int64  `json:"instances" firestore:"instances"`
}

// SpecConflict is a spec id this registry offers that another owns.
type SpecConflict struct {
	SpecID string `json:"spec_id" firestore:"spec_id"`
	Entry  string `json:"entry" firestore:"entry"`
	Owner  string `json:"owner" firestore:"owner"`
}

// Run is the record of one reconcile run of a registry.
type Run struct {
	ID          string         `json:"id" firestore:"id"`
	Result      string         `json:"result" firestore:"result"`
	Error       string         `json:"error,omitempty" firestore:"error,omitempty"`
	Guard       string         `json:"guard,omitempty" firestore:"guard,omitempty"`
	StartedAt   time.Time      `json:"started_at" firestore:"started_at"`
	FinishedAt  time.Time      `json:"finished_at" firestore:"finished_at"`
	DurationMS  int64          `json:"duration_ms" firestore:"duration_ms"`
	Counts      RunCounts      `json:"counts" firestore:"counts"`
	Ops         Counts         `json:"firestore" firestore:"firestore"`
	Errors      []EntryError   `json:"errors,omitempty" firestore:"errors"`
	ErrorsTotal int            `json:"errors_total" firestore:"errors_total"`
	Kept        []KeptSpec     `json:"kept,omitempty" firestore:"kept"`
	Conflicts   []SpecConflict `json:"conflicts,omitempty" firestore:"conflicts"`
	HeldBack    []HeldBackSpec `json:"held_back,omitempty" firestore:"held_back"`
	// Planned is set by dry runs only (which record no run): admin.go.
	Planned []PlannedChange `json:"planned,omitempty" firestore:"planned,omitempty"`
}

// RegistryStatus is a registries/{name} document.
type RegistryStatus struct {
	Name string `json:"name" firestore:"name"`
	// ListingDigest and ETag are those of the last successful run; a fetch
	// that yields the same digest needs no further work.
	ListingDigest string    `json:"listing_digest,omitempty" firestore:"listing_digest"`
	ETag          string    `json:"etag,omitempty" firestore:"etag"`
	LastSuccessAt time.Time `json:"last_success_at,omitempty" firestore:"last_success_at"`
	// Marked is how many of its specs were marked after the last run; while
	// any are, an unchanged listing still checks whether they can go.
	Marked  int `json:"marked" firestore:"marked"`
	LastRun Run `json:"last_run" firestore:"last_run"`
	// ContestedBy is written by other registries: registry name -> spec ids
	// it offers that this registry owns.
	ContestedBy map[string][]string `json:"contested_by,omitempty" firestore:"contested_by,omitempty"`
	// Lease is set while a run holds the registry, and left behind by a
	// run that died (until the next run takes it over).
	Lease *Lease `json:"lease,omitempty" firestore:"lease,omitempty"`
	// Writer is the run that last began writing the registry's specs
	// (BeginWriting, AcquireLease).
	Writer string `json:"writer,omitempty" firestore:"writer,omitempty"`
	// Manifest names the registry's manifest (per-entry digests). It
	// describes the store only while Writer is the run that wrote it and
	// no lease is left behind: ManifestTrusted.
	Manifest *ManifestHeader `json:"manifest,omitempty" firestore:"manifest,omitempty"`
}

// Interrupted reports whether a run began writing the registry's specs
// after the last run that recorded (or recorded a manifest) and never
// recorded itself: it died part-way, even where no lease says so (runs
// without one: the local tools). Its writes are not described by the
// recorded listing or manifest.
func (st *RegistryStatus) Interrupted() bool {
	return st.Writer != "" && st.Writer != st.LastRun.ID && (st.Manifest == nil || st.Writer != st.Manifest.Run)
}

// ManifestTrusted reports whether the status' manifest describes the
// registry's specs: the run that wrote it is the last that began writing
// them, and no run died holding the lease (a run that died part-way may
// have written after it).
func (st *RegistryStatus) ManifestTrusted() bool {
	return st.Manifest != nil && st.Manifest.Run != "" && st.Manifest.Run == st.Writer && st.Lease == nil
}

// RegistryStatus reads a registry's status; a registry never run has a
// zero status with its name.
func (s *Store) RegistryStatus(ctx context.Context, name string) (*RegistryStatus, error) {
	snap, err := s.registries().Doc(name).Get(ctx)
	s.ops.read(1)
	if isNotFound(err) {
		return &RegistryStatus{Name: name}, nil
	}
	if err != nil {
		return nil, classify(err, "read status of registry %s", name)
	}
	var st RegistryStatus
	if err := snap.DataTo(&st); err != nil {
		return nil, classify(err, "decode status of registry %s", name)
	}
	st.Name = name
	return &st, nil
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
	data, paths := runRecord(name, run, success, digest, etag, marked)
	if _, err := s.registries().Doc(name).Set(ctx, data, firestore.Merge(paths...)); err != nil {
		return classify(err, "record run of registry %s", name)
	}
	s.ops.write(1)
	return nil
}

// runRecord is what recording a run writes, and the top-level fields it
// merges: last_run is replaced whole (MergeAll would merge it leaf by leaf
// and keep, say, an old run's error).
func runRecord(name string, run Run, success bool, digest, etag string, marked int) (map[string]any, []firestore.FieldPath) {
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
	paths := make([]firestore.FieldPath, 0, len(data)+1)
	for k := range data {
		paths = append(paths, firestore.FieldPath{k})
	}
	return data, paths
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

// Lease is the one-reconcile-at-a-time lock of a registry.
type Lease struct {
	Holder    string    `json:"holder" firestore:"holder"`
	ExpiresAt time.Time `json:"expires_at" firestore:"expires_at"`
}

// leaseDoc is the part of a registries/{name} document the lease reads.
type leaseDoc struct {
	Lease *Lease `firestore:"lease"`
}

// AcquireLease takes the registry's lease for holder until ttl from now,
// and records holder as the registry's writer (BeginWriting) in the same
// write. A lease held by another holder and not yet expired is a
// failure.Precondition: the caller should retry later (for Pub/Sub: return
// the error so the message is redelivered with backoff), not wait here.
// A holder re-acquiring its own lease extends it.
func (s *Store) AcquireLease(ctx context.Context, registry, holder string, ttl time.Duration) error {
	ref := s.registries().Doc(registry)
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		doc, err := txGet[leaseDoc](s, tx, ref)
		if err != nil {
			return err
		}
		now := s.now().UTC()
		if doc != nil {
			if l := doc.Lease; l != nil && l.Holder != holder && now.Before(l.ExpiresAt) {
				return failure.New(failure.Precondition, "registry %s is being reconciled by %s until %s", registry, l.Holder, l.ExpiresAt.Format(time.RFC3339))
			}
		}
		return tx.Set(ref, map[string]any{"lease": Lease{Holder: holder, ExpiresAt: now.Add(ttl)}, "writer": holder},
			firestore.Merge(firestore.FieldPath{"lease"}, firestore.FieldPath{"writer"}))
	})
	if err != nil {
		return classify(err, "acquire lease of registry %s", registry)
	}
	s.ops.write(1)
	return nil
}

// ReleaseLease gives the lease up if holder still has it.
func (s *Store) ReleaseLease(ctx context.Context, registry, holder string) error {
	ref := s.registries().Doc(registry)
	released := false
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		released = false
		doc, err := txGet[leaseDoc](s, tx, ref)
		if err != nil || doc == nil {
			return err
		}
		if doc.Lease == nil || doc.Lease.Holder != holder {
			return nil
		}
		released = true
		return tx.Update(ref, []firestore.Update{{Path: "lease", Value: firestore.Delete}})
	})
	if err != nil {
		return classify(err, "release lease of registry %s", registry)
	}
	if released {
		s.ops.write(1)
	}
	return nil
}
