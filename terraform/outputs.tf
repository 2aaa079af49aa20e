output "broker_url" {
  description = "The URL to register with a platform as the service broker (OSB API at /v2/...), with broker_username and the broker password secret."
  value       = google_cloudfunctions2_function.function["catalog"].service_config[0].uri
}

output "bootstrap_url" {
  description = "The bootstrap function: POST $URL/bootstrap with the admin token starts a bootstrap; GET $URL/bootstrap/last_operation?operation=ID polls it."
  value       = google_cloudfunctions2_function.function["bootstrap"].service_config[0].uri
}

output "hook_urls" {
  description = "The webhook of each registry with a hook block: POST events there with the registry's hook secret (docs/api.md#webhooks)."
  value       = { for h in local.registry_hooks : h.name => "${google_cloudfunctions2_function.function["bootstrap"].service_config[0].uri}/hooks/${h.name}" }
}

output "function_urls" {
  description = "The cloudfunctions.net URL of every function (also the OIDC audiences the functions accept)."
  value       = local.function_urls
}

output "reconcile_topic" {
  description = "The reconcile work topic the bootstrap publishes to."
  value       = google_pubsub_topic.reconcile.id
}

output "commit_topic" {
  description = "The topic of commit requests: the reconcile function's runs ask their committer for a commit here."
  value       = google_pubsub_topic.commit.id
}

output "reconcile_dead_letter_topic" {
  description = "Where reconcile messages and commit requests go after reconcile_max_delivery_attempts; read them from the subscription of the same name."
  value       = google_pubsub_topic.reconcile_dead_letter.id
}

output "gcr_subscription" {
  description = "The push subscription that brings Artifact Registry's notifications (the project's gcr topic) to the reconcile function; null with artifact_registry_events off."
  value       = try(google_pubsub_subscription.gcr_push[0].id, null)
}

output "catalog_changes_topic" {
  description = "The catalog-changes topic (for the change feed)."
  value       = google_pubsub_topic.catalog_changes.id
}

output "secrets" {
  description = "Every secret to fill, keyed by what it holds (the setting, or the registry credential's *_env name or *_file path): gcloud secrets versions add ID --data-file=-"
  value       = { for k, s in google_secret_manager_secret.credential : k => s.secret_id }
}

output "service_accounts" {
  description = "The service account of each function, the push subscription, the scheduler and the builds."
  value = merge(
    { for k, sa in google_service_account.function : k => sa.email },
    {
      reconcile_push = google_service_account.reconcile_push.email
      scheduler      = google_service_account.scheduler.email
      build          = google_service_account.build.email
    },
  )
}

output "dashboard_url" {
  description = "The Cloud Monitoring dashboard of this deployment (monitoring.tf); the status page links to it."
  value       = local.dashboard_url
}
