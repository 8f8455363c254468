-- The rows of the metric total_communication_time
-- (sql/metrics/total_communication_time/v*.sql, whose headers document them), ONE body
-- for all its versions: its versions differ only in the kernel_class_rules version
-- (`rules_version`, sql/views/kernel_classes.sql) that calls a kernel comm. `scope` is
-- the (trace, rank) relation to measure (the metric passes `metric_scope`). A released
-- version's rows never change: this body is frozen with the metric files
-- (sql/metrics/CHECKSUMS).
-- requires: kernel_classes, intervals
CREATE OR REPLACE MACRO total_communication_time_rows(rules_version, scope) AS TABLE
WITH kernels_used AS MATERIALIZED (
  SELECT trace, rank, 0 AS key, ts_ns, end_ns, kernel_class = 'comm' AS is_comm
  FROM gpu_ops_classified_with(rules_version)
  WHERE kind = 'kernel'
),
comm AS (
  SELECT * FROM kernels_used WHERE is_comm
),
comm_busy AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS comm_ns
  FROM intervals_union(comm)
  GROUP BY ALL
),
kernels_seen AS (
  SELECT trace, rank, count(*) AS kernels, count(*) FILTER (WHERE is_comm) AS comm_kernels
  FROM kernels_used
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  CASE WHEN k.kernels IS NOT NULL THEN coalesce(c.comm_ns, 0) / 1e9 END AS value,
  CASE WHEN k.kernels IS NULL THEN 'no GPU kernels' END AS reason,
  k.comm_kernels
FROM query_table(scope) AS m
LEFT JOIN kernels_seen AS k USING (trace, rank)
LEFT JOIN comm_busy AS c USING (trace, rank);
