-- metric: communication_overlap_ratio
-- version: 2
-- unit: ratio
-- grain: rank
-- category: communication
-- polarity: higher
-- summary: mean
-- description: Share of communication time hidden under compute: |U(comm) ∩ U(non-comm kernels)| / |U(comm)| per rank, 0..1.
-- needs: GPU kernels, communication kernels on the rank
-- Definition: U = union of intervals over all streams of the rank. comm = kernels
-- the classification table (sql/views/kernel_classes.sql, kernel_class_rules
-- version 2) calls `comm`; non-comm kernels = every other GPU kernel
-- (memcpy/memset/sync activities are not kernels and count on neither side).
-- The whole trace is used, not a step window. A rank with
-- communication and no compute scores 0; a rank without communication is not
-- applicable (CCL-Bench's 0 there would read as "nothing overlapped"), and so is
-- a rank whose comm kernels all have zero duration (0/0: reason "communication
-- kernels have zero duration"; `comm_kernels` counts them).
-- Differs from version 1: kernel_class_rules version 2 (sql/views/kernel_classes.sql):
-- DeepEP's dispatch/combine/notify/cached-notify/barrier kernels (deep_ep::,
-- dpsk::ep::) are communication, its get_dispatch_layout is compute; version 1
-- called get_dispatch_layout comm and left cached_notify, barrier and the
-- dpsk::ep::cuda:: names compute.
WITH kernels_used AS MATERIALIZED (
  SELECT trace, rank, 0 AS key, ts_ns, end_ns, kernel_class = 'comm' AS is_comm
  FROM gpu_ops_classified_with(2)
  WHERE kind = 'kernel'
),
comm AS (SELECT * FROM kernels_used WHERE is_comm),
compute AS (SELECT * FROM kernels_used WHERE NOT is_comm),
-- one sweep gives both |U(comm)| (pieces in comm) and the overlap (pieces in both)
per_rank AS (
  SELECT
    trace,
    rank,
    sum(end_ns - ts_ns) FILTER (WHERE in_a) AS comm_ns,
    coalesce(sum(end_ns - ts_ns) FILTER (WHERE in_a AND in_b), 0) AS overlap_ns
  FROM intervals_overlay(comm, compute)
  GROUP BY ALL
),
kernels_seen AS (
  SELECT trace, rank, count(*) FILTER (WHERE is_comm) AS comm_kernels
  FROM kernels_used
  GROUP BY ALL
)
SELECT
  s.trace,
  s.rank,
  p.overlap_ns / p.comm_ns AS value,
  CASE
    WHEN k.rank IS NULL THEN 'no GPU kernels'
    WHEN k.comm_kernels = 0 THEN 'no communication kernels'
    WHEN p.comm_ns IS NULL THEN 'communication kernels have zero duration'
  END AS reason,
  k.comm_kernels,
  p.comm_ns / 1e9 AS comm_s,
  p.overlap_ns / 1e9 AS overlapped_s
FROM metric_scope AS s
LEFT JOIN per_rank AS p USING (trace, rank)
LEFT JOIN kernels_seen AS k USING (trace, rank)
