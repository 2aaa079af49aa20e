output "broker_url" {
  description = "The URL to register with a platform as the service broker (OSB API at /v2/...), with broker_username and the broker password secret."
  value       = google_cloud_run_v2_service.function["catalog"].uri
}

output "bootstrap_url" {
  description = "The bootstrap function: POST $URL/bootstrap with the admin token (and, unless bootstrap_public, an identity token of a bootstrap_invokers member in X-Serverless-Authorization) starts a bootstrap; GET $URL/bootstrap/last_operation?operation=ID polls it."
  value       = google_cloud_run_v2_service.function["bootstrap"].uri
}

output "hook_urls" {
  description = "The webhook of each registry with a hook block, on the public hooks function: POST events there with the registry's hook secret (docs/api.md#webhooks)."
  value       = { for h in local.registry_hooks : h.name => "${google_cloud_run_v2_service.function["hooks"].uri}/hooks/${h.name}" }
}

output "function_urls" {
  description = "The URL of every function."
  value       = { for k, f in google_cloud_run_v2_service.function : k => f.uri }
}

output "oidc_audiences" {
  description = "The custom audience of every function: what an identity token for it may carry besides its URL (the scheduler's and the push subscriptions' tokens do)."
  value       = local.audiences
}

output "registries_object" {
  description = "Where the functions read the registries file (the config bundle, refreshed within 30 s of an apply that changes it)."
  value       = local.registries_setting
}

output "reconcile_topic" {
  description = "The reconcile work topic the bootstrap publishes to."
  value       = local.topic_paths.reconcile
}

output "commit_topic" {
  description = "The topic of commit requests: the reconcile function's runs ask their committer for a commit here."
  value       = local.topic_paths.commit
}

output "reconcile_dead_letter_topic" {
  description = "Where reconcile messages and commit requests go after reconcile_max_delivery_attempts; read them from the subscription of the same name."
  value       = local.topic_paths.dead_letter
}

output "gcr_subscriptions" {
  description = "The push subscriptions that bring Artifact Registry's notifications to the reconcile function, by the project whose gcr topic each reads (every project whose Artifact Registry the registries file reads; none with artifact_registry_events off)."
  value       = { for p, s in google_pubsub_subscription.gcr_push : p => s.id }
}

output "catalog_changes_topic" {
  description = "The catalog-changes topic (for the change feed)."
  value       = local.topic_paths.changes
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
