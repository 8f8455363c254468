-- The rows of the metric moe_fraction (sql/metrics/moe_fraction/v*.sql, whose headers
-- document them), ONE body for all its versions: its versions differ only in the
-- kernel_family_rules version (`rules_version`, sql/views/kernel_families.sql).
-- `scope` is the (trace, rank) relation to measure (the metric passes `metric_scope`).
-- A released version's rows never change: this body is frozen with the metric files
-- (sql/metrics/CHECKSUMS).
-- requires: kernel_families, gpu
CREATE OR REPLACE MACRO moe_fraction_rows(rules_version, scope) AS TABLE
WITH families AS (
  SELECT name, is_moe FROM kernel_name_families(rules_version)
),
per_trace AS (
  SELECT
    o.trace,
    count(*) AS kernels,
    sum(o.dur_ns) AS kernel_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.is_moe), 0) AS moe_ns,
    count(DISTINCT o.name) FILTER (WHERE f.is_moe) AS moe_kernel_names
  FROM gpu_ops AS o
  JOIN query_table(scope) AS m USING (trace, rank)
  JOIN families AS f USING (name)
  WHERE o.kind = 'kernel'
  GROUP BY o.trace
)
SELECT
  t.trace,
  p.moe_ns / nullif(p.kernel_ns, 0) AS value,
  CASE
    WHEN p.kernels IS NULL THEN 'no GPU kernels'
    WHEN p.kernel_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  p.moe_ns / 1e9 AS moe_s,
  p.kernel_ns / 1e9 AS kernel_s,
  p.moe_kernel_names
FROM (SELECT DISTINCT trace FROM query_table(scope)) AS t
LEFT JOIN per_trace AS p USING (trace);
