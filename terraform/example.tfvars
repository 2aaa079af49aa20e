# Copy to terraform.tfvars and edit. project_id and the two digests are
# required.
project_id = "my-specsync-project"
region     = "europe-west1"

# SHA-256 of the broker password and of the admin token (not secrets: the
# credentials are 32 random bytes; README: Deploy to Google Cloud):
#   printf %s "$BROKER_PASSWORD" | sha256sum
# (the placeholders fail validation until replaced)
broker_password_sha256 = "REPLACE with printf %s \"$BROKER_PASSWORD\" | sha256sum"
admin_token_sha256     = "REPLACE with printf %s \"$ADMIN_TOKEN\" | sha256sum"

# Relative to the repository root; shipped with the source.
registries_file = "registries.yaml"

# Values of the ${VAR}s the registries file references (not secrets).
registry_env = {
  # TEAM_REGISTRY_HOST = "registry.example.com"
}

bootstrap_schedule = "0 * * * *"

# Artifact Registry's push events (the project's gcr topic): "create" (the
# default), "existing" when the project has that topic already, or "off".
# artifact_registry_events = "existing"
