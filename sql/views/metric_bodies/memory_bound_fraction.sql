-- The rows of the metric memory_bound_fraction
-- (sql/metrics/memory_bound_fraction/v*.sql, whose headers document them), ONE body
-- for all its versions: its versions differ only in the kernel_family_rules version
-- (`rules_version`, sql/views/kernel_families.sql) and in the summary (a header line).
-- `scope` is the (trace, rank) relation to measure (the metric passes `metric_scope`).
-- A released version's rows never change: this body is frozen with the metric files
-- (sql/metrics/CHECKSUMS).
-- requires: kernel_families, gpu
CREATE OR REPLACE MACRO memory_bound_fraction_rows(rules_version, scope) AS TABLE
WITH families AS (
  SELECT name, boundness, memory_bound FROM kernel_name_families(rules_version)
),
per_rank AS (
  SELECT
    o.trace,
    o.rank,
    count(*) AS kernels,
    sum(o.dur_ns) AS kernel_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.memory_bound), 0) AS memory_bound_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'elementwise'), 0) AS elementwise_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'normalization'), 0) AS normalization_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'softmax'), 0) AS softmax_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'reduction'), 0) AS reduction_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'memory_transfer'), 0) AS memory_transfer_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'gemm'), 0) AS gemm_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'communication'), 0) AS communication_ns
  FROM gpu_ops AS o
  JOIN families AS f USING (name)
  WHERE o.kind = 'kernel'
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.memory_bound_ns / nullif(p.kernel_ns, 0) AS value,
  CASE
    WHEN p.kernels IS NULL THEN 'no GPU kernels'
    WHEN p.kernel_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  p.memory_bound_ns / 1e9 AS memory_bound_s,
  p.kernel_ns / 1e9 AS kernel_s,
  p.elementwise_ns / 1e9 AS elementwise_s,
  p.normalization_ns / 1e9 AS normalization_s,
  p.softmax_ns / 1e9 AS softmax_s,
  p.reduction_ns / 1e9 AS reduction_s,
  p.memory_transfer_ns / 1e9 AS memory_transfer_s,
  p.gemm_ns / 1e9 AS gemm_s,
  p.communication_ns / 1e9 AS communication_s
FROM query_table(scope) AS m
LEFT JOIN per_rank AS p USING (trace, rank);
