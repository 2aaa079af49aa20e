# Inputs. Only project_id and the two credential digests are required;
# every default is safe: nothing that
# holds data is destroyed, secrets are created empty, and each function
# gets only what it needs.

variable "project_id" {
  type        = string
  description = "The Google Cloud project to deploy into (it must exist and have billing enabled)."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project id: 6 to 30 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "region" {
  type        = string
  description = "Region of the functions, the scheduler job and the source bucket."
  default     = "europe-west1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region such as europe-west1 or us-central1."
  }
}

variable "firestore_location" {
  type        = string
  description = "Location of the Firestore database: a region (e.g. europe-west1) or a multi-region (nam5, eur3). Defaults to region. It cannot be changed once the database exists."
  default     = null

  validation {
    condition     = var.firestore_location == null || can(regex("^[a-z0-9-]+$", var.firestore_location))
    error_message = "firestore_location must be a Firestore location id such as europe-west1, nam5 or eur3."
  }
}

variable "firestore_database" {
  type        = string
  description = "Firestore database id. \"(default)\" is the one the free tier applies to; a project that already has a (default) database in Datastore mode, or one used by something else, needs another id (e.g. \"specsync\"): docs/deploy.md#first-apply-what-may-already-exist."
  default     = "(default)"

  validation {
    condition     = var.firestore_database == "(default)" || can(regex("^[a-z][a-z0-9-]{2,61}[a-z0-9]$", var.firestore_database))
    error_message = "firestore_database must be \"(default)\" or 4 to 63 lowercase letters, digits and hyphens, starting with a letter."
  }
}

variable "create_firestore_database" {
  type        = bool
  description = "Create the Firestore database (native mode, delete-protected, point-in-time recovery). false: use firestore_database as it exists (it must be in native mode), and only add the indexes and TTL policies; or import it instead to let this module manage it (docs/deploy.md#first-apply-what-may-already-exist)."
  default     = true
}

variable "firestore_point_in_time_recovery" {
  type        = bool
  description = "Point-in-time recovery of the Firestore database: any minute of the last 7 days can be read back or restored into a new database (docs/operations.md#restoring-the-catalog). Billed as storage of the retained versions."
  default     = true
}

variable "name_prefix" {
  type        = string
  description = "Prefix of every resource name (functions, topics, service accounts, secrets). The default matches the code's default topic, specsync-reconcile."
  default     = "specsync"

  validation {
    # Service account ids are at most 30 characters: prefix + "-reconcile-push".
    condition     = can(regex("^[a-z][a-z0-9-]{0,10}[a-z0-9]$", var.name_prefix))
    error_message = "name_prefix must be 2 to 12 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "registries_file" {
  type        = string
  description = "The registries file (docs/configuration.md#the-registries-file): a path relative to the root module, or absolute. Terraform uploads it (with the spec files of its dir sources) to Cloud Storage, where the functions read it, and derives from it the secrets, grants, event subscriptions and webhooks it implies. Editing it and applying changes no function image."
  default     = "registries.yaml"

  validation {
    condition     = fileexists(startswith(var.registries_file, "/") ? var.registries_file : "${path.root}/${var.registries_file}")
    error_message = "registries_file does not exist (a relative path is read from the root module's directory). Write one: see examples/registries.reference.yaml and docs/configuration.md#the-registries-file."
  }
}

variable "registry_env" {
  type        = map(string)
  description = "Values of the $${VAR} references in the registries file (hosts, URLs; never secrets: name those with *_env / *_file instead). Set on the bootstrap and reconcile functions, which load the file."
  default     = {}
  nullable    = false

  validation {
    condition     = alltrue([for k in keys(var.registry_env) : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", k))])
    error_message = "registry_env keys must be environment variable names."
  }
  validation {
    condition     = alltrue([for k in keys(var.registry_env) : !can(regex("^(SPECSYNC_|GOOGLE_|FIRESTORE_|FUNCTION_|K_|X_GOOGLE_)|^(LOG_LEVEL|PORT)$", k))])
    error_message = "registry_env keys may not be settings the functions read or names the platform reserves (SPECSYNC_*, GOOGLE_*, FIRESTORE_*, FUNCTION_*, K_*, X_GOOGLE_*, LOG_LEVEL, PORT)."
  }
}

variable "log_level" {
  type        = string
  description = "LOG_LEVEL of every function."
  default     = "info"

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.log_level)
    error_message = "log_level must be debug, info, warn or error."
  }
}

variable "broker_username" {
  type        = string
  description = "The user name platforms use for basic auth (SPECSYNC_BROKER_USERNAME). The password is a secret (see the secrets output)."
  default     = "specsync"

  validation {
    condition     = length(var.broker_username) > 0 && !strcontains(var.broker_username, ":")
    error_message = "broker_username must be non-empty and may not contain a colon (basic auth)."
  }
}

# The catalog checks the broker password and the admin token against
# their SHA-256 digests, so it holds no secret and may read none. A digest
# is not a secret when the credential is high-entropy (generate it with
# `openssl rand -hex 32`; never a chosen password, whose digest could be
# brute-forced): these variables are plain, not sensitive, and end up in
# the catalog's environment and the state. The credentials themselves go
# into the secrets of the same name (docs/deploy.md#secrets).

variable "broker_password_sha256" {
  type        = string
  description = "SHA-256 of the broker password, 64 hex digits: printf %s \"$BROKER_PASSWORD\" | sha256sum. The catalog checks the platform's password against it (SPECSYNC_BROKER_PASSWORD_SHA256); the password itself goes into the SPECSYNC_BROKER_PASSWORD secret. Use 32 random bytes (openssl rand -hex 32)."
  sensitive   = false
  nullable    = false

  validation {
    condition     = can(regex("^[0-9a-fA-F]{64}$", var.broker_password_sha256))
    error_message = "broker_password_sha256 must be a SHA-256 digest: 64 hexadecimal characters, the first field of `printf %s \"$BROKER_PASSWORD\" | sha256sum`."
  }
  validation {
    condition     = lower(var.broker_password_sha256) != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    error_message = "broker_password_sha256 is the digest of an empty string: was the password's variable set when it was hashed?"
  }
}

variable "broker_password_previous_sha256" {
  type        = string
  description = "While the broker password rotates: the SHA-256 of the password being retired, accepted next to broker_password_sha256 until every platform uses the new one; then set it back to \"\"."
  default     = ""
  sensitive   = false
  nullable    = false

  validation {
    condition     = can(regex("^([0-9a-fA-F]{64})?$", var.broker_password_previous_sha256))
    error_message = "broker_password_previous_sha256 must be empty or a SHA-256 digest: 64 hexadecimal characters."
  }
  validation {
    condition     = lower(var.broker_password_previous_sha256) != lower(var.broker_password_sha256)
    error_message = "broker_password_previous_sha256 is the same digest as broker_password_sha256."
  }
}

variable "admin_token_sha256" {
  type        = string
  description = "SHA-256 of the admin token, 64 hex digits: printf %s \"$ADMIN_TOKEN\" | sha256sum. The catalog's admin endpoint (GET /registries) checks bearer tokens against it (SPECSYNC_ADMIN_TOKEN_SHA256); the token itself goes into the SPECSYNC_ADMIN_TOKEN secret, which the bootstrap reads. Use 32 random bytes (openssl rand -hex 32)."
  sensitive   = false
  nullable    = false

  validation {
    condition     = can(regex("^[0-9a-fA-F]{64}$", var.admin_token_sha256))
    error_message = "admin_token_sha256 must be a SHA-256 digest: 64 hexadecimal characters, the first field of `printf %s \"$ADMIN_TOKEN\" | sha256sum`."
  }
  validation {
    condition     = lower(var.admin_token_sha256) != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    error_message = "admin_token_sha256 is the digest of an empty string: was the token's variable set when it was hashed?"
  }
}

variable "bootstrap_schedule" {
  type        = string
  description = "Cron schedule of the Cloud Scheduler job that calls the bootstrap. An unchanged world costs a handful of Firestore operations per run (docs/deploy.md#cost)."
  default     = "0 * * * *"

  validation {
    condition     = length(split(" ", trimspace(var.bootstrap_schedule))) == 5
    error_message = "bootstrap_schedule must be a five-field cron expression such as \"0 * * * *\"."
  }
}

variable "bootstrap_time_zone" {
  type        = string
  description = "Time zone of bootstrap_schedule (tz database name)."
  default     = "Etc/UTC"

  validation {
    condition     = can(regex("^[A-Za-z_+-]+(/[A-Za-z0-9_+-]+)*$", var.bootstrap_time_zone))
    error_message = "bootstrap_time_zone must be a tz database name such as Etc/UTC or Europe/Berlin."
  }
}

variable "bootstrap_public" {
  type        = bool
  description = "Let anyone reach the bootstrap function's URL, so that the admin token alone starts a bootstrap. false (the default): Cloud Run IAM as well: only the scheduler and bootstrap_invokers may call it (operators send an identity token in X-Serverless-Authorization, SPECSYNC_IDENTITY_TOKEN for the CLI, besides the admin token). The registries' webhooks are served by the hooks function either way."
  default     = false
}

variable "bootstrap_invokers" {
  type        = list(string)
  description = "IAM members who may call the bootstrap function (roles/run.invoker) besides the scheduler, e.g. group:platform-ops@example.com or user:ops@example.com; they still need the admin token."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for m in var.bootstrap_invokers : can(regex("^(user|group|serviceAccount|domain|principal|principalSet):.+", m))])
    error_message = "bootstrap_invokers holds IAM members such as user:ops@example.com, group:ops@example.com or serviceAccount:ci@project.iam.gserviceaccount.com (not allUsers: set bootstrap_public instead)."
  }
}

variable "public_access" {
  type        = string
  description = "How the endpoints that authenticate their callers themselves (the catalog's basic auth, the hooks' secrets, and the bootstrap with bootstrap_public) are made public: all_users (an allUsers run.invoker binding) or invoker_iam_disabled (Cloud Run skips its invoker IAM check: for organisations whose iam.allowedPolicyMemberDomains policy refuses allUsers)."
  default     = "all_users"

  validation {
    condition     = contains(["all_users", "invoker_iam_disabled"], var.public_access)
    error_message = "public_access must be all_users or invoker_iam_disabled."
  }
}

variable "operation_deadline_seconds" {
  type        = number
  description = "SPECSYNC_OPERATION_DEADLINE: a bootstrap whose registries have not all reported by then fails, naming them."
  default     = 900

  validation {
    condition     = var.operation_deadline_seconds >= 60 && var.operation_deadline_seconds <= 86400 && floor(var.operation_deadline_seconds) == var.operation_deadline_seconds
    error_message = "operation_deadline_seconds must be a whole number of seconds between 60 and 86400."
  }
}

variable "change_retention_seconds" {
  type        = number
  description = "SPECSYNC_CHANGE_RETENTION (reconcile): how long change records stay in the change feed. A watcher that falls further behind gets 410 Gone and re-reads the catalog. A Firestore TTL policy deletes expired records."
  default     = 604800

  validation {
    condition     = var.change_retention_seconds >= 3600 && floor(var.change_retention_seconds) == var.change_retention_seconds
    error_message = "change_retention_seconds must be a whole number of seconds, at least 3600."
  }
}

variable "operation_retention_seconds" {
  type        = number
  description = "SPECSYNC_OPERATION_RETENTION (bootstrap and reconcile): how long a finished operation can be polled. A Firestore TTL policy deletes it afterwards."
  default     = 86400

  validation {
    condition     = var.operation_retention_seconds >= 60 && floor(var.operation_retention_seconds) == var.operation_retention_seconds
    error_message = "operation_retention_seconds must be a whole number of seconds, at least 60."
  }
}

variable "lease_ttl_seconds" {
  type        = number
  description = "SPECSYNC_LEASE_TTL: one reconcile per registry at a time; a lease outlives a crashed holder by at most this. Must exceed the reconcile timeout so a live run never loses its lease."
  default     = 600

  validation {
    condition     = floor(var.lease_ttl_seconds) == var.lease_ttl_seconds && var.lease_ttl_seconds > var.reconcile_service.timeout_seconds
    error_message = "lease_ttl_seconds must be a whole number of seconds greater than reconcile_service.timeout_seconds."
  }
}

variable "event_cooldown_ms" {
  type        = number
  description = "SPECSYNC_EVENT_COOLDOWN: the least time between the starts of two runs of one registry for events; an event that comes sooner is redelivered by Pub/Sub, so a storm makes one run a cooldown at most."
  default     = 1000

  validation {
    condition     = floor(var.event_cooldown_ms) == var.event_cooldown_ms && var.event_cooldown_ms >= 1 && var.event_cooldown_ms <= 600000
    error_message = "event_cooldown_ms must be a whole number of milliseconds between 1 and 600000 (10 minutes)."
  }
}

variable "event_clock_skew_ms" {
  type        = number
  description = "SPECSYNC_EVENT_CLOCK_SKEW: how far the clocks of the instance that received an event and the one that ran its registry may disagree; a run covers an event only if it started at least this long after it."
  default     = 1000

  validation {
    condition     = floor(var.event_clock_skew_ms) == var.event_clock_skew_ms && var.event_clock_skew_ms >= 1 && var.event_clock_skew_ms <= 60000
    error_message = "event_clock_skew_ms must be a whole number of milliseconds between 1 and 60000."
  }
}

variable "catalog_refresh_seconds" {
  type        = number
  description = "SPECSYNC_CATALOG_REFRESH: a warm catalog instance re-reads the catalog revision at most this often."
  default     = 5

  validation {
    condition     = var.catalog_refresh_seconds >= 1 && floor(var.catalog_refresh_seconds) == var.catalog_refresh_seconds
    error_message = "catalog_refresh_seconds must be a whole number of seconds, at least 1."
  }
}

variable "max_body_bytes" {
  type        = number
  description = "SPECSYNC_MAX_BODY_BYTES: the catalog's request body limit."
  default     = 65536

  validation {
    condition     = var.max_body_bytes >= 1024 && var.max_body_bytes <= 33554432 && floor(var.max_body_bytes) == var.max_body_bytes
    error_message = "max_body_bytes must be a whole number between 1024 and 33554432."
  }
}

variable "catalog_max_bytes" {
  type        = number
  description = "SPECSYNC_CATALOG_MAX_BYTES: the largest catalog body served, in either form (JSON, gzip); a larger one is refused with 500 CatalogTooLarge, never cut. Default: Cloud Run's 32 MiB limit on a response that is not streamed (docs/deploy.md#how-large-a-catalog-this-deployment-serves)."
  default     = 33554432

  validation {
    condition     = var.catalog_max_bytes >= 1024 && var.catalog_max_bytes <= 33554432 && floor(var.catalog_max_bytes) == var.catalog_max_bytes
    error_message = "catalog_max_bytes must be a whole number between 1024 and 33554432 (Cloud Run's limit)."
  }
}

variable "hook_window_seconds" {
  type        = number
  description = "SPECSYNC_HOOK_WINDOW (hooks): a registry's first webhook event is published at once; the events that follow within this window are merged into one reconcile message when it closes (docs/api.md#webhooks). A request that joins a window waits for it, so keep it well under the senders' timeouts."
  default     = 1

  validation {
    condition     = var.hook_window_seconds > 0 && var.hook_window_seconds <= 30
    error_message = "hook_window_seconds must be more than 0 and at most 30."
  }
}

variable "artifact_registry_events" {
  type        = string
  description = "Artifact Registry publishes every push, tag and delete of a project's repositories to that project's Pub/Sub topic named gcr; the reconcile function subscribes to the gcr topic of every project whose Artifact Registry the registries file reads, and reconciles the entries an event names within seconds. \"existing\" (the default) adopts each topic (Artifact Registry creates it when its API is enabled; the plan stops, naming it, if one is missing); \"create\" creates the module's own project's topic (other projects' are always adopted) and never destroys it; \"off\" subscribes to nothing."
  default     = "existing"
  nullable    = false

  validation {
    condition     = contains(["create", "existing", "off"], var.artifact_registry_events)
    error_message = "artifact_registry_events must be existing (adopt each project's gcr topic), create (create the module's project's gcr topic) or off."
  }
}

# What bounds a run of each function. cpu below 1 allows no concurrency.

variable "bootstrap_service" {
  type = object({
    timeout_seconds = optional(number, 60)
    memory          = optional(string, "256Mi")
    cpu             = optional(string, "1")
    min_instances   = optional(number, 0)
    max_instances   = optional(number, 2)
    concurrency     = optional(number, 80)
  })
  description = "Bootstrap function limits: it creates an operation and publishes one message per registry."
  default     = {}
  nullable    = false

  validation {
    condition     = var.bootstrap_service.timeout_seconds >= 10 && var.bootstrap_service.timeout_seconds <= 3600
    error_message = "bootstrap_service.timeout_seconds must be between 10 and 3600."
  }
  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi)$", var.bootstrap_service.memory))
    error_message = "bootstrap_service.memory must be a size such as 256Mi or 1Gi."
  }
  validation {
    condition     = var.bootstrap_service.min_instances >= 0 && var.bootstrap_service.max_instances >= 1 && var.bootstrap_service.min_instances <= var.bootstrap_service.max_instances
    error_message = "bootstrap_service needs 0 <= min_instances <= max_instances and max_instances >= 1."
  }
  validation {
    condition     = var.bootstrap_service.concurrency >= 1 && var.bootstrap_service.concurrency <= 1000 && (var.bootstrap_service.concurrency == 1 || tonumber(var.bootstrap_service.cpu) >= 1)
    error_message = "bootstrap_service.concurrency must be between 1 and 1000, and above 1 only with cpu >= 1."
  }
}

variable "hooks_service" {
  type = object({
    timeout_seconds = optional(number, 60)
    memory          = optional(string, "256Mi")
    cpu             = optional(string, "1")
    min_instances   = optional(number, 0)
    max_instances   = optional(number, 2)
    concurrency     = optional(number, 80)
  })
  description = "Hooks function limits (deployed when a registry has a hook block): it authenticates the registries' webhooks and publishes reconcile messages. A webhook that joins a coalescing window stays in flight until the window closes (hook_window_seconds), so a burst holds up to max_instances x concurrency requests at once; beyond that Cloud Run queues them."
  default     = {}
  nullable    = false

  validation {
    condition     = var.hooks_service.timeout_seconds >= 10 && var.hooks_service.timeout_seconds <= 3600
    error_message = "hooks_service.timeout_seconds must be between 10 and 3600."
  }
  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi)$", var.hooks_service.memory))
    error_message = "hooks_service.memory must be a size such as 256Mi or 1Gi."
  }
  validation {
    condition     = var.hooks_service.min_instances >= 0 && var.hooks_service.max_instances >= 1 && var.hooks_service.min_instances <= var.hooks_service.max_instances
    error_message = "hooks_service needs 0 <= min_instances <= max_instances and max_instances >= 1."
  }
  validation {
    condition     = var.hooks_service.concurrency >= 1 && var.hooks_service.concurrency <= 1000 && (var.hooks_service.concurrency == 1 || tonumber(var.hooks_service.cpu) >= 1)
    error_message = "hooks_service.concurrency must be between 1 and 1000, and above 1 only with cpu >= 1."
  }
}

variable "reconcile_service" {
  type = object({
    timeout_seconds = optional(number, 300)
    memory          = optional(string, "512Mi")
    cpu             = optional(string, "1")
    min_instances   = optional(number, 0)
    max_instances   = optional(number, 5)
    concurrency     = optional(number, 1)
  })
  description = "Reconcile function limits: one registry per request. max_instances x concurrency reconciles run at once; the rest wait for Pub/Sub's redelivery. The timeout is also the push subscription's ack deadline (at most 600s)."
  default     = {}
  nullable    = false

  validation {
    condition     = var.reconcile_service.timeout_seconds >= 10 && var.reconcile_service.timeout_seconds <= 600
    error_message = "reconcile_service.timeout_seconds must be between 10 and 600 (the longest push ack deadline)."
  }
  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi)$", var.reconcile_service.memory))
    error_message = "reconcile_service.memory must be a size such as 512Mi or 1Gi."
  }
  validation {
    condition     = var.reconcile_service.min_instances >= 0 && var.reconcile_service.max_instances >= 1 && var.reconcile_service.min_instances <= var.reconcile_service.max_instances
    error_message = "reconcile_service needs 0 <= min_instances <= max_instances and max_instances >= 1."
  }
  validation {
    condition     = var.reconcile_service.concurrency >= 1 && var.reconcile_service.concurrency <= 1000 && (var.reconcile_service.concurrency == 1 || tonumber(var.reconcile_service.cpu) >= 1)
    error_message = "reconcile_service.concurrency must be between 1 and 1000, and above 1 only with cpu >= 1."
  }
}

variable "catalog_service" {
  type = object({
    timeout_seconds = optional(number, 30)
    memory          = optional(string, "256Mi")
    cpu             = optional(string, "1")
    min_instances   = optional(number, 0)
    max_instances   = optional(number, 10)
    concurrency     = optional(number, 80)
  })
  description = "Catalog function limits: the OSB API. min_instances 1 removes cold starts for platforms, at the price of an always-on instance."
  default     = {}
  nullable    = false

  validation {
    condition     = var.catalog_service.timeout_seconds >= 5 && var.catalog_service.timeout_seconds <= 3600
    error_message = "catalog_service.timeout_seconds must be between 5 and 3600."
  }
  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi)$", var.catalog_service.memory))
    error_message = "catalog_service.memory must be a size such as 256Mi or 1Gi."
  }
  validation {
    condition     = var.catalog_service.min_instances >= 0 && var.catalog_service.max_instances >= 1 && var.catalog_service.min_instances <= var.catalog_service.max_instances
    error_message = "catalog_service needs 0 <= min_instances <= max_instances and max_instances >= 1."
  }
  validation {
    condition     = var.catalog_service.concurrency >= 1 && var.catalog_service.concurrency <= 1000 && (var.catalog_service.concurrency == 1 || tonumber(var.catalog_service.cpu) >= 1)
    error_message = "catalog_service.concurrency must be between 1 and 1000, and above 1 only with cpu >= 1."
  }
}

variable "reconcile_max_delivery_attempts" {
  type        = number
  description = "Deliveries of one reconcile message (a retryable failure: store unavailable, lease held, cold start failed) before it goes to the dead-letter topic."
  default     = 10

  validation {
    condition     = var.reconcile_max_delivery_attempts >= 5 && var.reconcile_max_delivery_attempts <= 100 && floor(var.reconcile_max_delivery_attempts) == var.reconcile_max_delivery_attempts
    error_message = "reconcile_max_delivery_attempts must be a whole number between 5 and 100 (Pub/Sub's limits)."
  }
}

variable "reconcile_retry_backoff_seconds" {
  type = object({
    minimum = optional(number, 10)
    maximum = optional(number, 600)
  })
  description = "Exponential backoff between redeliveries of a reconcile message."
  default     = {}
  nullable    = false

  validation {
    condition     = var.reconcile_retry_backoff_seconds.minimum >= 0 && var.reconcile_retry_backoff_seconds.minimum <= var.reconcile_retry_backoff_seconds.maximum && var.reconcile_retry_backoff_seconds.maximum <= 600
    error_message = "reconcile_retry_backoff_seconds needs 0 <= minimum <= maximum <= 600."
  }
}

variable "dead_letter_retention_seconds" {
  type        = number
  description = "How long dead-lettered reconcile messages are kept for inspection."
  default     = 604800

  validation {
    condition     = var.dead_letter_retention_seconds >= 600 && var.dead_letter_retention_seconds <= 2678400
    error_message = "dead_letter_retention_seconds must be between 600 (10 minutes) and 2678400 (31 days)."
  }
}

variable "deletion_protection" {
  type        = bool
  description = "Protect what holds data from deletion: the Firestore database (delete protection; terraform destroy abandons it in any case) and the secrets. Set false, apply, then destroy to really remove them."
  default     = true
}

# Secret values never go through terraform by default: the secrets are
# created empty and you add versions out of band (docs/deploy.md#secrets).
# For a single apply from an empty project, pass them as an ephemeral
# input instead: write-only arguments keep them out of the plan and the
# state.

variable "write_secrets" {
  type        = set(string)
  description = "Secrets (keys of the secrets output) to give a first version from secret_values, through a write-only argument: never stored in the plan or the state. Empty (the default): add the values out of band. Empty it again after the apply that wrote them (the versions stay)."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for k in var.write_secrets : can(regex("^(SPECSYNC_ADMIN_TOKEN|SPECSYNC_BROKER_PASSWORD|[A-Za-z_][A-Za-z0-9_]*|/.+)$", k))])
    error_message = "write_secrets holds keys of the secrets output: SPECSYNC_ADMIN_TOKEN, SPECSYNC_BROKER_PASSWORD, a registry credential's *_env name or its *_file path."
  }
}

variable "secret_values" {
  type        = map(string)
  description = "With write_secrets: the value of each secret to write, keyed as the secrets output is (SPECSYNC_ADMIN_TOKEN, SPECSYNC_BROKER_PASSWORD, and each registry credential's *_env name or *_file path). Ephemeral: pass it with TF_VAR_secret_values at apply time."
  default     = {}
  nullable    = false
  sensitive   = true
  ephemeral   = true

  validation {
    condition     = alltrue([for v in values(var.secret_values) : length(v) > 0])
    error_message = "secret_values may not hold empty values."
  }
  validation {
    condition     = length(lookup(var.secret_values, "SPECSYNC_ADMIN_TOKEN", "absent-is-checked-later")) >= 16
    error_message = "SPECSYNC_ADMIN_TOKEN must be at least 16 characters."
  }
  # The catalog checks the credentials against the digests: a written
  # value that does not match would lock every caller out.
  validation {
    condition     = !contains(keys(var.secret_values), "SPECSYNC_BROKER_PASSWORD") || sha256(lookup(var.secret_values, "SPECSYNC_BROKER_PASSWORD", "")) == lower(var.broker_password_sha256)
    error_message = "secret_values' SPECSYNC_BROKER_PASSWORD does not have the SHA-256 broker_password_sha256 says."
  }
  validation {
    condition     = !contains(keys(var.secret_values), "SPECSYNC_ADMIN_TOKEN") || sha256(lookup(var.secret_values, "SPECSYNC_ADMIN_TOKEN", "")) == lower(var.admin_token_sha256)
    error_message = "secret_values' SPECSYNC_ADMIN_TOKEN does not have the SHA-256 admin_token_sha256 says."
  }
}

# Registries the reconcile function reads with its own identity
# (auth.type: google in the registries file) need no secret: its service
# account is granted read access to them instead, derived from the file
# (registries.tf). This list only adds to what the file implies.

variable "artifact_registry_repositories" {
  type        = list(string)
  description = "More Artifact Registry repositories the reconcile function may read with its own identity, besides those the registries file's auth.type google sources name (which are derived from it): LOCATION/REPOSITORY in project_id, or PROJECT/LOCATION/REPOSITORY in another project. Its service account gets roles/artifactregistry.reader on each."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for r in var.artifact_registry_repositories : can(regex("^([a-z][a-z0-9-]{4,28}[a-z0-9]/)?[a-z]+(-[a-z]+[0-9]+)?/[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", r))])
    error_message = "artifact_registry_repositories holds LOCATION/REPOSITORY or PROJECT/LOCATION/REPOSITORY (europe/specs, my-project/us-central1/team-images): a project id, a location such as europe or us-central1, and a repository id of lowercase letters, digits and hyphens."
  }
  validation {
    condition     = length(distinct([for r in var.artifact_registry_repositories : length(split("/", r)) == 2 ? "${var.project_id}/${r}" : r])) == length(var.artifact_registry_repositories)
    error_message = "artifact_registry_repositories names a repository twice."
  }
}

# Catalog views (secrets.tf, "Catalog views", docs/configuration.md#catalog-views).
variable "broker_views" {
  type = map(object({
    username   = string
    registries = optional(object({ allow = optional(list(string), []), deny = optional(list(string), []) }), {})
    services   = optional(object({ allow = optional(list(string), []), deny = optional(list(string), []) }), {})
    tags       = optional(object({ allow = optional(list(string), []), deny = optional(list(string), []) }), {})
  }))
  description = "Catalog views, by name: each a broker credential (username; its password in the Secret Manager secret <name_prefix>-broker-view-<name>, mounted on the catalog) with allow/deny regular expressions over registries, service names and tags. Empty (the default): the one credential of broker_username and broker_password_sha256 sees every service."
  default     = {}
  nullable    = false

  validation {
    condition     = alltrue([for name in keys(var.broker_views) : can(regex("^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", name))])
    error_message = "Every broker_views name must be a DNS label: lowercase letters, digits and hyphens, starting with a letter, at most 63."
  }
  validation {
    condition     = alltrue([for v in values(var.broker_views) : length(v.username) > 0 && !strcontains(v.username, ":")]) && length(distinct([for v in values(var.broker_views) : v.username])) == length(var.broker_views)
    error_message = "Every broker_views username must be non-empty, without a colon (basic auth), and unique: a credential chooses one view."
  }
}

# Monitoring (monitoring.tf): where alerts go and what they tolerate.

variable "notification_channels" {
  type        = list(string)
  description = "Cloud Monitoring notification channels every specsync alert notifies (projects/PROJECT/notificationChannels/ID, as `gcloud beta monitoring channels list` prints them). Empty: the alerts still open incidents, shown in the console, but notify nobody."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for c in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", c))])
    error_message = "notification_channels holds channel names such as projects/my-project/notificationChannels/1234567890."
  }
}

variable "alert_failed_runs" {
  type        = number
  description = "How many runs in a row a registry must fail (fetch_failed or error) before the registry_failing alert fires."
  default     = 3

  validation {
    condition     = var.alert_failed_runs >= 1 && var.alert_failed_runs <= 24 && floor(var.alert_failed_runs) == var.alert_failed_runs
    error_message = "alert_failed_runs is a whole number from 1 to 24."
  }
}

variable "freshness_objective_seconds" {
  type        = number
  description = "The freshness objective: a push is fresh when its change is in the catalog within this many seconds of the event (the push_freshness SLO)."
  default     = 5
  nullable    = false

  validation {
    condition     = var.freshness_objective_seconds >= 1 && var.freshness_objective_seconds <= 3600 && floor(var.freshness_objective_seconds) == var.freshness_objective_seconds
    error_message = "freshness_objective_seconds is a whole number of seconds from 1 to 3600."
  }
}

variable "freshness_objective_goal" {
  type        = number
  description = "The share of pushes that must be fresh (freshness_objective_seconds) over 28 days: the push_freshness SLO's goal."
  default     = 0.99
  nullable    = false

  validation {
    condition     = var.freshness_objective_goal > 0 && var.freshness_objective_goal < 1
    error_message = "freshness_objective_goal is a share strictly between 0 and 1, such as 0.99."
  }
}

variable "bootstrap_interval_seconds" {
  type        = number
  description = "Seconds between two runs of bootstrap_schedule (3600 for the default hourly schedule): the failing-registry alert counts failures over alert_failed_runs of these, and the no-successful-run alert fires after two of them without one."
  default     = 3600

  validation {
    condition     = var.bootstrap_interval_seconds >= 300 && var.bootstrap_interval_seconds <= 43200
    error_message = "bootstrap_interval_seconds is from 300 (5 minutes) to 43200 (12 hours): the absence alert waits twice as long, and Cloud Monitoring waits at most a day."
  }
}

variable "tracing" {
  type        = bool
  description = "Whether the functions send spans to Cloud Trace, by OTLP to the Telemetry API (SPECSYNC_TRACE=otlp, else off)."
  default     = true
}

variable "trace_sample_ratio" {
  type        = number
  description = "SPECSYNC_TRACE_SAMPLE_RATIO of every function: the share of requests' and registry events' traces sent to Cloud Trace, whatever a caller's traceparent says; a bootstrap the admin or the scheduler asked for always is, so 0 traces those only."
  default     = 0.01

  validation {
    condition     = var.trace_sample_ratio >= 0 && var.trace_sample_ratio <= 1
    error_message = "trace_sample_ratio must be between 0 and 1."
  }
}
