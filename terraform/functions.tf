# The functions, as Cloud Run functions: Cloud Run services built from the
# module's own source by Cloud Build's Go buildpack (build_config), which
# builds the package at the root of the archive (specsync.go, which
# registers every function) and serves the entry point named by
# function_target. Cloud Run services rather than Cloud Functions API
# functions, because only a Cloud Run service can turn its invoker IAM
# check off (public_access = "invoker_iam_disabled", for organisations that
# refuse allUsers) and take custom audiences (the OIDC audiences below).
#
# Each function runs as its own service account (iam.tf) with only the
# settings it reads (pkg/settings), which the deploy check compares with
# the code (terraform/plan_test.go).

locals {
  # Must be the Go version of go.mod (checked by the tests).
  go_runtime = "go126"
  base_image = "${var.region}-docker.pkg.dev/serverless-runtimes/google-24/runtimes/${local.go_runtime}"

  labels = { app = "specsync" }

  # Which functions are deployed: the hooks function only when the
  # registries file has a hook block.
  function_entry_points = merge(
    { bootstrap = "Bootstrap", reconcile = "Reconcile", catalog = "Catalog" },
    length(local.registry_hooks) > 0 ? { hooks = "Hooks" } : {},
  )

  # The audience of the OIDC tokens each function accepts besides its URL
  # (Cloud Run custom audiences): known before the service exists, so the
  # scheduler, the push subscriptions and the functions' own checks can
  # name it without a cycle.
  audiences = { for k in keys(local.function_entry_points) : k => "https://${var.name_prefix}-${k}.${var.project_id}.specsync.internal" }

  # What reaches each function from outside Google Cloud, and whether it
  # is public (its own authentication only: the broker's basic auth, the
  # hooks' secrets, or the admin token on a public bootstrap).
  public = {
    bootstrap = var.bootstrap_public
    reconcile = false
    catalog   = true
    hooks     = true
  }

  common_env = {
    GOOGLE_CLOUD_PROJECT = var.project_id
    LOG_LEVEL            = var.log_level
    # Spans by OTLP to the Telemetry API, with the function's service
    # account (pkg/telemetry); a bootstrap the admin asked for is kept
    # whatever the ratio.
    SPECSYNC_TRACE              = var.tracing ? "otlp" : "off"
    SPECSYNC_TRACE_SAMPLE_RATIO = tostring(var.trace_sample_ratio)
  }
  firestore_env = { FIRESTORE_DATABASE = local.firestore_database }

  # The registries file, for the functions that load it (bootstrap: the
  # registry names to fan out to; reconcile: everything; hooks: the hook
  # blocks), with the values of its $${VAR}s. The catalog never opens it.
  registries_env = merge(local.registry_env, { SPECSYNC_REGISTRIES = local.registries_setting })

  # Where the bootstrap finds the admin token: a Secret Manager volume
  # (secrets.tf). Cloud Run fetches the latest version whenever the file is
  # read, and the bootstrap re-reads it every 30 s, so a new version is
  # picked up without a redeploy. The directory is the volume's alone.
  admin_token_file = "/etc/specsync/admin-token/token"

  # Both functions must use the same retention (pkg/settings).
  operation_retention = "${var.operation_retention_seconds}s"

  functions_all = {
    bootstrap = {
      description = "specsync bootstrap: starts a bootstrap and fans it out, one reconcile message per registry"
      service     = var.bootstrap_service
      # Cloud Scheduler and operators (IAM, and the admin token).
      ingress = "INGRESS_TRAFFIC_ALL"
      env = merge(local.common_env, local.firestore_env, local.registries_env, {
        SPECSYNC_TOPIC                     = google_pubsub_topic.reconcile.name
        SPECSYNC_OPERATION_DEADLINE        = "${var.operation_deadline_seconds}s"
        SPECSYNC_OPERATION_RETENTION       = local.operation_retention
        SPECSYNC_SCHEDULER_AUDIENCE        = local.audiences["bootstrap"]
        SPECSYNC_SCHEDULER_SERVICE_ACCOUNT = google_service_account.scheduler.email
        # Manual callers' admin token, as a file (not an environment
        # variable, which is resolved once when an instance starts).
        SPECSYNC_ADMIN_TOKEN_FILE = local.admin_token_file
      })
      secret_env   = {}
      secret_files = { (local.admin_token_file) = "SPECSYNC_ADMIN_TOKEN" }
    }

    hooks = {
      description = "specsync hooks: the registries' webhooks (POST /hooks/REGISTRY), each authenticated by its registry's hook secret"
      service     = var.hooks_service
      # The registries call it from wherever they run.
      ingress = "INGRESS_TRAFFIC_ALL"
      env = merge(local.common_env, local.registries_env, {
        SPECSYNC_TOPIC       = google_pubsub_topic.reconcile.name
        SPECSYNC_HOOK_WINDOW = "${var.hook_window_seconds}s"
      })
      # The webhooks' secrets, as the hook blocks name them: secret_env
      # as environment variables, secret_file as files in Secret Manager
      # volumes (re-read every 30 s, so a rotated version is picked up).
      secret_env   = { for e in local.hook_secret_envs : e => e }
      secret_files = { for f in local.hook_secret_files : f => f }
    }

    reconcile = {
      description = "specsync reconcile: brings one registry into Firestore, and commits the change feed (Pub/Sub push)"
      service     = var.reconcile_service
      # Only Pub/Sub's push reaches it (Pub/Sub counts as internal traffic),
      # and only the push subscription's identity may invoke it (iam.tf).
      ingress = "INGRESS_TRAFFIC_INTERNAL_ONLY"
      env = merge(local.common_env, local.firestore_env, local.registries_env, {
        SPECSYNC_LEASE_TTL           = "${var.lease_ttl_seconds}s"
        SPECSYNC_OPERATION_RETENTION = local.operation_retention
        # Every committed catalog change is also pushed here (iam.tf lets
        # reconcile publish to this topic only).
        SPECSYNC_CHANGES_TOPIC    = google_pubsub_topic.catalog_changes.name
        SPECSYNC_CHANGE_RETENTION = "${var.change_retention_seconds}s"
        # Runs ask the committer for a commit here; the commit push
        # subscription brings the requests back, one at a time.
        SPECSYNC_COMMIT_TOPIC = google_pubsub_topic.commit.name
        # Events coalesce: one run a cooldown at most per registry; a run
        # covers the events received this much before it started.
        SPECSYNC_EVENT_COOLDOWN   = "${var.event_cooldown_ms}ms"
        SPECSYNC_EVENT_CLOCK_SKEW = "${var.event_clock_skew_ms}ms"
      })
      # Registry credentials: *_env as environment variables, *_file as
      # files in a Secret Manager volume.
      secret_env   = { for e in local.registry_secret_envs : e => e }
      secret_files = { for f in local.registry_secret_files : f => f }
    }

    catalog = {
      description = "specsync catalog: the Open Service Broker API"
      service     = var.catalog_service
      # Platforms call it from anywhere, with the broker's basic auth.
      ingress = "INGRESS_TRAFFIC_ALL"
      # The catalog reads no secret: it checks the broker password and the
      # admin token against their SHA-256 digests (variables.tf), which are
      # not secrets for credentials of 32 random bytes. The broker password
      # digest is the new one and, while the password rotates, the retiring
      # one. With catalog views (secrets.tf, "Catalog views"), each view's
      # password is a mounted secret file instead, and the broker's one
      # credential is not set.
      env = merge(local.common_env, local.firestore_env, local.catalog_credential_env, {
        SPECSYNC_ADMIN_TOKEN_SHA256 = lower(var.admin_token_sha256)
        SPECSYNC_CATALOG_REFRESH    = "${var.catalog_refresh_seconds}s"
        SPECSYNC_MAX_BODY_BYTES     = tostring(var.max_body_bytes)
        SPECSYNC_CATALOG_MAX_BYTES  = tostring(var.catalog_max_bytes)
        # Long-polls of /v2/catalog/changes end before the request timeout.
        SPECSYNC_CHANGES_MAX_WAIT = "${min(50, var.catalog_service.timeout_seconds - 5)}s"
        # GET /registries also accepts an identity token for this audience
        # issued to the scheduler's account (e.g. an operator impersonating
        # it), besides the admin token.
        SPECSYNC_SCHEDULER_AUDIENCE        = local.audiences["catalog"]
        SPECSYNC_SCHEDULER_SERVICE_ACCOUNT = google_service_account.scheduler.email
        # The status page links to the dashboard (monitoring.tf).
        SPECSYNC_DASHBOARD_URL = local.dashboard_url
      })
      secret_env   = {}
      secret_files = { for f in values(local.broker_view_files) : f => f }
    }
  }
  functions = { for k, v in local.functions_all : k => v if contains(keys(local.function_entry_points), k) }

  # Each function's image, tagged with the source's digest: a changed
  # source is a new image and a new revision; an unchanged one, nothing.
  images = { for k in keys(local.functions) : k => "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.functions.repository_id}/${k}:${data.archive_file.source.output_md5}" }
}

resource "google_cloud_run_v2_service" "function" {
  for_each = local.functions

  project     = var.project_id
  location    = var.region
  name        = "${var.name_prefix}-${each.key}"
  description = each.value.description
  labels      = local.labels
  ingress     = each.value.ingress
  # Public without allUsers where the organisation forbids it
  # (iam.allowedPolicyMemberDomains): the endpoints that carry their own
  # authentication turn Cloud Run's invoker check off instead (iam.tf).
  invoker_iam_disabled = local.public[each.key] && var.public_access == "invoker_iam_disabled"
  custom_audiences     = [local.audiences[each.key]]
  # Stateless: terraform may replace or remove a service; what holds data
  # (Firestore, secrets) is protected on its own.
  deletion_protection = false

  build_config {
    source_location          = "gs://${google_storage_bucket.source.name}/${google_storage_bucket_object.source.name}"
    function_target          = local.function_entry_points[each.key]
    image_uri                = local.images[each.key]
    base_image               = local.base_image
    enable_automatic_updates = true
    service_account          = "projects/${var.project_id}/serviceAccounts/${google_service_account.build.email}"
  }

  template {
    service_account                  = google_service_account.function[each.key].email
    timeout                          = "${each.value.service.timeout_seconds}s"
    max_instance_request_concurrency = each.value.service.concurrency
    labels                           = local.labels

    scaling {
      min_instance_count = each.value.service.min_instances
      max_instance_count = each.value.service.max_instances
    }

    containers {
      image          = local.images[each.key]
      base_image_uri = local.base_image

      resources {
        limits = {
          cpu    = each.value.service.cpu
          memory = each.value.service.memory
        }
        # CPU only while a request is served: the functions do nothing
        # between requests (no background work).
        cpu_idle = true
      }

      dynamic "env" {
        for_each = each.value.env
        content {
          name  = env.key
          value = env.value
        }
      }

      dynamic "env" {
        for_each = each.value.secret_env
        content {
          name = env.key
          value_source {
            secret_key_ref {
              secret  = google_secret_manager_secret.credential[env.value].secret_id
              version = "latest"
            }
          }
        }
      }

      dynamic "volume_mounts" {
        for_each = each.value.secret_files
        content {
          name       = "secret-${substr(sha1(volume_mounts.key), 0, 12)}"
          mount_path = dirname(volume_mounts.key)
        }
      }
    }

    dynamic "volumes" {
      for_each = each.value.secret_files
      content {
        name = "secret-${substr(sha1(volumes.key), 0, 12)}"
        secret {
          secret = google_secret_manager_secret.credential[volumes.value].secret_id
          items {
            version = "latest"
            path    = basename(volumes.key)
          }
        }
      }
    }
  }

  depends_on = [
    google_project_service.enabled,
    google_artifact_registry_repository_iam_member.build_writer,
    google_storage_bucket_iam_member.build_source_reader,
    google_project_iam_member.build,
    google_project_iam_member.function_firestore,
    google_storage_bucket_iam_member.config_reader,
    google_secret_manager_secret_iam_member.accessor,
    google_secret_manager_secret_version.initial,
    google_storage_bucket_object.config,
  ]
}
