# specsync, deployed from your own infrastructure repository: copy this
# directory (main.tf, registries.yaml, terraform.tfvars) out of the
# specsync repository, point `source` at a released tag, write your
# registries file, and `terraform init && terraform apply`
# (docs/deploy.md). Everything specsync needs is in the module; this root
# module holds what is yours: the provider, the state's backend, and the
# inputs.

terraform {
  required_version = ">= 1.11"

  # Where the state lives: a Cloud Storage bucket of yours, with
  # versioning on (create it once: docs/deploy.md#from-an-empty-project-to-a-broker).
  backend "gcs" {
    bucket = "REPLACE-with-your-terraform-state-bucket"
    prefix = "specsync"
  }

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 7.46"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region

  default_labels = {
    managed-by = "terraform"
  }
}

variable "project_id" {
  type        = string
  description = "The project to deploy specsync into."
}

variable "region" {
  type        = string
  description = "Where its functions run."
}

variable "broker_password_sha256" {
  type        = string
  description = "SHA-256 of the broker password (docs/deploy.md#from-an-empty-project-to-a-broker)."
}

variable "admin_token_sha256" {
  type        = string
  description = "SHA-256 of the admin token (docs/deploy.md#from-an-empty-project-to-a-broker)."
}

# First versions of secrets, for a single apply: the values come from the
# environment (TF_VAR_secret_values) and reach Secret Manager through a
# write-only argument, never the plan or the state (docs/deploy.md#secrets).
variable "write_secrets" {
  type        = set(string)
  description = "Secrets to give a first version from secret_values; empty it again afterwards."
  default     = []
}

variable "secret_values" {
  type        = map(string)
  description = "The values of write_secrets, from TF_VAR_secret_values."
  default     = {}
  sensitive   = true
  ephemeral   = true
}

module "specsync" {
  # Teams pin a release of the module by its Git tag:
  #   source = "git::https://github.com/specsync/specsync.git//terraform?ref=v1.4.0"
  # This repository's own copy of the example uses the module beside it.
  source = "../../terraform"

  project_id             = var.project_id
  region                 = var.region
  broker_password_sha256 = var.broker_password_sha256
  admin_token_sha256     = var.admin_token_sha256

  # Relative to this directory. Its edits reach the functions within
  # about 30 s of an apply, with no new image.
  registries_file = "registries.yaml"
  # Values of the registries file's $${VAR}s (hosts, URLs; never secrets).
  registry_env = {}

  write_secrets = var.write_secrets
  secret_values = var.secret_values
}

# A project that already has a (default) Firestore database in native
# mode: let the module manage it instead of creating one (or set
# create_firestore_database = false above to use it as it is). Remove the
# block after the apply that imported it.
#
# import {
#   to = module.specsync.google_firestore_database.main[0]
#   id = "projects/${var.project_id}/databases/(default)"
# }

output "broker_url" {
  description = "Register this URL with your platforms (docs/deploy.md#register-the-broker-with-a-platform)."
  value       = module.specsync.broker_url
}

output "hook_urls" {
  description = "Where each registry with a hook block sends its webhooks."
  value       = module.specsync.hook_urls
}

output "secrets" {
  description = "The secrets to fill (docs/deploy.md#secrets)."
  value       = module.specsync.secrets
}
