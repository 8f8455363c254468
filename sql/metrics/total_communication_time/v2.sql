-- metric: total_communication_time
-- version: 2
-- unit: s
-- grain: rank
-- category: communication
-- polarity: lower
-- leaderboard: communication
-- summary: mean
-- description: Wall time with at least one communication kernel running, |U(comm kernels)| per rank over the whole trace, in seconds.
-- needs: GPU kernels
-- params: none
-- Definition: value = |U|, U = the union of the rank's comm kernel intervals over
-- all streams and the whole trace (comm = kernel_class_rules version 2,
-- kernel_class = 'comm'), so concurrent comm kernels count once. One quantity:
-- total seconds, never divided by steps; the per-step split is what
-- `break_down_steps` gives (its `comm_s`, summed kernel time per step).
-- A rank with kernels but no comm kernels scores 0, and so does one whose comm
-- kernels all have zero duration (they are comm, with 0 s; `comm_kernels` counts
-- them); a rank with no kernels is not applicable (XLA traces included:
-- `total_comm_time_s` is their communication time).
-- Differs from CCL-Bench: its JSON tool clips U to the inner ProfilerSteps and
-- divides by their number when the trace has steps (seconds per step), and uses
-- the whole trace otherwise, two quantities under one name; its nsys variant sums
-- durations without merging, over all devices; its TPU variant divides group
-- 21's total by the card's `iteration`; its comm regex is its own. Mean over
-- ranks in both.
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
FROM metric_scope AS m
LEFT JOIN kernels_seen AS k USING (trace, rank)
LEFT JOIN comm_busy AS c USING (trace, rank)
