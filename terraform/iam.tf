# Identities and what they may do. One service account per function, one
# for the push subscriptions, one for the scheduler, one for the builds; no
# primitive role anywhere (the deploy check asserts it on the plan).
#
#   bootstrap  Firestore (operations), publish to the work topic, the admin
#              token, read the config bundle
#   hooks      publish to the work topic, the registries' webhook secrets, read
#              the config bundle; no Firestore at all
#   reconcile  Firestore (specs, registries, operations, the change feed), the
#              registry credentials, publish to the catalog-changes and commit
#              topics, read the config bundle, and read what the registries
#              file reads with auth.type google (Artifact Registry
#              repositories, Cloud Storage buckets: derived, registries.tf)
#   catalog    Firestore (reads; writes only instance records); no secret
#              (it holds credential digests) and no Pub/Sub at all
#   (each)     write its spans to the Telemetry API (roles/telemetry.tracesWriter)
#   push       invoke the reconcile function, nothing else (all of its push
#              subscriptions authenticate as it)
#   scheduler  invoke the bootstrap function, nothing else
#   build      build logs, push to the functions' repository, read the source
#
# IAM cannot scope Firestore to collections: roles/datastore.user is the
# narrowest role that can write, and it covers the whole database. That the
# catalog writes nothing but instance records (and their specs' instance
# counts, in the same transaction) is a property of its code
# (pkg/osb, pkg/store), not of its role. Secret access is granted per
# secret in secrets.tf.

resource "google_service_account" "function" {
  for_each = local.function_entry_points

  project      = var.project_id
  account_id   = "${var.name_prefix}-${each.key}"
  display_name = "specsync ${each.key} function"
  description  = "Runs the specsync ${each.value} function."

  depends_on = [google_project_service.enabled]
}

resource "google_service_account" "reconcile_push" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-reconcile-push"
  display_name = "specsync reconcile push"
  description  = "Identity of the reconcile push subscription: may invoke the reconcile function and nothing else."

  depends_on = [google_project_service.enabled]
}

resource "google_service_account" "scheduler" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-scheduler"
  display_name = "specsync scheduler"
  description  = "Identity of the scheduled bootstrap: may invoke the bootstrap function and nothing else."

  depends_on = [google_project_service.enabled]
}

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-build"
  display_name = "specsync build"
  description  = "Builds the specsync functions (Cloud Build)."

  depends_on = [google_project_service.enabled]
}

# Firestore for every function. datastore.user reads and writes documents;
# it cannot manage indexes, TTL policies or the database.
resource "google_project_iam_member" "function_firestore" {
  for_each = toset([for k in ["bootstrap", "reconcile", "catalog"] : k])

  project = var.project_id
  role    = "roles/datastore.user"
  member  = "serviceAccount:${google_service_account.function[each.key].email}"
}

# Every function sends its spans by OTLP to the Telemetry API
# (SPECSYNC_TRACE=otlp): telemetry.tracesWriter may write spans and nothing
# else (it cannot read them).
resource "google_project_iam_member" "function_trace" {
  for_each = var.tracing ? local.function_entry_points : {}

  project = var.project_id
  role    = "roles/telemetry.tracesWriter"
  member  = "serviceAccount:${google_service_account.function[each.key].email}"
}

# The bootstrap publishes reconcile messages, to the work topic only.
resource "google_pubsub_topic_iam_member" "bootstrap_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.reconcile.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${google_service_account.function["bootstrap"].email}"
}

# The hooks function publishes reconcile messages (a registry's events),
# to the work topic only.
resource "google_pubsub_topic_iam_member" "hooks_publisher" {
  count = contains(keys(local.function_entry_points), "hooks") ? 1 : 0

  project = var.project_id
  topic   = google_pubsub_topic.reconcile.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${google_service_account.function["hooks"].email}"
}

# The reconcile function publishes committed catalog changes, to the
# catalog-changes topic only.
resource "google_pubsub_topic_iam_member" "reconcile_changes_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.catalog_changes.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${google_service_account.function["reconcile"].email}"
}

# The reconcile function asks its own committer for commits, through the
# commit topic only.
resource "google_pubsub_topic_iam_member" "reconcile_commit_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.commit.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${google_service_account.function["reconcile"].email}"
}

# Cloud Build: write build logs (project), push the images to the
# functions' repository and read the uploaded source (those two only).
resource "google_project_iam_member" "build" {
  for_each = toset(["roles/logging.logWriter"])

  project = var.project_id
  role    = each.value
  member  = "serviceAccount:${google_service_account.build.email}"
}

resource "google_artifact_registry_repository_iam_member" "build_writer" {
  project    = var.project_id
  location   = var.region
  repository = google_artifact_registry_repository.functions.repository_id
  role       = "roles/artifactregistry.writer"
  member     = "serviceAccount:${google_service_account.build.email}"
}

resource "google_storage_bucket_iam_member" "build_source_reader" {
  bucket = google_storage_bucket.source.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.build.email}"
}

# The functions that load the registries file read the config bundle
# (config.tf), and nothing else of the bucket's.
resource "google_storage_bucket_iam_member" "config_reader" {
  for_each = toset([for k in ["bootstrap", "reconcile", "hooks"] : k if contains(keys(local.function_entry_points), k)])

  bucket = google_storage_bucket.config.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.function[each.key].email}"
}

# Invokers. run.invoker on the service is what lets a caller through
# Cloud Run's IAM check.

# The reconcile function: only its triggers.
resource "google_cloud_run_v2_service_iam_member" "reconcile_push_invoker" {
  project  = var.project_id
  location = var.region
  name     = google_cloud_run_v2_service.function["reconcile"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.reconcile_push.email}"
}

# The bootstrap function: the scheduler, and the operators
# bootstrap_invokers names (they also send the admin token). With
# bootstrap_public, anyone reaches it and the function's own check (the
# admin token or the scheduler's OIDC token) is the only one.
resource "google_cloud_run_v2_service_iam_member" "scheduler_invoker" {
  project  = var.project_id
  location = var.region
  name     = google_cloud_run_v2_service.function["bootstrap"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.scheduler.email}"
}

resource "google_cloud_run_v2_service_iam_member" "bootstrap_invoker" {
  for_each = toset(var.bootstrap_invokers)

  project  = var.project_id
  location = var.region
  name     = google_cloud_run_v2_service.function["bootstrap"].name
  role     = "roles/run.invoker"
  member   = each.value
}

# Platforms call the catalog with basic auth and registries call the hooks
# with their secrets, which Cloud Run IAM cannot check: the functions do.
# With public_access = "all_users" anyone is an invoker; with
# "invoker_iam_disabled" the services skip the check instead
# (functions.tf), and no allUsers binding exists to be refused.
resource "google_cloud_run_v2_service_iam_member" "public_invoker" {
  for_each = var.public_access == "all_users" ? toset([for k in keys(local.functions) : k if local.public[k]]) : toset([])

  project  = var.project_id
  location = var.region
  name     = google_cloud_run_v2_service.function[each.key].name
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# Pub/Sub's service agent: it signs the push subscription's OIDC tokens as
# the push account, and moves undeliverable messages to the dead-letter
# topic (which needs publish there and subscribe on the source
# subscription).
data "google_project" "this" {
  project_id = var.project_id

  depends_on = [google_project_service.enabled]
}

locals {
  pubsub_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

resource "google_service_account_iam_member" "pubsub_push_token_creator" {
  service_account_id = google_service_account.reconcile_push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}

resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.reconcile_dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  project      = var.project_id
  subscription = google_pubsub_subscription.reconcile_push.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "commit_dead_letter_subscriber" {
  project      = var.project_id
  subscription = google_pubsub_subscription.commit_push.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

# What the registries file reads with the reconcile function's own
# identity (auth.type: google), derived from it (registries.tf): each
# Artifact Registry repository (manifests and tags, nothing more), each
# project read whole, each Cloud Storage bucket. A repository, project or
# bucket of another project needs the applier to be allowed to set its
# IAM policy.
locals {
  artifact_registry_repositories = {
    for p in local.artifact_registry_paths : p => {
      project    = split("/", p)[0]
      location   = split("/", p)[1]
      repository = split("/", p)[2]
    }
  }
}

resource "google_artifact_registry_repository_iam_member" "reconcile_reader" {
  for_each = local.artifact_registry_repositories

  project    = each.value.project
  location   = each.value.location
  repository = each.value.repository
  role       = "roles/artifactregistry.reader"
  member     = "serviceAccount:${google_service_account.function["reconcile"].email}"
}

resource "google_project_iam_member" "reconcile_registry_reader" {
  for_each = local.artifact_registry_projects

  project = each.value
  role    = "roles/artifactregistry.reader"
  member  = "serviceAccount:${google_service_account.function["reconcile"].email}"
}

resource "google_storage_bucket_iam_member" "reconcile_bucket_reader" {
  for_each = local.storage_buckets

  bucket = each.value
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.function["reconcile"].email}"
}

resource "google_pubsub_subscription_iam_member" "gcr_dead_letter_subscriber" {
  for_each = google_pubsub_subscription.gcr_push

  project      = var.project_id
  subscription = each.value.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}
