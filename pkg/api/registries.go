package api

import (
	"regexp"
	"time"
)

// A registry's status: a registries/{name} document, and an entry of the
// catalog function's GET /registries.

// RegistryList is the body of GET /registries, in name order.
type RegistryList struct {
	Registries []RegistryStatus `json:"registries"`
}

// RegistryStatus is the status of a registry's last runs.
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
	// Writer is the run that last began writing the registry's specs.
	Writer string `json:"writer,omitempty" firestore:"writer,omitempty"`
	// Manifest names the registry's manifest (per-entry digests). It
	// describes the store only while Writer is the run that wrote it and
	// no lease is left behind: ManifestTrusted.
	Manifest *ManifestHeader `json:"manifest,omitempty" firestore:"manifest,omitempty"`
	// LastTargeted is the last targeted run: a run of the entries an
	// event named. It never replaces LastRun, the last full run, which
	// stays the registry's baseline.
	LastTargeted *Run `json:"last_targeted_run,omitempty" firestore:"last_targeted_run,omitempty"`
	// Covered are the entries targeted runs reconciled lately, each with
	// the start of the last run that did (newest first, at most
	// MaxCovered): an event's message older than that is done
	// (EventCoverage).
	Covered []CoveredEntry `json:"covered,omitempty" firestore:"covered,omitempty"`
	// CheckedAt is the start of the last run for an event that found the
	// whole registry unchanged: such a run records nothing else (a
	// scheduled one records nothing at all), but the events before it are
	// done.
	CheckedAt time.Time `json:"checked_at,omitzero" firestore:"checked_at,omitempty"`
}

// CoveredEntry says that a run that started at At read entry Entry
// upstream and finished: whatever an event about the entry announced
// before At, that run saw.
type CoveredEntry struct {
	Entry string    `json:"entry" firestore:"entry"`
	At    time.Time `json:"at" firestore:"at"`
}

// MaxCovered bounds the entries a status lists as covered.
const MaxCovered = 200

// ManifestHeader names a registry's manifest: the run that wrote it (it
// describes the store as that run left it) and how many shards it has.
// It is written with the shards, in one transaction.
type ManifestHeader struct {
	Run     string    `json:"run" firestore:"run"`
	Shards  int       `json:"shards" firestore:"shards"`
	Entries int       `json:"entries" firestore:"entries"`
	At      time.Time `json:"at" firestore:"at"`
	// Layout is how entries are placed in shards: ManifestByEntry (by a
	// hash of the entry name, so a run of a few entries reads and writes
	// only their shards), or "" (sorted by spec id, cut by size: the
	// manifests of the version before; only a full run reads those).
	Layout string `json:"layout,omitempty" firestore:"layout,omitempty"`
	// ShardRuns names the run that last wrote each shard (a targeted run
	// rewrites only its own); absent, every shard is Run's.
	ShardRuns []string `json:"shard_runs,omitempty" firestore:"shard_runs,omitempty"`
	// Active is how many of the entries are active specs: the share a
	// targeted run may mark is a share of the registry's, not of the
	// entries it was told about.
	Active int `json:"active" firestore:"active"`
}

// ManifestByEntry is the Layout of a manifest sharded by entry name.
const ManifestByEntry = "by-entry"

// ShardRun is the run that last wrote shard i.
func (h *ManifestHeader) ShardRun(i int) string {
	if i < len(h.ShardRuns) && h.ShardRuns[i] != "" {
		return h.ShardRuns[i]
	}
	return h.Run
}

// Interrupted reports whether a run began writing the registry's specs
// after the last run that recorded (or recorded a manifest) and never
// recorded itself: it died part-way, even where no lease says so (runs
// without one: the local tools). Its writes are not described by the
// recorded listing or manifest.
func (st *RegistryStatus) Interrupted() bool {
	return st.Writer != "" && st.Writer != st.LastRun.ID && (st.Manifest == nil || st.Writer != st.Manifest.Run) &&
		(st.LastTargeted == nil || st.Writer != st.LastTargeted.ID)
}

// ManifestTrusted reports whether the status' manifest describes the
// registry's specs: the run that wrote it is the last that began writing
// them, and no run died holding the lease (a run that died part-way may
// have written after it).
func (st *RegistryStatus) ManifestTrusted() bool {
	return st.Manifest != nil && st.Manifest.Run != "" && st.Manifest.Run == st.Writer && st.Lease == nil
}

// Run is the record of one reconcile run of a registry.
type Run struct {
	ID          string         `json:"id" firestore:"id"`
	Result      RunResult      `json:"result" firestore:"result"`
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
	// Planned is set by dry runs only (which record no run).
	Planned []PlannedChange `json:"planned,omitempty" firestore:"planned,omitempty"`
	// Entries, on a targeted run, are the entries it was told about and
	// reconciled (names the source does not select left out).
	Entries []string `json:"entries,omitempty" firestore:"entries,omitempty"`
	// Backstop, on a full run done for an event that named entries,
	// says why it ran in full (no manifest to trust, a source that cannot
	// fetch single entries).
	Backstop string `json:"backstop,omitempty" firestore:"backstop,omitempty"`
	// Source is where the run read the registry, as the registries file
	// said then (nil: a run of a version before it, or a test's source).
	Source *Source `json:"source,omitempty" firestore:"source,omitempty"`
}

// Source says where a registry is read from, for people (the status
// page): its type, the host, URL, namespace or path it reads, and how it
// authenticates. It never holds a secret: no password, token or user
// name, and a URL without its user information, query or fragment
// (config.Registry.Describe builds it).
type Source struct {
	Type     string `json:"type" firestore:"type"`
	Location string `json:"location" firestore:"location"`
	// Auth is the auth type (anonymous, basic, token, google).
	Auth string `json:"auth,omitempty" firestore:"auth,omitempty"`
}

// EntryError is one registry entry that failed to parse or validate.
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

// SpecConflict is a spec id a registry offers that another owns.
type SpecConflict struct {
	SpecID string `json:"spec_id" firestore:"spec_id"`
	Entry  string `json:"entry" firestore:"entry"`
	Owner  string `json:"owner" firestore:"owner"`
}

// HeldBackSpec is a new version not adopted because instances would be
// stranded; the last good version keeps serving.
type HeldBackSpec struct {
	SpecID   string   `json:"spec_id" firestore:"spec_id"`
	Name     string   `json:"name" firestore:"name"`
	Digest   string   `json:"digest" firestore:"digest"` // of the held-back version
	Blockers []string `json:"blockers" firestore:"blockers"`
	// Instances are the ids of instances the version would strand (at
	// most store.MaxBlockingInstances; Blockers has the full counts).
	Instances []string `json:"instances,omitempty" firestore:"instances,omitempty"`
}

// Lease is the one-reconcile-at-a-time lock of a registry.
type Lease struct {
	Holder    string    `json:"holder" firestore:"holder"`
	ExpiresAt time.Time `json:"expires_at" firestore:"expires_at"`
	// StartedAt is when the holding run started, and Entries what it
	// reads upstream (none: the whole registry): an event older than
	// the run, about what it reads, needs no run of its own.
	StartedAt time.Time `json:"started_at,omitzero" firestore:"started_at,omitempty"`
	Entries   []string  `json:"entries,omitempty" firestore:"entries,omitempty"`
}

// registryName is a registry's name: a DNS label (lowercase letters,
// digits and hyphens, starting with a letter, at most 63), as the
// registries file requires it.
var registryName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// IsRegistryName reports whether s is a registry's name: what the
// registries file admits, and what every message, request and filter that
// names a registry is checked against.
func IsRegistryName(s string) bool { return registryName.MatchString(s) }
