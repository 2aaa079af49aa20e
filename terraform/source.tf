# The functions' source: exactly the files source_files.txt lists (the Go
# files and embedded files of the packages the root package imports, and
# go.mod and go.sum), read from the module's own checkout. Never the
# checkout as a whole: a binary `make run` left at the root, a test
# artifact or an untracked file is not uploaded. terraform/plan_test.go
# fails when the list differs from what `go list -deps` says the build
# needs, and buildpack_test.go builds the listed files alone.
#
# The registries file is not in it (config.tf): editing it changes no
# image.

locals {
  repo_root    = abspath("${path.module}/..")
  source_files = sort(compact([for l in split("\n", file("${path.module}/source_files.txt")) : trimspace(l) if !startswith(trimspace(l), "#")]))
}

data "archive_file" "source" {
  type = "zip"
  # In the root module's .terraform directory, not in the module (which
  # may be a read-only checkout of a Git source).
  output_path = "${path.root}/.terraform/specsync/source.zip"

  dynamic "source" {
    for_each = local.source_files
    content {
      filename = source.value
      content  = file("${local.repo_root}/${source.value}")
    }
  }
}

resource "google_storage_bucket" "source" {
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name_prefix}-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = local.labels
  # Holds only source archives, each rebuilt from the module on demand.
  force_destroy = true

  depends_on = [google_project_service.enabled]
}

# Named by content, so a changed source is a new object and rebuilds the
# functions.
resource "google_storage_bucket_object" "source" {
  bucket = google_storage_bucket.source.name
  name   = "specsync-source-${data.archive_file.source.output_md5}.zip"
  source = data.archive_file.source.output_path
}

# Where Cloud Build puts the functions' images.
resource "google_artifact_registry_repository" "functions" {
  project       = var.project_id
  location      = var.region
  repository_id = "${var.name_prefix}-functions"
  description   = "Images of the specsync functions, built from the module's source."
  format        = "DOCKER"
  labels        = local.labels

  # Each apply that changes the source builds one image per function;
  # only the recent ones can be rolled back to.
  cleanup_policy_dry_run = false
  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = 10
    }
  }
  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      older_than = "2592000s"
    }
  }

  depends_on = [google_project_service.enabled]
}
