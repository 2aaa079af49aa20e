# Terraform and provider versions. A module: no provider or backend
# block here; the root module that calls it has them (examples/deploy).
# Write-only arguments (secret values that never reach the state) need
# Terraform 1.11; cross-variable validation needs 1.9. The deploy check
# plans it with hashicorp/google 7.46.
terraform {
  required_version = ">= 1.11"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 7.0, < 8.0"
    }
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.7, < 3.0"
    }
  }
}
