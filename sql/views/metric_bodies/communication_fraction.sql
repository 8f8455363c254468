-- The rows of the metric communication_fraction
-- (sql/metrics/communication_fraction/v*.sql, whose headers document them), ONE body
-- for all its versions: its versions differ only in the kernel_class_rules version
-- (`rules_version`, sql/views/kernel_classes.sql) that calls a kernel comm. `scope` is
-- the (trace, rank) relation to measure (the metric passes `metric_scope`). A released
-- version's rows never change: this body is frozen with the metric files
-- (sql/metrics/CHECKSUMS).
-- requires: kernel_classes, xla
CREATE OR REPLACE MACRO communication_fraction_rows(rules_version, scope) AS TABLE
WITH gpu AS (
  SELECT
    trace,
    rank,
    sum(dur_ns) FILTER (WHERE kernel_class = 'comm') AS comm_ns,
    sum(dur_ns) AS all_ns,
    count(*) AS kernels
  FROM gpu_ops_classified_with(rules_version)
  WHERE kind = 'kernel'
  GROUP BY trace, rank
),
xla AS (
  SELECT
    trace,
    rank,
    avg(comm_ps / all_ps) AS mean_fraction,
    sum(comm_ps) AS comm_ps,
    sum(all_ps) AS all_ps,
    count(*) AS devices,
    string_agg(DISTINCT op_source, ',') AS op_source
  FROM xla_device_totals
  WHERE all_ps > 0
  GROUP BY trace, rank
)
SELECT
  s.trace,
  s.rank,
  CASE
    WHEN g.kernels IS NOT NULL THEN coalesce(g.comm_ns, 0) / g.all_ns
    ELSE x.mean_fraction
  END AS value,
  CASE
    WHEN g.kernels IS NULL AND x.devices IS NULL THEN 'no GPU kernels and no XLA ops'
    WHEN g.kernels IS NOT NULL AND coalesce(g.all_ns, 0) = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  CASE WHEN g.kernels IS NOT NULL THEN 'gpu_kernels' WHEN x.devices IS NOT NULL THEN 'xla_ops' END AS source,
  CASE WHEN g.kernels IS NULL THEN x.op_source END AS xla_op_source,
  CASE WHEN g.kernels IS NOT NULL THEN coalesce(g.comm_ns, 0) / 1e9 ELSE x.comm_ps / 1e12 END AS comm_s,
  CASE WHEN g.kernels IS NOT NULL THEN g.all_ns / 1e9 ELSE x.all_ps / 1e12 END AS op_time_s,
  x.devices AS xla_devices
FROM query_table(scope) AS s
LEFT JOIN gpu AS g USING (trace, rank)
LEFT JOIN xla AS x USING (trace, rank);
