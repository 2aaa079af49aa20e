# The APIs the deployment uses. Everything else depends on these being on.
# disable_on_destroy is false: `terraform destroy` must not switch off an
# API that other things in the project may use.
locals {
  apis = toset([
    "artifactregistry.googleapis.com",     # the functions' images
    "cloudbuild.googleapis.com",           # builds the source with the Go buildpack
    "cloudresourcemanager.googleapis.com", # project IAM
    "cloudscheduler.googleapis.com",       # the scheduled bootstrap
    "cloudtrace.googleapis.com",           # where the spans are kept and read (Trace Explorer)
    "firestore.googleapis.com",            # specs, instances, registries, operations
    "iam.googleapis.com",                  # service accounts
    "logging.googleapis.com",              # function and build logs, log-based metrics
    "monitoring.googleapis.com",           # the dashboard and the alerts
    "pubsub.googleapis.com",               # the reconcile fan-out
    "run.googleapis.com",                  # the functions (Cloud Run functions)
    "secretmanager.googleapis.com",        # broker, admin and registry credentials
    "storage.googleapis.com",              # the source archive, the registries file
    "telemetry.googleapis.com",            # the functions' spans, by OTLP (SPECSYNC_TRACE=otlp)
  ])
}

resource "google_project_service" "enabled" {
  for_each = local.apis

  project                    = var.project_id
  service                    = each.value
  disable_on_destroy         = false
  disable_dependent_services = false
}
