# Terraform and provider versions. Write-only arguments (secret values that
# never reach the state) need Terraform 1.11; cross-variable validation
# needs 1.9.
terraform {
  required_version = ">= 1.11"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.40, < 8.0"
    }
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.7, < 3.0"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region

  default_labels = {
    app = "specsync"
  }
}
