# Firestore (native mode): the database, the composite indexes the store's
# queries need, and TTL policies for the fields that expire.
#
# The emulator does not enforce indexes; production does. The indexes are
# derived from pkg/store/queries.go (store.Queries, itself checked against
# the store's code), and terraform/firestore_test.go checks that every query
# there has its index here and that no index here is left without a query.
# Queries on one field are served by Firestore's automatic single-field
# indexes and need nothing here.

locals {
  # The database every function but hooks uses: created here, or (with
  # create_firestore_database = false) one that exists already.
  firestore_database = var.create_firestore_database ? google_firestore_database.main[0].name : var.firestore_database
}

resource "google_firestore_database" "main" {
  count = var.create_firestore_database ? 1 : 0

  project     = var.project_id
  name        = var.firestore_database
  location_id = var.firestore_location != null ? var.firestore_location : var.region
  type        = "FIRESTORE_NATIVE"
  # The store relies on transactions that lock what they read.
  concurrency_mode = "PESSIMISTIC"

  # Holds the catalog and the instance records: never deleted by terraform.
  # ABANDON makes `terraform destroy` forget it; delete protection keeps it
  # from being deleted by anyone until switched off.
  delete_protection_state = var.deletion_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy         = "ABANDON"
  # Point-in-time recovery: every document as it was at any minute of the
  # last 7 days can be read back or restored into a new database
  # (docs/operations.md#restoring-the-catalog).
  point_in_time_recovery_enablement = var.firestore_point_in_time_recovery ? "POINT_IN_TIME_RECOVERY_ENABLED" : "POINT_IN_TIME_RECOVERY_DISABLED"

  depends_on = [google_project_service.enabled]
}

# store.Queries MarkedSpecs: specs where registry == R and state == marked.
# (Firestore can sometimes serve equality on two fields by merging
# single-field indexes; the composite index makes it direct and certain.)
resource "google_firestore_index" "specs_registry_state" {
  project     = var.project_id
  database    = local.firestore_database
  collection  = "specs"
  query_scope = "COLLECTION"

  fields {
    field_path = "registry"
    order      = "ASCENDING"
  }
  fields {
    field_path = "state"
    order      = "ASCENDING"
  }
}

# store.Queries RegistrySpecsNamed: specs where registry == R and name ==
# N, which a targeted run asks of the names its entries offer (names are
# unique in a registry's listing, and an explicit id need not derive from
# the name).
resource "google_firestore_index" "specs_registry_name" {
  project     = var.project_id
  database    = local.firestore_database
  collection  = "specs"
  query_scope = "COLLECTION"

  fields {
    field_path = "registry"
    order      = "ASCENDING"
  }
  fields {
    field_path = "name"
    order      = "ASCENDING"
  }
}

# operations/{id}.expires_at (bootstrap.Operation.ExpiresAt): a finished
# bootstrap is forgotten after SPECSYNC_OPERATION_RETENTION; reads already
# treat it as gone, TTL deletes it (within about a day of expiring; TTL
# deletes are billed as deletes). The field is only ever read by TTL, so it
# has no single-field indexes.
#
# Not here on purpose: registries/{name}.lease.expires_at is a lease
# inside the registry's status document; a TTL on it would delete the
# status.
resource "google_firestore_field" "operations_expires_at" {
  project    = var.project_id
  database   = local.firestore_database
  collection = "operations"
  field      = "expires_at"

  ttl_config {}

  index_config {}
}

# changes/{id}.expires_at (store.Change.ExpiresAt): a change record leaves
# the feed after SPECSYNC_CHANGE_RETENTION; the feed answers 410 Gone to a
# watcher that needs a record already gone, so a late TTL delete is
# harmless. The single-field index stays: the local stack's pruner queries
# the field.
resource "google_firestore_field" "changes_expires_at" {
  project    = var.project_id
  database   = local.firestore_database
  collection = "changes"
  field      = "expires_at"

  ttl_config {}
}

# tombstones/{id}.expires_at (store.Tombstone.ExpiresAt): what a deprovision
# or an unbind leaves, so OSB's last_operation can answer 410 Gone for a
# deleted instance or binding instead of 404; kept store.TombstoneRetention
# (7 days). Reads already treat an expired tombstone as absent, so a late
# TTL delete is harmless. Only TTL reads the field: no single-field index.
resource "google_firestore_field" "tombstones_expires_at" {
  project    = var.project_id
  database   = local.firestore_database
  collection = "tombstones"
  field      = "expires_at"

  ttl_config {}

  index_config {}
}
