-- The rows of the metric memory_transfer_overhead (sql/metrics/memory_transfer_overhead/v*.sql, whose headers document
-- them), ONE body for its versions: they differ only in the kernel_class_rules version
-- (`rules_version`) that says which kernels are compute (not comm): version 1 counted
-- DeepEP's get_dispatch_layout as comm and its cached_notify as compute, version 2
-- the other way round. `scope` is the (trace, rank) relation to measure (the metric
-- passes `metric_scope`). A released version's rows never change: this body is frozen
-- with the metric files (sql/metrics/CHECKSUMS).
-- requires: kernel_classes, gpu, intervals
CREATE OR REPLACE MACRO memory_transfer_overhead_rows(rules_version, scope) AS TABLE
WITH memcpys AS (
  SELECT trace, rank, 0 AS key, ts_ns, end_ns FROM gpu_ops_classified_with(rules_version) WHERE kind = 'memcpy'
),
compute AS (
  SELECT trace, rank, 0 AS key, ts_ns, end_ns
  FROM gpu_ops_classified_with(rules_version)
  WHERE kind = 'kernel' AND kernel_class <> 'comm'
),
exposed AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS exposed_ns
  FROM intervals_subtract(memcpys, compute)
  GROUP BY ALL
),
copy_busy AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS memcpy_ns
  FROM intervals_union(memcpys)
  GROUP BY ALL
),
span AS (
  SELECT
    trace,
    rank,
    count(*) FILTER (WHERE kind = 'memcpy') AS memcpys,
    count(*) FILTER (WHERE kind = 'kernel') AS kernels,
    min(ts_ns) AS first_ns,
    max(end_ns) AS last_ns
  FROM gpu_ops
  WHERE kind IN ('kernel', 'memcpy')
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  coalesce(e.exposed_ns, 0) / nullif(s.last_ns - s.first_ns, 0) AS value,
  CASE
    WHEN s.trace IS NULL THEN 'no GPU kernels or memcpy activities'
    WHEN s.last_ns = s.first_ns THEN 'GPU span is zero'
  END AS reason,
  coalesce(e.exposed_ns, 0) / 1e9 AS exposed_memcpy_s,
  coalesce(c.memcpy_ns, 0) / 1e9 AS memcpy_s,
  (s.last_ns - s.first_ns) / 1e9 AS span_s,
  s.memcpys
FROM query_table(scope) AS m
LEFT JOIN span AS s USING (trace, rank)
LEFT JOIN exposed AS e USING (trace, rank)
LEFT JOIN copy_busy AS c USING (trace, rank);
