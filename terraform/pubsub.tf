# Pub/Sub: the reconcile work topic and its push subscription to the
# reconcile function (Google's recommended direct trigger for a
# terraform-managed subscription), the commit topic and its ordered push
# subscription to the same function (the change feed's one committer),
# the dead-letter topic for messages that keep
# failing, and the catalog-changes topic (for the change feed).

# Topics by path (projects/P/topics/T): known at plan time, unlike a
# topic's id, so the plan shows which topic each subscription reads.
locals {
  topic_paths = {
    reconcile   = "projects/${var.project_id}/topics/${google_pubsub_topic.reconcile.name}"
    dead_letter = "projects/${var.project_id}/topics/${google_pubsub_topic.reconcile_dead_letter.name}"
    commit      = "projects/${var.project_id}/topics/${google_pubsub_topic.commit.name}"
    changes     = "projects/${var.project_id}/topics/${google_pubsub_topic.catalog_changes.name}"
  }
}

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

# Keeps dead-lettered messages (reconcile messages and commit requests)
# for inspection (a topic without a subscription drops them).
resource "google_pubsub_subscription" "reconcile_dead_letter" {
  project                    = var.project_id
  name                       = "${var.name_prefix}-reconcile-dead-letter"
  topic                      = local.topic_paths.dead_letter
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
  topic   = local.topic_paths.reconcile

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
    dead_letter_topic     = local.topic_paths.dead_letter
    max_delivery_attempts = var.reconcile_max_delivery_attempts
  }

  push_config {
    push_endpoint = "${google_cloud_run_v2_service.function["reconcile"].uri}/projects/${var.project_id}/topics/${google_pubsub_topic.reconcile.name}"

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

# Commit requests: a run that left pending catalog changes, and the last
# report of a bootstrap, publish one here (SPECSYNC_COMMIT_TOPIC, ordering
# key "catalog"); the reconcile function, which tells them from reconcile
# messages by their body, numbers every pending change.
resource "google_pubsub_topic" "commit" {
  project = var.project_id
  name    = "${var.name_prefix}-commit"

  depends_on = [google_project_service.enabled]
}

# The committer's trigger. Message ordering makes Pub/Sub push the
# requests of the one key one at a time, the next only once the previous
# was acknowledged, so meta/catalog has one writer at a time. It is not a
# lock: a push still running when the ack deadline passes is delivered
# again (pkg/queue's ordering tests show the emulator doing it), which the
# committer survives (every change is numbered under a precondition), and
# which an ack deadline of at least the function's timeout keeps from
# happening. A request that keeps failing is dead-lettered after
# max_delivery_attempts, so it stops holding back the requests behind it;
# it loses nothing: every commit numbers everything pending, so the next
# request does its work.
resource "google_pubsub_subscription" "commit_push" {
  project = var.project_id
  name    = "${var.name_prefix}-commit-push"
  topic   = local.topic_paths.commit

  enable_message_ordering = true
  ack_deadline_seconds    = var.reconcile_service.timeout_seconds
  # A request older than an operation's deadline is of no use to it; any
  # later request commits what is still pending.
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
    push_endpoint = "${google_cloud_run_v2_service.function["reconcile"].uri}/projects/${var.project_id}/topics/${google_pubsub_topic.commit.name}"

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
