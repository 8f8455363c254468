-- The rows of the metric communication_ratio (sql/metrics/communication_ratio/v*.sql,
-- whose headers document them), ONE body for all its versions: its versions differ
-- only in the kernel_class_rules version (`rules_version`,
-- sql/views/kernel_classes.sql) that calls a kernel comm. `scope` is the (trace, rank)
-- relation to measure (the metric passes `metric_scope`). A released version's rows
-- never change: this body is frozen with the metric files (sql/metrics/CHECKSUMS).
-- requires: kernel_classes
CREATE OR REPLACE MACRO communication_ratio_rows(rules_version, scope) AS TABLE
WITH scoped_kernels AS (
  SELECT o.trace, o.rank, o.kernel_class, o.dur_ns
  FROM gpu_ops_classified_with(rules_version) AS o
  JOIN query_table(scope) AS m USING (trace, rank)
  WHERE o.kind = 'kernel'
),
per_trace AS (
  SELECT
    trace,
    count(*) AS kernels,
    count(DISTINCT rank) AS ranks_with_kernels,
    sum(dur_ns) AS kernel_ns,
    coalesce(sum(dur_ns) FILTER (WHERE kernel_class = 'comm'), 0) AS comm_ns
  FROM scoped_kernels
  GROUP BY trace
)
SELECT
  t.trace,
  p.comm_ns / nullif(p.kernel_ns, 0) AS value,
  CASE
    WHEN p.kernels IS NULL THEN 'no GPU kernels'
    WHEN p.kernel_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  p.comm_ns / 1e9 AS comm_s,
  p.kernel_ns / 1e9 AS kernel_s,
  p.ranks_with_kernels
FROM (SELECT DISTINCT trace FROM query_table(scope)) AS t
LEFT JOIN per_trace AS p USING (trace);
