# The registries file, as the functions read it: one object in a bucket of
# its own, the config bundle (pkg/config): the file's text, unexpanded,
# and the spec files of its `dir` sources. The bootstrap, reconcile and
# hooks functions read it at cold start and check its generation at most
# every 30 s, so an edit takes effect within about that long after
# `terraform apply`, without a new function image or revision; an edit
# that does not load is logged and the last good file keeps serving.
#
# The bucket keeps older generations (versioning), so a bad edit can be
# rolled back by hand while terraform is being fixed.

resource "google_storage_bucket" "config" {
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name_prefix}-config"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = !var.deletion_protection
  labels                      = local.labels

  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      num_newer_versions = 20
      with_state         = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.enabled]
}

locals {
  config_object = "registries.json"
  # SPECSYNC_REGISTRIES of the functions that load the file.
  registries_setting = "gs://${google_storage_bucket.config.name}/${local.config_object}"
}

resource "google_storage_bucket_object" "config" {
  bucket       = google_storage_bucket.config.name
  name         = local.config_object
  content_type = "application/json"
  content = jsonencode({
    version    = 1
    registries = local.registries_text
    files      = local.dir_files
  })

  # Only a file that passed the checks is uploaded.
  depends_on = [terraform_data.registries_file]
}
