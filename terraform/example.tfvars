# Copy to terraform.tfvars and edit. Only project_id is required.
project_id = "my-specsync-project"
region     = "europe-west1"

# Relative to the repository root; shipped with the source.
registries_file = "registries.yaml"

# Values of the ${VAR}s the registries file references (not secrets).
registry_env = {
  # TEAM_REGISTRY_HOST = "registry.example.com"
}

bootstrap_schedule = "0 * * * *"
