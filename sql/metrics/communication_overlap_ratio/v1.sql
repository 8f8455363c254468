-- metric: communication_overlap_ratio
-- version: 1
-- unit: ratio
-- grain: rank
-- summary: mean
-- description: Share of communication time hidden under compute: |U(comm) ∩ U(non-comm kernels)| / |U(comm)| per rank, 0..1.
-- needs: GPU kernels, communication kernels on the rank
-- Definition: U = union of intervals over all streams of the rank. comm = kernels
-- the classification table (sql/views/kernel_classes.sql) calls `comm`; non-comm
-- kernels = every other GPU kernel (memcpy/memset activities are not kernels and
-- count on neither side). The whole trace is used, not a step window. A rank with
-- communication and no compute scores 0; a rank without communication is not
-- applicable (CCL-Bench's 0 there would read as "nothing overlapped").
WITH comm AS (
  SELECT trace, rank, 0 AS key, ts_ns, end_ns
  FROM gpu_ops_classified WHERE kind = 'kernel' AND kernel_class = 'comm'
),
compute AS (
  SELECT trace, rank, 0 AS key, ts_ns, end_ns
  FROM gpu_ops_classified WHERE kind = 'kernel' AND kernel_class <> 'comm'
),
comm_time AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS comm_ns FROM intervals_union(comm) GROUP BY ALL
),
overlap AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS overlap_ns FROM intervals_intersect(comm, compute) GROUP BY ALL
),
kernels_seen AS (
  SELECT trace, rank, count(*) AS kernels FROM gpu_ops_classified WHERE kind = 'kernel' GROUP BY ALL
)
SELECT
  s.trace,
  s.rank,
  CASE WHEN c.comm_ns > 0 THEN coalesce(o.overlap_ns, 0) / c.comm_ns END AS value,
  CASE
    WHEN k.kernels IS NULL THEN 'no GPU kernels'
    WHEN c.comm_ns IS NULL THEN 'no communication kernels'
  END AS reason,
  c.comm_ns / 1e9 AS comm_s,
  coalesce(o.overlap_ns, 0) / 1e9 AS overlapped_s
FROM metric_scope AS s
LEFT JOIN comm_time AS c USING (trace, rank)
LEFT JOIN overlap AS o USING (trace, rank)
LEFT JOIN kernels_seen AS k USING (trace, rank)
