# The scheduled bootstrap: Cloud Scheduler calls POST /bootstrap with an
# OIDC token issued to the scheduler's service account. The bootstrap
# accepts it because SPECSYNC_SCHEDULER_AUDIENCE and
# SPECSYNC_SCHEDULER_SERVICE_ACCOUNT (functions.tf) name this audience and
# this account. A bootstrap in progress is returned instead of a second one,
# so an overlapping or retried call costs nothing extra.
resource "google_cloud_scheduler_job" "bootstrap" {
  project     = var.project_id
  region      = var.region
  name        = "${var.name_prefix}-bootstrap"
  description = "Bootstrap specsync: reconcile every registry."
  schedule    = var.bootstrap_schedule
  time_zone   = var.bootstrap_time_zone
  # The bootstrap answers 202 as soon as the messages are published.
  attempt_deadline = "${max(15, min(1800, var.bootstrap_service.timeout_seconds))}s"

  retry_config {
    retry_count          = 2
    min_backoff_duration = "30s"
    max_backoff_duration = "300s"
  }

  http_target {
    http_method = "POST"
    uri         = "${google_cloud_run_v2_service.function["bootstrap"].uri}/bootstrap"

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = local.audiences["bootstrap"]
    }
  }

  depends_on = [
    google_project_service.enabled,
    google_cloud_run_v2_service_iam_member.scheduler_invoker,
  ]
}
