-- The rows of the metric average_memory_bandwidth
-- (sql/metrics/average_memory_bandwidth/v*.sql, whose headers document them), ONE body
-- for all its versions: version 1 is these rows without `memcpy_gb`, version 2 all of
-- them (the versions differ in the summary, a header line). `scope` is the (trace,
-- rank) relation to measure (the metric passes `metric_scope`). A released version's
-- rows never change: this body is frozen with the metric files
-- (sql/metrics/CHECKSUMS).
-- requires: gpu
CREATE OR REPLACE MACRO average_memory_bandwidth_rows(scope) AS TABLE
WITH per_rank AS (
  SELECT trace, rank, count(*) AS memcpys, sum(bytes) AS total_bytes, sum(dur_ns) AS memcpy_ns
  FROM gpu_ops
  WHERE kind = 'memcpy' AND bytes > 0 AND dur_ns > 0
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.total_bytes / p.memcpy_ns AS value,
  CASE WHEN p.memcpys IS NULL THEN 'no memcpy with bytes and duration' END AS reason,
  p.memcpys,
  p.total_bytes AS bytes,
  p.memcpy_ns / 1e9 AS memcpy_s,
  p.total_bytes / 1e9 AS memcpy_gb
FROM query_table(scope) AS m
LEFT JOIN per_rank AS p USING (trace, rank);
