package logging

// The log lines that operators and the log-based metrics of
// terraform/monitoring.tf read. Each carries an "event" field naming it
// and the fields Events lists, always, with the kind listed: this is the
// contract docs/operations.md documents. The code logs them with these
// constants, the tests capture real lines and check them against Events,
// and the terraform tests check every metric's filter, labels and value
// against Events: renaming a field here breaks those tests, not the
// metrics in production.

// FieldEvent is the field that names a contract line.
const FieldEvent = "event"

// The contract lines.
const (
	// EventRunSummary ends every reconcile run of a registry (full,
	// targeted or dry; fetch failed, busy or failed part-way too).
	EventRunSummary = "run_summary"
	// EventBootstrapOperation says a bootstrap operation ended.
	EventBootstrapOperation = "bootstrap_operation"
	// EventCatalogCommit says a commit numbered catalog changes: the
	// catalog moved to revision.
	EventCatalogCommit = "catalog_commit"
	// EventMessageRetry says the reconcile function handed a message back
	// to Pub/Sub for redelivery; after the subscription's
	// max_delivery_attempts, Pub/Sub dead-letters it.
	EventMessageRetry = "message_retry"
	// EventCatalogTooLarge says a catalog function's render made a form
	// over its response limit: refused, never cut (docs/deploy.md).
	EventCatalogTooLarge = "catalog_too_large"
	// EventFreshness says changes reached the catalog, and how long
	// after the event that announced them (kind event) or the start of
	// the bootstrap that found them (kind full): the freshness
	// objective's line.
	EventFreshness = "freshness"
)

// Field names of the contract lines.
const (
	FieldRegistry  = "registry"
	FieldRun       = "run"
	FieldResult    = "result"
	FieldTargeted  = "targeted"
	FieldKind      = "kind"
	FieldDryRun    = "dry_run"
	FieldDuration  = "duration_ms"
	FieldReads     = "reads"
	FieldWrites    = "writes"
	FieldDeletes   = "deletes"
	FieldSpecsRead = "specs_read"

	FieldCreated     = "created"
	FieldUpdated     = "updated"
	FieldUnchanged   = "unchanged"
	FieldUnmarked    = "unmarked"
	FieldMarked      = "marked"
	FieldDeleted     = "deleted"
	FieldKept        = "kept_referenced"
	FieldHeldBack    = "held_back"
	FieldEntryErrors = "entry_errors"
	FieldConflicts   = "conflicts"
	FieldChanges     = "changes"

	FieldOperation        = "operation"
	FieldRegistries       = "registries"
	FieldFailedRegistries = "failed_registries"
	FieldCatalogRevision  = "catalog_revision"

	FieldRevision  = "revision"
	FieldPublished = "published"

	FieldTopic = "topic"

	FieldLatency = "latency_ms"

	FieldServices  = "services"
	FieldBytes     = "bytes"
	FieldGzipBytes = "gzip_bytes"
	FieldLimit     = "limit"
	FieldRefused   = "refused"
)

// Kind is the JSON kind of a contract field's value.
type Kind string

// Kinds.
const (
	String Kind = "string"
	Number Kind = "number"
	Bool   Kind = "bool"
)

// Events lists, for each contract line, the fields it always carries
// (besides severity, message, time and event) and their kinds.
var Events = map[string]map[string]Kind{
	EventRunSummary: {
		FieldRegistry: String, FieldRun: String, FieldResult: String, FieldKind: String, FieldTargeted: Bool, FieldDryRun: Bool,
		FieldCreated: Number, FieldUpdated: Number, FieldUnchanged: Number, FieldUnmarked: Number,
		FieldMarked: Number, FieldDeleted: Number, FieldKept: Number, FieldHeldBack: Number,
		FieldEntryErrors: Number, FieldConflicts: Number, FieldChanges: Number,
		FieldDuration: Number, FieldReads: Number, FieldWrites: Number, FieldDeletes: Number, FieldSpecsRead: Number,
	},
	EventBootstrapOperation: {
		FieldOperation: String, FieldResult: String, FieldDryRun: Bool, FieldRegistries: Number,
		FieldFailedRegistries: Number, FieldCatalogRevision: Number, FieldDuration: Number,
	},
	EventCatalogCommit: {
		FieldRevision: Number, FieldChanges: Number, FieldPublished: Number,
		FieldReads: Number, FieldWrites: Number, FieldDeletes: Number,
	},
	EventMessageRetry: {
		FieldTopic: String,
	},
	EventFreshness: {
		FieldKind: String, FieldLatency: Number, FieldRevision: Number,
	},
	EventCatalogTooLarge: {
		FieldRevision: Number, FieldServices: Number, FieldBytes: Number, FieldGzipBytes: Number,
		FieldLimit: Number, FieldRefused: String,
	},
}
