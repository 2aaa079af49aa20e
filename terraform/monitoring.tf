# Metrics, a dashboard and alerts, read from the functions' logs: each
# log-based metric counts (or reads a number from) one of the contract
# lines the code logs (pkg/logging/events.go, documented in
# docs/operations.md). terraform/monitoring_test.go evaluates every filter,
# label and value against that contract, so a renamed field fails the
# tests instead of silently emptying a metric in production. Labels are
# the registry name, the result and the run's kind only: bounded by the
# registries file and the code's vocabularies.

locals {
  # The functions whose logs the metrics read, by the names functions.tf
  # gives them (not references to the functions: the catalog function's
  # settings name the dashboard, which would make a cycle).
  logging_services = {
    for k in ["bootstrap", "reconcile", "catalog"] : k => "${var.name_prefix}-${k}"
  }
  # Each function's log entries, in a log filter.
  function_logs  = { for k, name in local.logging_services : k => "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"${name}\"" }
  catalog_logs   = local.function_logs.catalog
  reconcile_logs = local.function_logs.reconcile
  # An operation ends in the reconcile function (its commit, a dry run's
  # last report) or in the bootstrap function (a failed publish, an
  # operation read past its deadline); either may read an overdue one.
  operation_logs = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=(\"${local.logging_services.bootstrap}\" OR \"${local.logging_services.reconcile}\")"

  # Run results (pkg/api): the runs that could not do their work
  # (RunResult.Failed) and the real runs that did it (RunResult.OK, dry
  # runs aside). The tests check both against the code.
  failed_results     = ["fetch_failed", "error"]
  successful_results = ["succeeded", "unchanged"]
  # The kind of run the registry alerts read (api.KindFull): a
  # registry's whole listing, whatever its event runs (api.KindEvent) do;
  # dry runs (api.KindDry) count for nothing.
  full_kind  = "full"
  event_kind = "event"

  # The freshness objective: the share of pushes (event runs' changes)
  # in the catalog within the objective, over 28 days. The latency
  # buckets put the objective on a bucket boundary (objective / 2^9 times
  # powers of 2), so the SLO's distribution cut counts exactly.
  freshness_ms      = var.freshness_objective_seconds * 1000
  freshness_buckets = { scale = local.freshness_ms / 512, growth = 2, n = 24 }
  # Burn rates that spend 2% of the 28-day error budget in an hour, 5%
  # in six (the SRE workbook's fast and slow pages).
  fast_burn = 0.02 * 28 * 24 / 1
  slow_burn = 0.05 * 28 * 24 / 6

  # Each log-based metric: the contract line it reads (filter), its labels
  # (label => the line's field) and, for a distribution, the field whose
  # value it records, with its buckets.
  count_buckets = { scale = 1, growth = 2, n = 20 }
  log_metrics = {
    runs = {
      description = "Reconcile runs, one per summary line, by registry, result and kind (full, event, dry)."
      filter      = "${local.reconcile_logs} AND jsonPayload.event=\"run_summary\""
      labels      = { registry = "registry", result = "result", kind = "kind" }
      value       = null
      unit        = "1"
      buckets     = null
    }
    run_duration = {
      description = "How long reconcile runs take (ms), by registry."
      filter      = "${local.reconcile_logs} AND jsonPayload.event=\"run_summary\""
      labels      = { registry = "registry" }
      value       = "duration_ms"
      unit        = "ms"
      buckets     = { scale = 10, growth = 2, n = 20 }
    }
    specs_marked = {
      description = "Specs marked for deletion by reconcile runs (gone upstream), by registry."
      filter      = "${local.reconcile_logs} AND jsonPayload.event=\"run_summary\" AND jsonPayload.marked>0"
      labels      = { registry = "registry" }
      value       = "marked"
      unit        = "1"
      buckets     = local.count_buckets
    }
    specs_deleted = {
      description = "Marked specs deleted by reconcile runs (no instance referenced them), by registry."
      filter      = "${local.reconcile_logs} AND jsonPayload.event=\"run_summary\" AND jsonPayload.deleted>0"
      labels      = { registry = "registry" }
      value       = "deleted"
      unit        = "1"
      buckets     = local.count_buckets
    }
    entry_errors = {
      description = "Entries a reconcile run could not read or validate (their last good spec keeps serving), by registry."
      filter      = "${local.reconcile_logs} AND jsonPayload.event=\"run_summary\" AND jsonPayload.entry_errors>0"
      labels      = { registry = "registry" }
      value       = "entry_errors"
      unit        = "1"
      buckets     = local.count_buckets
    }
    bootstrap_operations = {
      description = "Bootstrap operations that ended, by result (succeeded or failed)."
      filter      = "${local.operation_logs} AND jsonPayload.event=\"bootstrap_operation\""
      labels      = { result = "result" }
      value       = null
      unit        = "1"
      buckets     = null
    }
    message_retries = {
      description = "Messages the reconcile function handed back to Pub/Sub for redelivery; after reconcile_max_delivery_attempts a message is dead-lettered."
      filter      = "${local.reconcile_logs} AND jsonPayload.event=\"message_retry\""
      labels      = {}
      value       = null
      unit        = "1"
      buckets     = null
    }
    catalog_revision = {
      description = "The catalog revision each commit reached (one value per commit that moved the catalog)."
      filter      = "${local.reconcile_logs} AND jsonPayload.event=\"catalog_commit\""
      labels      = {}
      value       = "revision"
      unit        = "1"
      buckets     = { scale = 1, growth = 2, n = 40 }
    }
    push_to_commit = {
      description = "How long (ms) an event run's changes took from the event to the catalog (its commit): the freshness objective's measure."
      filter      = "${local.reconcile_logs} AND jsonPayload.event=\"freshness\" AND jsonPayload.kind=\"${local.event_kind}\""
      labels      = {}
      value       = "latency_ms"
      unit        = "ms"
      buckets     = local.freshness_buckets
    }
    bootstrap_to_commit = {
      description = "How long (ms) a bootstrap's changes took from its start to the catalog (its commit)."
      filter      = "${local.reconcile_logs} AND jsonPayload.event=\"freshness\" AND jsonPayload.kind=\"${local.full_kind}\""
      labels      = {}
      value       = "latency_ms"
      unit        = "ms"
      buckets     = local.freshness_buckets
    }
    catalog_too_large = {
      description = "Catalog renders with a form over the response limit (refused, never cut); the line says which form."
      filter      = "${local.catalog_logs} AND jsonPayload.event=\"catalog_too_large\""
      labels      = {}
      value       = null
      unit        = "1"
      buckets     = null
    }
  }

  # A metric's name in PromQL (Cloud Monitoring's mapping of
  # logging.googleapis.com/user/NAME).
  promql_metric = {
    for k, m in google_logging_metric.specsync : k => "logging_googleapis_com:user_${replace(m.name, "/[^a-zA-Z0-9_]/", "_")}"
  }
  # A log-based metric's series, in a Cloud Monitoring filter.
  metric_filter = {
    for k, m in google_logging_metric.specsync : k => "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${m.name}\""
  }
  promql_failed = join("|", local.failed_results)
  # The window the failing-registry alert counts runs in: as many
  # scheduled runs as it takes failures.
  failing_window = "${var.alert_failed_runs * var.bootstrap_interval_seconds}s"

  # The dashboard in the console (its id is projects/NUMBER/dashboards/ID);
  # the catalog function's status page links to it (SPECSYNC_DASHBOARD_URL).
  dashboard_url = "https://console.cloud.google.com/monitoring/dashboards/builder/${basename(google_monitoring_dashboard.specsync.id)}?project=${var.project_id}"
}

resource "google_logging_metric" "specsync" {
  for_each = local.log_metrics

  project     = var.project_id
  name        = "${var.name_prefix}/${each.key}"
  description = each.value.description
  filter      = each.value.filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = each.value.value == null ? "INT64" : "DISTRIBUTION"
    unit        = each.value.unit

    dynamic "labels" {
      for_each = each.value.labels
      content {
        key        = labels.key
        value_type = "STRING"
      }
    }
  }

  label_extractors = length(each.value.labels) == 0 ? null : { for label, field in each.value.labels : label => "EXTRACT(jsonPayload.${field})" }
  value_extractor  = each.value.value == null ? null : "EXTRACT(jsonPayload.${each.value.value})"

  dynamic "bucket_options" {
    for_each = each.value.buckets == null ? [] : [each.value.buckets]
    content {
      exponential_buckets {
        num_finite_buckets = bucket_options.value.n
        growth_factor      = bucket_options.value.growth
        scale              = bucket_options.value.scale
      }
    }
  }

  depends_on = [google_project_service.enabled]
}

resource "google_monitoring_dashboard" "specsync" {
  project = var.project_id
  dashboard_json = jsonencode({
    displayName = "specsync (${var.name_prefix})"
    mosaicLayout = {
      columns = 12
      tiles = [for i, t in [
        { title = "Runs by registry, kind and result (per 10 min)", queries = ["sum by (registry, kind, result) (increase(${local.promql_metric.runs}[10m]))"] },
        { title = "Failed runs by registry and kind (per 10 min)", queries = ["sum by (registry, kind) (increase(${local.promql_metric.runs}{result=~\"${local.promql_failed}\"}[10m]))"] },
        { title = "Push to catalog p50 and p99 (ms)", queries = ["histogram_quantile(0.5, sum by (le) (rate(${local.promql_metric.push_to_commit}_bucket[1h])))", "histogram_quantile(0.99, sum by (le) (rate(${local.promql_metric.push_to_commit}_bucket[1h])))"] },
        { title = "Bootstrap to catalog p50 and p99 (ms)", queries = ["histogram_quantile(0.5, sum by (le) (rate(${local.promql_metric.bootstrap_to_commit}_bucket[6h])))", "histogram_quantile(0.99, sum by (le) (rate(${local.promql_metric.bootstrap_to_commit}_bucket[6h])))"] },
        { title = "Run duration p95 by registry (ms)", queries = ["histogram_quantile(0.95, sum by (registry, le) (rate(${local.promql_metric.run_duration}_bucket[30m])))"] },
        { title = "Specs marked and deleted by registry (per hour)", queries = ["sum by (registry) (increase(${local.promql_metric.specs_marked}_sum[1h]))", "sum by (registry) (increase(${local.promql_metric.specs_deleted}_sum[1h]))"] },
        { title = "Entry errors by registry (per hour)", queries = ["sum by (registry) (increase(${local.promql_metric.entry_errors}_sum[1h]))"] },
        { title = "Bootstrap operations by result (per hour)", queries = ["sum by (result) (increase(${local.promql_metric.bootstrap_operations}[1h]))"] },
        { title = "Catalog revision (mean of the commits per hour)", queries = ["sum(increase(${local.promql_metric.catalog_revision}_sum[1h])) / sum(increase(${local.promql_metric.catalog_revision}_count[1h]))"] },
        { title = "Messages handed back for redelivery (per 10 min)", queries = ["sum(increase(${local.promql_metric.message_retries}[10m]))"] },
        { title = "Catalog renders too large to serve (per hour)", queries = ["sum(increase(${local.promql_metric.catalog_too_large}[1h]))"] },
        { title = "Dead-lettered messages (waiting in the dead-letter subscription)", queries = ["max(pubsub_googleapis_com:subscription_num_undelivered_messages{monitored_resource=\"pubsub_subscription\",subscription_id=\"${google_pubsub_subscription.reconcile_dead_letter.name}\"})"] },
        ] : {
        xPos   = (i % 2) * 6
        yPos   = floor(i / 2) * 4
        width  = 6
        height = 4
        widget = {
          title = t.title
          xyChart = {
            dataSets = [for q in t.queries : { plotType = "LINE", timeSeriesQuery = { prometheusQuery = q } }]
          }
        }
      }]
    }
  })

  depends_on = [google_project_service.enabled]
}

# The alerts. Each names what to do in its documentation, which points at
# docs/operations.md.
resource "google_monitoring_alert_policy" "registry_failing" {
  project               = var.project_id
  display_name          = "specsync (${var.name_prefix}): a registry keeps failing"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "${var.alert_failed_runs} failed full runs and no successful one in ${local.failing_window}"
    # N failed full runs (fetch_failed, error) of a registry within N
    # scheduled intervals, and no full run that succeeded: N in a row at
    # the schedule. Event runs read a few entries, not the listing, so
    # they neither count nor reset it; nor do dry, busy or guarded runs.
    condition_prometheus_query_language {
      query               = "(sum by (registry) (increase(${local.promql_metric.runs}{kind=\"${local.full_kind}\",result=~\"${local.promql_failed}\"}[${local.failing_window}])) >= ${var.alert_failed_runs}) unless on (registry) (sum by (registry) (increase(${local.promql_metric.runs}{kind=\"${local.full_kind}\",result=~\"${join("|", local.successful_results)}\"}[${local.failing_window}])) > 0)"
      duration            = "0s"
      evaluation_interval = "60s"
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A registry's full runs failed ${var.alert_failed_runs} times in a row: it cannot be listed (fetch_failed) or the store failed (error), whatever its event runs do. Its specs stay as they were. See docs/operations.md, \"A registry keeps failing\"."
  }
}

resource "google_monitoring_alert_policy" "bootstrap_failed" {
  project               = var.project_id
  display_name          = "specsync (${var.name_prefix}): a bootstrap failed"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "bootstrap operation ended failed"
    condition_threshold {
      filter          = "${local.metric_filter["bootstrap_operations"]} AND metric.labels.result=\"failed\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A bootstrap operation ended failed: a registry failed, a registry never reported, or its commit never finished. See docs/operations.md, \"A bootstrap failed\"."
  }
}

resource "google_monitoring_alert_policy" "dead_letters" {
  project               = var.project_id
  display_name          = "specsync (${var.name_prefix}): messages were dead-lettered"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "messages in ${google_pubsub_subscription.reconcile_dead_letter.name}"
    condition_threshold {
      filter          = "resource.type=\"pubsub_subscription\" AND resource.labels.subscription_id=\"${google_pubsub_subscription.reconcile_dead_letter.name}\" AND metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_MAX"
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A reconcile message, commit request or Artifact Registry event failed ${var.reconcile_max_delivery_attempts} deliveries and waits in the dead-letter subscription. See docs/operations.md, \"Messages were dead-lettered\"."
  }
}

resource "google_monitoring_alert_policy" "catalog_too_large" {
  project               = var.project_id
  display_name          = "specsync (${var.name_prefix}): the catalog is too large to serve"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "a catalog render was over the response limit"
    condition_threshold {
      filter          = local.metric_filter["catalog_too_large"]
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A catalog render was over SPECSYNC_CATALOG_MAX_BYTES: clients that do not accept gzip (or, past the gzip limit too, every client) get 500 CatalogTooLarge; the catalog is never cut. See docs/operations.md, \"The catalog is too large\"."
  }
}

resource "google_monitoring_alert_policy" "no_successful_run" {
  project               = var.project_id
  display_name          = "specsync (${var.name_prefix}): a registry has not reconciled for twice its schedule"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "no successful full run of a registry for ${2 * var.bootstrap_interval_seconds}s"
    # Absence is per registry: a registry whose successful runs stop
    # (failing, or never run) fires; one that never succeeded since the
    # metric exists has no series to go missing (the failing alert has it).
    condition_absent {
      filter   = "${local.metric_filter["runs"]} AND metric.labels.kind=\"${local.full_kind}\" AND metric.labels.result=one_of(${join(", ", [for r in local.successful_results : "\"${r}\""])})"
      duration = "${2 * var.bootstrap_interval_seconds}s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.registry"]
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A registry has had no successful full run for twice the bootstrap schedule (${2 * var.bootstrap_interval_seconds}s): its runs fail, are not delivered, or the scheduler stopped. See docs/operations.md, \"A registry has not reconciled\"."
  }
}

# The freshness objective (docs/operations.md, "The freshness
# objective"): a service for the SLO to belong to, the SLO on the
# push_to_commit distribution, and an alert on its burn rate.
resource "google_monitoring_custom_service" "specsync" {
  project      = var.project_id
  service_id   = "${var.name_prefix}-catalog"
  display_name = "specsync catalog (${var.name_prefix})"

  depends_on = [google_project_service.enabled]
}

resource "google_monitoring_slo" "push_freshness" {
  project             = var.project_id
  service             = google_monitoring_custom_service.specsync.service_id
  slo_id              = "${var.name_prefix}-push-freshness"
  display_name        = "${var.freshness_objective_goal * 100}% of pushes in the catalog within ${var.freshness_objective_seconds} s (28 days)"
  goal                = var.freshness_objective_goal
  rolling_period_days = 28

  request_based_sli {
    distribution_cut {
      distribution_filter = local.metric_filter["push_to_commit"]
      range {
        min = 0
        max = local.freshness_ms
      }
    }
  }
}

resource "google_monitoring_alert_policy" "freshness_burn" {
  project               = var.project_id
  display_name          = "specsync (${var.name_prefix}): pushes reach the catalog too slowly"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "error budget burning ${local.fast_burn}x over an hour"
    condition_threshold {
      filter          = "select_slo_burn_rate(\"${google_monitoring_slo.push_freshness.name}\", \"3600s\")"
      comparison      = "COMPARISON_GT"
      threshold_value = local.fast_burn
      duration        = "0s"
    }
  }
  conditions {
    display_name = "error budget burning ${local.slow_burn}x over six hours"
    condition_threshold {
      filter          = "select_slo_burn_rate(\"${google_monitoring_slo.push_freshness.name}\", \"21600s\")"
      comparison      = "COMPARISON_GT"
      threshold_value = local.slow_burn
      duration        = "0s"
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Pushes take longer than ${var.freshness_objective_seconds} s to reach the catalog often enough to spend the freshness objective's 28-day error budget early. See docs/operations.md, \"Pushes reach the catalog too slowly\"."
  }
}
