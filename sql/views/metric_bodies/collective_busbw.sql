-- The rows of the metric collective_busbw (sql/metrics/collective_busbw/v*.sql, whose headers document
-- them), ONE body for its versions: they differ only in the kernel_class_rules version
-- (`rules_version`) of the collectives they read (version 1: what the plain views were
-- when v1 was released; version 2: DeepEP's kernels are collectives too). `scope` is
-- the (trace, rank) relation to measure (the metric passes `metric_scope`). A released
-- version's rows never change: this body is frozen with the metric files
-- (sql/metrics/CHECKSUMS).
-- requires: collectives
CREATE OR REPLACE MACRO collective_busbw_rows(rules_version, scope) AS TABLE
WITH sized AS (
  SELECT
    c.trace,
    c.coll_type,
    c.rank,
    c.bytes,
    c.algbw_gbps,
    c.busbw_gbps,
    -- 2^floor(log2(bytes)); the two corrections guard log2's rounding at 2^k +- 1
    CASE WHEN c.bytes > 0 THEN CAST(2 ** floor(log2(c.bytes)) AS BIGINT) ELSE 0 END AS approx_bucket
  FROM collectives_with(rules_version) AS c
  JOIN query_table(scope) AS s USING (trace, rank)
  WHERE c.busbw_gbps IS NOT NULL
),
bucketed AS (
  SELECT
    *,
    CASE
      WHEN approx_bucket > bytes THEN approx_bucket // 2
      WHEN approx_bucket > 0 AND approx_bucket * 2 <= bytes THEN approx_bucket * 2
      ELSE approx_bucket
    END AS size_bucket
  FROM sized
),
buckets AS (
  SELECT
    trace,
    coll_type,
    size_bucket,
    median(busbw_gbps) AS median_busbw_gbps,
    count(*) AS collectives,
    count(DISTINCT rank) AS ranks,
    min(bytes) AS min_bytes,
    max(bytes) AS max_bytes,
    avg(busbw_gbps) AS mean_busbw_gbps,
    median(algbw_gbps) AS median_algbw_gbps
  FROM bucketed
  GROUP BY ALL
),
comm_seen AS (
  SELECT c.trace, count(*) AS comm_kernels, count(c.coll_type) AS typed, count(c.bytes) AS sized
  FROM collectives_with(rules_version) AS c
  JOIN query_table(scope) AS s USING (trace, rank)
  GROUP BY c.trace
)
SELECT
  t.trace,
  b.median_busbw_gbps AS value,
  CASE
    WHEN b.trace IS NOT NULL THEN NULL
    WHEN k.comm_kernels IS NULL THEN 'no communication kernels'
    WHEN k.typed = 0 THEN 'no communication kernel has a known collective type'
    WHEN k.sized = 0 THEN 'no collective has a known message size (no collective args on kernels, no record_shapes)'
    ELSE 'no collective has a known group size and a non-zero duration'
  END AS reason,
  b.coll_type,
  b.size_bucket,
  CASE WHEN b.size_bucket IS NOT NULL THEN format_bytes(b.size_bucket) || ' .. ' || format_bytes(2 * b.size_bucket) END AS size_range,
  b.collectives,
  b.ranks,
  b.min_bytes,
  b.max_bytes,
  b.mean_busbw_gbps,
  b.median_algbw_gbps
FROM (SELECT DISTINCT trace FROM query_table(scope)) AS t
LEFT JOIN buckets AS b USING (trace)
LEFT JOIN comm_seen AS k USING (trace);
