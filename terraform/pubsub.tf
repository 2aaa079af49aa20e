# Pub/Sub: the reconcile work topic and its push subscription to the
# reconcile function (Google's recommended direct trigger for a
# terraform-managed subscription), the dead-letter topic for messages that
# keep failing, and the catalog-changes topic (for the change feed).

resource "google_pubsub_topic" "reconcile" {
  project = var.project_id
  # The bootstrap publishes here (SPECSYNC_TOPIC).
  name = "${var.name_prefix}-reconcile"

  depends_on = [google_project_service.enabled]
}

resource "google_pubsub_topic" "reconcile_dead_letter" {
  project                    = var.project_id
  name                       = "${var.name_prefix}-reconcile-dead-letter"
  message_retention_duration = "${var.dead_letter_retention_seconds}s"

  depends_on = [google_project_service.enabled]
}

# Keeps dead-lettered messages for inspection (a topic without a
# subscription drops them).
resource "google_pubsub_subscription" "reconcile_dead_letter" {
  project                    = var.project_id
  name                       = "${var.name_prefix}-reconcile-dead-letter"
  topic                      = google_pubsub_topic.reconcile_dead_letter.id
  message_retention_duration = "${var.dead_letter_retention_seconds}s"
  ack_deadline_seconds       = 60

  expiration_policy {
    ttl = ""
  }
}

resource "google_pubsub_topic" "catalog_changes" {
  project = var.project_id
  name    = "${var.name_prefix}-catalog-changes"

  depends_on = [google_project_service.enabled]
}

# The reconcile trigger. The reconcile function answers an error (a non-2xx)
# only when retrying can help (store unavailable, lease held); Pub/Sub then
# redelivers with backoff, and after max_delivery_attempts the message goes
# to the dead-letter topic. functions-framework-go turns the push into the
# CloudEvent the function expects, taking the topic from the push path
# (/projects/PROJECT/topics/TOPIC).
resource "google_pubsub_subscription" "reconcile_push" {
  project = var.project_id
  name    = "${var.name_prefix}-reconcile-push"
  topic   = google_pubsub_topic.reconcile.id

  # For a push subscription, how long Pub/Sub waits for the response: at
  # least the function's timeout, so a run is never delivered twice at once
  # by the subscription itself.
  ack_deadline_seconds = var.reconcile_service.timeout_seconds
  # A message older than the operation deadline is of no use (its
  # operation has failed by then).
  message_retention_duration = "${max(600, var.operation_deadline_seconds)}s"

  expiration_policy {
    ttl = ""
  }

  retry_policy {
    minimum_backoff = "${var.reconcile_retry_backoff_seconds.minimum}s"
    maximum_backoff = "${var.reconcile_retry_backoff_seconds.maximum}s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.reconcile_dead_letter.id
    max_delivery_attempts = var.reconcile_max_delivery_attempts
  }

  push_config {
    push_endpoint = "${google_cloudfunctions2_function.function["reconcile"].service_config[0].uri}/projects/${var.project_id}/topics/${google_pubsub_topic.reconcile.name}"

    oidc_token {
      service_account_email = google_service_account.reconcile_push.email
      audience              = google_cloudfunctions2_function.function["reconcile"].service_config[0].uri
    }
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.reconcile_push_invoker,
    google_service_account_iam_member.pubsub_push_token_creator,
  ]
}
