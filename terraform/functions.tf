# The three functions (2nd gen), built by Cloud Build's Go buildpack from
# this repository's source: the buildpack builds the package at the root of
# the archive (specsync.go, which registers every function) and serves the
# entry point named by build_config.entry_point. Each function runs as its
# own service account (iam.tf) with only the settings it reads
# (pkg/settings), which terraform/functions_test.go checks against the code.

locals {
  repo_root = abspath("${path.module}/..")

  # Must be the Go version of go.mod (checked by the tests).
  go_runtime = "go126"

  # Where the buildpack puts the uploaded source in the running function
  # (the working directory is its parent, /workspace).
  source_in_function = "/workspace/serverless_function_source_code"

  function_entry_points = {
    bootstrap = "Bootstrap"
    reconcile = "Reconcile"
    catalog   = "Catalog"
  }

  # The cloudfunctions.net URL of each function: known before the function
  # exists, so it can be the audience of OIDC tokens that the function
  # itself checks (its run.app URL would be a cycle). A postcondition on
  # each function checks that the deployed URL is this one.
  function_urls = {
    for k in keys(local.function_entry_points) :
    k => "https://${var.region}-${var.project_id}.cloudfunctions.net/${var.name_prefix}-${k}"
  }

  common_env = {
    GOOGLE_CLOUD_PROJECT = var.project_id
    FIRESTORE_DATABASE   = google_firestore_database.main.name
    LOG_LEVEL            = var.log_level
    # Spans to Cloud Trace (pkg/telemetry); a bootstrap's trace is kept
    # whatever the ratio.
    SPECSYNC_TRACE              = var.tracing ? "cloudtrace" : "off"
    SPECSYNC_TRACE_SAMPLE_RATIO = tostring(var.trace_sample_ratio)
  }

  # The registries file, for the functions that load it (bootstrap: the
  # registry names to fan out to; reconcile: everything). The catalog
  # never opens it.
  registries_env = {
    SPECSYNC_REGISTRIES = "${local.source_in_function}/${var.registries_file}"
  }

  # Where the bootstrap finds the admin token: a Secret Manager volume
  # (secrets.tf). Cloud Run fetches the latest version whenever the file is
  # read, and the bootstrap re-reads it every 30 s, so a new version is
  # picked up without a redeploy. The directory is the volume's alone.
  admin_token_file = "/etc/specsync/admin-token/token"

  # The $${VAR}s of the registries file, exactly those it references (a
  # missing value fails the plan in terraform_data.registries_file).
  registry_env = { for k in local.registry_env_refs : k => lookup(var.registry_env, k, "") }

  # Both functions must use the same retention (pkg/settings).
  operation_retention = "${var.operation_retention_seconds}s"

  functions = {
    bootstrap = {
      description = "specsync bootstrap: starts a bootstrap and fans it out, one reconcile message per registry; the registries' webhooks"
      service     = var.bootstrap_service
      # Cloud Scheduler, manual callers (with the admin token) and the
      # registries' webhooks (each with its own secret).
      ingress = "ALLOW_ALL"
      env = merge(local.common_env, local.registries_env, local.registry_env, {
        SPECSYNC_TOPIC                     = google_pubsub_topic.reconcile.name
        SPECSYNC_OPERATION_DEADLINE        = "${var.operation_deadline_seconds}s"
        SPECSYNC_OPERATION_RETENTION       = local.operation_retention
        SPECSYNC_SCHEDULER_AUDIENCE        = local.function_urls["bootstrap"]
        SPECSYNC_SCHEDULER_SERVICE_ACCOUNT = google_service_account.scheduler.email
        # Manual callers' admin token, as a file (not an environment
        # variable, which is resolved once when an instance starts).
        SPECSYNC_ADMIN_TOKEN_FILE = local.admin_token_file
        SPECSYNC_HOOK_WINDOW      = "${var.hook_window_seconds}s"
      })
      # The webhooks' secrets, as the hook blocks name them: secret_env
      # as environment variables, secret_file as files in Secret Manager
      # volumes (re-read every 30 s, so a rotated version is picked up).
      secret_env   = { for e in local.hook_secret_envs : e => e }
      secret_files = merge({ (local.admin_token_file) = "SPECSYNC_ADMIN_TOKEN" }, { for f in local.hook_secret_files : f => f })
    }

    reconcile = {
      description = "specsync reconcile: brings one registry into Firestore, and commits the change feed (Pub/Sub push)"
      service     = var.reconcile_service
      # Only Pub/Sub's push reaches it (Pub/Sub counts as internal traffic),
      # and only the push subscription's identity may invoke it (iam.tf).
      ingress = "ALLOW_INTERNAL_ONLY"
      env = merge(local.common_env, local.registries_env, local.registry_env, {
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
      ingress = "ALLOW_ALL"
      # The catalog reads no secret: it checks the broker password and the
      # admin token against their SHA-256 digests (variables.tf), which are
      # not secrets for credentials of 32 random bytes. The broker password
      # digest is the new one and, while the password rotates, the retiring
      # one. With catalog views (secrets.tf, "Catalog views"), each view's password is a
      # mounted secret file instead, and the broker's one credential is
      # not set.
      env = merge(local.common_env, local.catalog_credential_env, {
        SPECSYNC_ADMIN_TOKEN_SHA256 = lower(var.admin_token_sha256)
        SPECSYNC_CATALOG_REFRESH    = "${var.catalog_refresh_seconds}s"
        SPECSYNC_MAX_BODY_BYTES     = tostring(var.max_body_bytes)
        SPECSYNC_CATALOG_MAX_BYTES  = tostring(var.catalog_max_bytes)
        # Long-polls of /v2/catalog/changes end before the request timeout.
        SPECSYNC_CHANGES_MAX_WAIT = "${min(50, var.catalog_service.timeout_seconds - 5)}s"
        # GET /registries also accepts an identity token for this audience
        # issued to the scheduler's account (e.g. an operator impersonating
        # it), besides the admin token.
        SPECSYNC_SCHEDULER_AUDIENCE        = local.function_urls["catalog"]
        SPECSYNC_SCHEDULER_SERVICE_ACCOUNT = google_service_account.scheduler.email
        # The status page links to the dashboard (monitoring.tf).
        SPECSYNC_DASHBOARD_URL = local.dashboard_url
      })
      secret_env   = {}
      secret_files = { for f in values(local.broker_view_files) : f => f }
    }
  }
}

# The source archive: the repository, without what is not source (git, CI,
# this directory with its state and provider cache, local binaries).
data "archive_file" "source" {
  type        = "zip"
  source_dir  = local.repo_root
  output_path = "${path.module}/.build/specsync-source.zip"
  excludes = [
    ".git",
    ".ci",
    "terraform",
    "specsync",
    "buildpack-main-*",
  ]
}

resource "google_storage_bucket" "source" {
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name_prefix}-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  # Holds only source archives; still, never delete objects behind
  # terraform's back.
  force_destroy = false

  depends_on = [google_project_service.enabled]
}

# Named by content, so a changed source is a new object and redeploys the
# functions.
resource "google_storage_bucket_object" "source" {
  bucket = google_storage_bucket.source.name
  name   = "specsync-source-${data.archive_file.source.output_md5}.zip"
  source = data.archive_file.source.output_path
}

resource "google_cloudfunctions2_function" "function" {
  for_each = local.functions

  project     = var.project_id
  location    = var.region
  name        = "${var.name_prefix}-${each.key}"
  description = each.value.description

  build_config {
    runtime         = local.go_runtime
    entry_point     = local.function_entry_points[each.key]
    service_account = google_service_account.build.id

    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.function[each.key].email
    ingress_settings                 = each.value.ingress
    all_traffic_on_latest_revision   = true
    timeout_seconds                  = each.value.service.timeout_seconds
    available_memory                 = each.value.service.memory
    available_cpu                    = each.value.service.cpu
    min_instance_count               = each.value.service.min_instances
    max_instance_count               = each.value.service.max_instances
    max_instance_request_concurrency = each.value.service.concurrency
    environment_variables            = each.value.env

    dynamic "secret_environment_variables" {
      for_each = each.value.secret_env
      content {
        key        = secret_environment_variables.key
        project_id = var.project_id
        secret     = google_secret_manager_secret.credential[secret_environment_variables.value].secret_id
        version    = "latest"
      }
    }

    dynamic "secret_volumes" {
      for_each = each.value.secret_files
      content {
        mount_path = dirname(secret_volumes.key)
        project_id = var.project_id
        secret     = google_secret_manager_secret.credential[secret_volumes.value].secret_id
        versions {
          version = "latest"
          path    = basename(secret_volumes.key)
        }
      }
    }
  }

  lifecycle {
    postcondition {
      condition     = self.url == local.function_urls[each.key]
      error_message = "The function's URL is not the one its OIDC audience was derived from (local.function_urls); update local.function_urls."
    }
  }

  depends_on = [
    google_project_service.enabled,
    google_project_iam_member.build,
    google_project_iam_member.function_firestore,
    google_secret_manager_secret_iam_member.accessor,
    google_secret_manager_secret_version.initial,
    terraform_data.registries_file,
  ]
}
