# The registries file, and everything it implies. It is an input of the
# module (var.registries_file: any path, relative to the root module or
# absolute), never part of the functions' source: terraform uploads it to
# Cloud Storage as the config bundle (config.tf) and the functions read it
# from there, so editing it and applying changes no function image.
#
# What terraform derives from it, so that nothing is written twice:
#   - a secret for every credential and verify key or trusted root it
#     names (*_env, *_file; secrets.tf);
#   - roles/artifactregistry.reader on every Artifact Registry repository
#     an `auth.type: google` source names, in any project (iam.tf);
#   - roles/storage.objectViewer on every Cloud Storage bucket an http or
#     helm source reads with `auth.type: google` (iam.tf);
#   - the `gcr` subscription of every project whose Artifact Registry a
#     source reads (events.tf);
#   - the webhooks (the hooks function and its secrets) of every hook block;
#   - the spec files of every `dir` source (shipped in the config bundle).

locals {
  registries_path = startswith(var.registries_file, "/") ? var.registries_file : "${path.root}/${var.registries_file}"
  registries_dir  = dirname(local.registries_path)
  registries_text = file(local.registries_path)

  # $${VAR} references, replaced from the environment before the file is
  # parsed (pkg/config): the functions that load it get them from
  # var.registry_env. A missing value fails the plan (registries_file
  # below); it reads as "" meanwhile, so the derivations still evaluate.
  registry_env_refs = toset(flatten(regexall("\\$\\{([A-Za-z_][A-Za-z0-9_]*)\\}", local.registries_text)))
  registry_env      = { for k in local.registry_env_refs : k => lookup(var.registry_env, k, "") }

  # The file as the functions see it: each $${NAME} replaced by its
  # value, anything else left as written (the code's rule, pkg/config).
  registries_pieces = split("$${", local.registries_text)
  registries_expanded = join("", concat([local.registries_pieces[0]], [
    for p in slice(local.registries_pieces, 1, length(local.registries_pieces)) :
    can(regex("^[A-Za-z_][A-Za-z0-9_]*}", p))
    ? "${local.registry_env[regex("^([A-Za-z_][A-Za-z0-9_]*)}", p)[0]]}${substr(p, length(regex("^([A-Za-z_][A-Za-z0-9_]*)}", p)[0]) + 1, -1)}"
    : "$${${p}"
  ]))
  registries_doc = try(yamldecode(local.registries_expanded), null)
  registries     = try([for r in local.registries_doc.registries : r], [])

  # Each registry's source block: the one of its type (pkg/config checks
  # that there is exactly one).
  registry_blocks = [for r in local.registries : merge({ name = r.name, type = r.type }, try(r[r.type], {}))]
  registry_auths  = [for b in local.registry_blocks : try(b.auth, {})]

  # Credentials are only ever named in the file: *_env is an environment
  # variable of the reconcile function, *_file a file in it; both are
  # filled from Secret Manager (secrets.tf). The convention is stated once
  # (registry.Kind's Credentials, pkg/registry/kind.go, whose test holds
  # every source to it): every key of a source block's auth that ends in
  # _env or _file names a secret, so a new source needs no change here.
  # A verify block names its public keys, trusted root and keyring the
  # same way (each of verify.keys, verify.keyless and verify.provenance:
  # its keys ending in _env or _file; pkg/verify's SecretRefs): they are
  # read by the reconcile function at fetch time, like credentials.
  registry_verify_refs = flatten([
    for r in local.registries : concat(try(r.verify.keys, []), try([r.verify.keyless], []), try([r.verify.provenance], []))
  ])
  registry_secret_envs = toset(flatten([
    for a in concat(local.registry_auths, local.registry_verify_refs) : [
      for k in try(keys(a), []) : a[k] if endswith(k, "_env") && try(a[k], null) != null
    ]
  ]))
  registry_secret_files = toset(flatten([
    for a in concat(local.registry_auths, local.registry_verify_refs) : [
      for k in try(keys(a), []) : a[k] if endswith(k, "_file") && try(a[k], null) != null
    ]
  ]))

  # Webhooks: a hook block names its secret as an environment variable
  # (secret_env) or a file (secret_file) of the hooks function, which
  # serves POST /hooks/NAME; no other function sees them.
  registry_hooks    = [for r in local.registries : merge(r.hook, { name = r.name }) if try(r.hook, null) != null]
  hook_secret_envs  = toset([for h in local.registry_hooks : h.secret_env if try(h.secret_env, null) != null])
  hook_secret_files = toset([for h in local.registry_hooks : h.secret_file if try(h.secret_file, null) != null])

  # Artifact Registry (and gcr.io, served by Artifact Registry): a source
  # on LOCATION-docker.pkg.dev (or [REGION.]gcr.io) with prefix
  # PROJECT/REPOSITORY[/...] reads that repository; a prefix of a project
  # alone reads all of the project's repositories on that host.
  gcr_locations = { "gcr.io" = "us", "us.gcr.io" = "us", "eu.gcr.io" = "europe", "asia.gcr.io" = "asia" }
  artifact_registry_sources = [
    for b in local.registry_blocks : {
      name     = b.name
      google   = try(b.auth.type, "") == "google"
      location = can(regex("^([a-z0-9-]+)-docker\\.pkg\\.dev$", b.host)) ? regex("^([a-z0-9-]+)-docker\\.pkg\\.dev$", b.host)[0] : local.gcr_locations[b.host]
      # On gcr.io the repository is the host itself.
      repository = can(regex("\\.gcr\\.io$|^gcr\\.io$", b.host)) ? b.host : try(split("/", b.prefix)[1], null)
      project    = split("/", b.prefix)[0]
    }
    if contains(["oci", "helm"], b.type) && try(b.host, "") != "" && try(b.prefix, "") != "" &&
    (can(regex("^[a-z0-9-]+-docker\\.pkg\\.dev$", try(b.host, ""))) || contains(keys(local.gcr_locations), try(b.host, "")))
  ]
  # PROJECT/LOCATION/REPOSITORY of each repository a google source reads,
  # plus var.artifact_registry_repositories (repositories read some other
  # way, e.g. named in a source's repositories list on another host).
  artifact_registry_paths = distinct(concat(
    [for s in local.artifact_registry_sources : "${s.project}/${s.location}/${s.repository}" if s.google && s.repository != null],
    [for r in var.artifact_registry_repositories : length(split("/", r)) == 2 ? "${var.project_id}/${r}" : r],
  ))
  # Projects a google source reads whole (a prefix without a repository).
  artifact_registry_projects = toset([for s in local.artifact_registry_sources : s.project if s.google && s.repository == null])

  # Cloud Storage: an http index or a helm chart repository read with auth
  # type google from https://storage.googleapis.com/BUCKET/... (the one
  # form the code sends a Google token to, pkg/registry/google.go).
  storage_buckets = toset([
    for b in local.registry_blocks : regex("^https://storage\\.googleapis\\.com/([^/]+)/", b.url)[0]
    if try(b.auth.type, "") == "google" && can(regex("^https://storage\\.googleapis\\.com/([^/]+)/", try(b.url, "")))
  ])

  # The projects whose Artifact Registry notifications (their gcr topic)
  # the reconcile function subscribes to: every project a source on
  # Artifact Registry reads, whatever its auth (events.tf).
  event_projects = var.artifact_registry_events == "off" ? toset([]) : toset([for s in local.artifact_registry_sources : s.project])

  # `dir` sources: a directory of spec files beside the registries file,
  # shipped in the config bundle (the functions cannot see the machine
  # terraform runs on). The embedded example directory needs nothing.
  dir_paths = toset([for b in local.registry_blocks : b.path if b.type == "dir" && try(b.path, "") != "" && !try(b.embedded, false)])
  dir_files = merge([
    for d in local.dir_paths : {
      for f in fileset("${local.registries_dir}/${d}", "*.{yaml,yml,json}") : "${trimsuffix(d, "/")}/${f}" => file("${local.registries_dir}/${d}/${f}")
    } if !startswith(d, "/") && !strcontains(d, "..")
  ]...)
}

# Checks of the registries file that terraform can make before anything is
# created: it parses, every $${VAR} it references has a value, every
# credential gets a distinct secret and can be mounted, and what it names
# can be deployed.
resource "terraform_data" "registries_file" {
  input = sha256(local.registries_text)

  lifecycle {
    precondition {
      condition     = local.registries_doc != null && length(local.registries) > 0 && alltrue([for r in local.registries : can(r.name) && can(r.type)])
      error_message = "The registries file ${var.registries_file} does not parse as a registries file (a YAML document with a registries list, each with a name and a type). Check it with `specsync config check ${var.registries_file}`, which names the line."
    }
    precondition {
      condition     = length(setsubtract(local.registry_env_refs, keys(var.registry_env))) == 0
      error_message = "The registries file references environment variables that registry_env does not set: ${join(", ", sort(setsubtract(local.registry_env_refs, keys(var.registry_env))))}. Give each a value in registry_env (hosts and URLs; a secret is named with *_env or *_file instead)."
    }
    precondition {
      condition     = length(setsubtract(var.write_secrets, keys(local.credential_secrets))) == 0
      error_message = "write_secrets names secrets that do not exist: ${join(", ", sort(setsubtract(var.write_secrets, keys(local.credential_secrets))))}."
    }
    precondition {
      condition     = length(distinct(values(local.credential_secrets))) == length(local.credential_secrets)
      error_message = "Two credentials of the registries file map to the same secret id; rename one of the *_env variables or *_file paths."
    }
    precondition {
      # A hook's secret is mounted on the hooks function, a registry
      # credential on the reconcile: one name cannot be both.
      condition     = length(setintersection(setunion(local.hook_secret_envs, local.hook_secret_files), setunion(local.registry_secret_envs, local.registry_secret_files))) == 0
      error_message = "A hook block names the same secret_env or secret_file as a registry credential (${join(", ", sort(setintersection(setunion(local.hook_secret_envs, local.hook_secret_files), setunion(local.registry_secret_envs, local.registry_secret_files))))}); give the webhook a secret of its own."
    }
    precondition {
      condition     = alltrue([for e in setunion(local.registry_secret_envs, local.hook_secret_envs, local.registry_env_refs) : !can(regex("^(SPECSYNC_|GOOGLE_|FIRESTORE_|FUNCTION_|K_|X_GOOGLE_|CLOUD_RUN_)|^(LOG_LEVEL|PORT)$", e))])
      error_message = "The registries file names an environment variable that is a setting of the functions or reserved by the platform (SPECSYNC_*, GOOGLE_*, FIRESTORE_*, FUNCTION_*, K_*, X_GOOGLE_*, CLOUD_RUN_*, LOG_LEVEL, PORT): rename it in the file (and in registry_env)."
    }
    precondition {
      # A secret volume mounts a whole directory: each credential file needs
      # an absolute path in a directory of its own, outside the source
      # (/workspace) and the admin token's directory.
      condition     = alltrue([for f in setunion(local.registry_secret_files, local.hook_secret_files) : startswith(f, "/") && dirname(f) != "/" && !startswith(f, "/workspace")]) && length(distinct([for f in setunion(local.registry_secret_files, local.hook_secret_files) : dirname(f)])) == length(setunion(local.registry_secret_files, local.hook_secret_files)) && !contains([for f in setunion(local.registry_secret_files, local.hook_secret_files) : dirname(f)], dirname(local.admin_token_file))
      error_message = "Every *_file credential and hook secret_file must be an absolute path outside /workspace, in a directory no other secret file uses (a Secret Manager volume mounts the whole directory; the admin token has ${dirname(local.admin_token_file)})."
    }
    precondition {
      condition     = alltrue([for d in local.dir_paths : !startswith(d, "/") && !strcontains(d, "..") && length(fileset("${local.registries_dir}/${d}", "*.{yaml,yml,json}")) > 0])
      error_message = "Every dir source's path must be a directory beside the registries file (relative, without ..) holding *.yaml, *.yml or *.json spec files: terraform ships them in the config bundle. Offending: ${join(", ", sort([for d in local.dir_paths : d if startswith(d, "/") || strcontains(d, "..") || length(try(fileset("${local.registries_dir}/${d}", "*.{yaml,yml,json}"), [])) == 0]))}."
    }
    precondition {
      condition     = alltrue([for s in local.artifact_registry_sources : can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", s.project)) && s.location != null])
      error_message = "An Artifact Registry source's prefix must start with a project id (PROJECT/REPOSITORY): ${join(", ", [for s in local.artifact_registry_sources : "${s.name} (${s.project})" if !can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", s.project))])}."
    }
  }
}
