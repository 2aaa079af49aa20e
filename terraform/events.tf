# Artifact Registry's notifications: it publishes every push, tag and
# delete of a project's repositories to that project's topic named gcr
# (the name is fixed), as {"action", "digest", "tag"}. The reconcile
# function subscribes to the gcr topic of every project whose Artifact
# Registry a source of the registries file reads (local.event_projects,
# registries.tf), tells the notifications from its other messages by
# their body, maps each to the registries that select it, and runs those
# entries; what no registry selects (most pushes of a project) is
# acknowledged at once.
#
# The topic is adopted, never created, by default: Artifact Registry
# creates gcr itself when its API is enabled in a project (Container
# Registry did too), so a project that holds a repository has it, and a
# create would fail with 409. The plan reads each topic first, so a
# project without one stops the plan before anything is created, naming
# the topic; then either create it (`gcloud pubsub topics create gcr
# --project=PROJECT`) or, for the module's own project only, set
# artifact_registry_events = "create". Subscribing to another project's
# topic needs the applier to hold pubsub.topics.attachSubscription there
# (roles/pubsub.subscriber on the topic, or roles/pubsub.editor).

locals {
  # The module's own project's topic, created here (artifact_registry_events
  # = "create") rather than adopted.
  create_gcr_topic = var.artifact_registry_events == "create" && contains(local.event_projects, var.project_id)
}

resource "google_pubsub_topic" "gcr" {
  count = local.create_gcr_topic ? 1 : 0

  project = var.project_id
  name    = "gcr"
  labels  = local.labels

  # The topic is the project's, not specsync's: other subscribers may use
  # it. To stop managing it, `terraform state rm` it first.
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [google_project_service.enabled]
}

# The module's project's topic, adopted: read once the APIs are on (so on a
# first apply, at apply time).
data "google_pubsub_topic" "gcr_own" {
  count = contains(local.event_projects, var.project_id) && !local.create_gcr_topic ? 1 : 0

  project = var.project_id
  name    = "gcr"

  depends_on = [google_project_service.enabled]
}

# Other projects' topics: read at plan time, so a missing one stops the
# plan before anything is created.
data "google_pubsub_topic" "gcr_other" {
  for_each = setsubtract(local.event_projects, [var.project_id])

  project = each.key
  name    = "gcr"
}

locals {
  gcr_topic_ids = merge(
    { for t in google_pubsub_topic.gcr : t.project => "projects/${t.project}/topics/${t.name}" },
    { for t in data.google_pubsub_topic.gcr_own : var.project_id => "projects/${var.project_id}/topics/${t.name}" },
    { for p, t in data.google_pubsub_topic.gcr_other : p => "projects/${p}/topics/${t.name}" },
  )
}

# The events' trigger, like the reconcile trigger: OIDC as the push
# account, the same retries and dead letters (a retryable failure of a
# run, such as a lease held by a full run, is redelivered with backoff,
# and dead-lettered after max_delivery_attempts: never retried forever).
# The subscription is in the module's project, whichever project the
# topic is in.
resource "google_pubsub_subscription" "gcr_push" {
  for_each = local.event_projects

  project = var.project_id
  name    = "${var.name_prefix}-gcr-${each.key}"
  topic   = local.gcr_topic_ids[each.key]
  labels  = local.labels

  ack_deadline_seconds = var.reconcile_service.timeout_seconds
  # An event older than this is of no use: the scheduled bootstrap reads
  # what it announced anyway.
  message_retention_duration = "${max(600, var.operation_deadline_seconds)}s"

  expiration_policy {
    ttl = ""
  }

  retry_policy {
    minimum_backoff = "${var.reconcile_retry_backoff_seconds.minimum}s"
    maximum_backoff = "${var.reconcile_retry_backoff_seconds.maximum}s"
  }

  dead_letter_policy {
    dead_letter_topic     = local.topic_paths.dead_letter
    max_delivery_attempts = var.reconcile_max_delivery_attempts
  }

  push_config {
    # functions-framework-go takes the event's source from the push path.
    push_endpoint = "${google_cloud_run_v2_service.function["reconcile"].uri}/projects/${each.key}/topics/gcr"

    oidc_token {
      service_account_email = google_service_account.reconcile_push.email
      audience              = local.audiences["reconcile"]
    }
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.reconcile_push_invoker,
    google_service_account_iam_member.pubsub_push_token_creator,
  ]
}
