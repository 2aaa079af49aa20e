# Secret Manager: the admin token, the broker password, one secret for
# every registry credential the registries file names, and one for every
# webhook secret its hook blocks name. Secrets are created
# empty; values are added out of band (`gcloud secrets versions add`, see
# docs/deploy.md#secrets) or, with write_secrets, from an ephemeral input through
# a write-only argument. Either way no value is ever in the plan or the
# state. Each secret is readable only by the function that mounts it; the
# catalog mounts none.

locals {
  # The credentials the registries file names (registries.tf) are only
  # ever named there: their values go into these secrets.
  # Every secret, keyed by how the code names it: the setting it fills, or
  # the registry credential's *_env name or *_file path.
  credential_secrets = merge(
    {
      SPECSYNC_ADMIN_TOKEN     = "${var.name_prefix}-admin-token"
      SPECSYNC_BROKER_PASSWORD = "${var.name_prefix}-broker-password"
    },
    { for e in local.registry_secret_envs : e => "${var.name_prefix}-registry-env-${lower(replace(e, "_", "-"))}" },
    { for f in local.registry_secret_files : f => "${var.name_prefix}-registry-file-${trim(replace(lower(f), "/[^a-z0-9]+/", "-"), "-")}" },
    { for e in local.hook_secret_envs : e => "${var.name_prefix}-hook-env-${lower(replace(e, "_", "-"))}" },
    { for f in local.hook_secret_files : f => "${var.name_prefix}-hook-file-${trim(replace(lower(f), "/[^a-z0-9]+/", "-"), "-")}" },
    # Catalog views (below): one secret per view, keyed by its file.
    { for name, f in local.broker_view_files : f => "${var.name_prefix}-broker-view-${name}" },
  )

  # Who reads which secret: the function that mounts it, and only that one.
  # The bootstrap reads the admin token (mounted as a file), the hooks
  # function the webhook secrets; registry credentials only the reconcile,
  # which fetches. The catalog reads none:
  # it holds the digests of the broker password and the admin token
  # (variables.tf). The broker password secret is read by no function:
  # it is where the operator keeps the password to register the broker
  # with a platform.
  secret_readers = merge(
    {
      SPECSYNC_ADMIN_TOKEN     = ["bootstrap"]
      SPECSYNC_BROKER_PASSWORD = []
    },
    { for k in setunion(local.registry_secret_envs, local.registry_secret_files) : k => ["reconcile"] },
    { for k in setunion(local.hook_secret_envs, local.hook_secret_files) : k => ["hooks"] },
    # A view's password: the catalog reads it (the file is re-read, so a
    # new version needs no redeploy).
    { for f in values(local.broker_view_files) : f => ["catalog"] },
  )
  secret_access = {
    for pair in flatten([
      for secret, readers in local.secret_readers : [
        for fn in readers : { key = "${secret}:${fn}", secret = secret, function = fn }
      ]
    ]) : pair.key => pair
  }
}

resource "google_secret_manager_secret" "credential" {
  for_each = local.credential_secrets

  project   = var.project_id
  secret_id = each.value
  labels    = local.labels
  annotations = {
    specsync-credential = each.key
  }
  deletion_protection = var.deletion_protection

  replication {
    auto {}
  }

  depends_on = [google_project_service.enabled]
}

resource "google_secret_manager_secret_iam_member" "accessor" {
  for_each = local.secret_access

  project   = var.project_id
  secret_id = google_secret_manager_secret.credential[each.value.secret].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.function[each.value.function].email}"
}

# Only for the secrets in write_secrets: a first version, written through
# a write-only argument from the ephemeral var.secret_values. Later
# versions (rotation) are added out of band; this resource never reads or
# stores them, and destroying it (emptying write_secrets) leaves the
# version in place.
resource "google_secret_manager_secret_version" "initial" {
  for_each = { for k, v in local.credential_secrets : k => v if contains(var.write_secrets, k) }

  secret                 = google_secret_manager_secret.credential[each.key].id
  secret_data_wo         = var.secret_values[each.key]
  secret_data_wo_version = 1
  deletion_policy        = "ABANDON"
}

# Catalog views (docs/configuration.md#catalog-views): with var.broker_views
# set, every view is a broker credential of its own with the part of the
# catalog its platform sees, and the broker's one credential
# (broker_username, broker_password_sha256) is not deployed.
#
# Each view gets one Secret Manager secret (secrets.tf, keyed by the file
# below), mounted on the catalog as a file that SPECSYNC_VIEW_<NAME>_PASSWORD_FILE
# names: the catalog re-reads it every 30 s, so a view's password is
# rotated by adding a secret version, without a redeploy. The rules go to
# the catalog as the views file itself, JSON in SPECSYNC_BROKER_VIEWS
# (ReadViews in pkg/config/views.go); no rule or user name is a secret.

locals {
  # name -> the variable its password is read from (password_env), and
  # the file its secret is mounted at (a directory of its own: a secret
  # volume mounts the whole directory).
  broker_view_env   = { for name in keys(var.broker_views) : name => "SPECSYNC_VIEW_${upper(replace(name, "-", "_"))}_PASSWORD" }
  broker_view_files = { for name in keys(var.broker_views) : name => "/etc/specsync/views/${name}/password" }

  broker_views_json = jsonencode({
    views = [for name, v in var.broker_views : {
      name         = name
      username     = v.username
      password_env = local.broker_view_env[name]
      registries   = v.registries
      services     = v.services
      tags         = v.tags
    }]
  })

  # The catalog's credential settings: the views, or the broker's one
  # credential (the settings refuse both).
  catalog_credential_env = length(var.broker_views) > 0 ? merge(
    { SPECSYNC_BROKER_VIEWS = local.broker_views_json },
    { for name, f in local.broker_view_files : "${local.broker_view_env[name]}_FILE" => f },
    ) : {
    SPECSYNC_BROKER_VIEWS           = ""
    SPECSYNC_BROKER_USERNAME        = var.broker_username
    SPECSYNC_BROKER_PASSWORD_SHA256 = join(",", compact([lower(var.broker_password_sha256), lower(var.broker_password_previous_sha256)]))
  }
}
