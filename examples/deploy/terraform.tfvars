# Your project, and the digests of the two credentials you generate
# (docs/deploy.md#credentials):
#   BROKER_PASSWORD=$(openssl rand -hex 32); printf %s "$BROKER_PASSWORD" | sha256sum
#   ADMIN_TOKEN=$(openssl rand -hex 32);     printf %s "$ADMIN_TOKEN" | sha256sum
# (the placeholders fail the plan until replaced)
project_id             = "my-specsync-project"
region                 = "europe-west1"
broker_password_sha256 = "REPLACE with the first field of: printf %s \"$BROKER_PASSWORD\" | sha256sum"
admin_token_sha256     = "REPLACE with the first field of: printf %s \"$ADMIN_TOKEN\" | sha256sum"
