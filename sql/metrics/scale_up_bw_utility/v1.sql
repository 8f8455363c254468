-- metric: scale_up_bw_utility
-- version: 1
-- unit: ratio
-- ccl_bench_unit: %
-- grain: rank
-- category: communication
-- family: overlap
-- see_also: compute_comm_overlap
-- polarity: neutral
-- leaderboard: what_if
-- leaderboard_headline: yes
-- summary: mean
-- ccl_bench_trace_types: json
-- description: Estimated share of step time saved by doubling the scale-up (intra-node) link bandwidth: half the scale-up communication time no compute hides, over the step time, per rank, 0..1.
-- needs: steps (ProfilerStep#N or inference engine iterations), GPU communication kernels whose group placement is known (Process Group Ranks, or the card's count_per_node / total_count)
-- applies_if: table events | no GPU kernels
-- params: none
-- columns:
--   steps_used          inner steps measured
--   exposed_scale_up_s  scale-up comm time compute does not hide, s
--   scale_up_comm_s     |U(scale-up comm)| in the inner steps, s
--   steps_s             the inner steps' summed duration, s
--   unplaced_comm_s     comm kernel time whose link is unknown (left out), s
-- Definition: over the rank's inner steps (`steps_with(2)`, the first and last
-- dropped when there are more than two): scale-up comm = the communication
-- kernels (kernel_class_rules v2) whose collective runs within one node
-- (`collective_links_with(2)`, sql/views/hardware.sql: the group's ranks on one
-- node); compute = every other kernel; both clipped to each step window.
-- exposed = |U(scale-up comm) - U(compute)| per window, the scale-up time on the
-- step's critical path. If that time is all bandwidth time, doubling the link
-- bandwidth halves it, so value = Σ exposed / 2 / Σ step durations. A rank
-- whose inner steps hold no communication scores 0 (doubling the link saves
-- nothing); details: exposed_scale_up_s, scale_up_comm_s, steps_s, and
-- unplaced_comm_s, the comm kernel time whose placement is unknown (left out).
-- What is left out (CCL-Bench runs the Astra-sim network simulator for this):
-- the latency part of each collective, which does not shrink with bandwidth (so
-- small messages gain less than half); the time a kernel waits for late peers,
-- which no bandwidth removes; hidden communication that a faster link could let
-- the scheduler move (only the exposed part shortens the step here); congestion
-- and algorithm changes on the new link; scale-out traffic; and compute. So it
-- is an upper bound for bandwidth-bound, skew-free collectives, and a first
-- estimate, not a simulation.
-- Summary: the mean over ranks.
-- Differs from CCL-Bench (scale_up_bw_utility, what-if category): CCL-Bench
-- reports percent from an Astra-sim comm-only simulation of the trace with the
-- scale-up bandwidth doubled; this is the analytic part computable from the
-- trace and the card alone. The polarity is neutral: sensitivity to the link is
-- neither good nor bad (CCL-Bench marks higher as better).
WITH windows AS (  -- the inner steps (sql/views/steps.sql)
  SELECT * FROM inner_step_windows(2, metric_scope)
),
kernels AS (
  SELECT
    o.trace, o.rank, o.ts_ns, o.end_ns,
    CASE WHEN o.kernel_class <> 'comm' THEN 'compute' ELSE coalesce(l.link, 'unplaced') END AS part,
    l.placement_reason
  FROM gpu_ops_classified_with(2) AS o
  LEFT JOIN collective_links_with(2) AS l USING (trace, rank, file_id, event_idx)
  WHERE o.kind = 'kernel'
),
clipped AS MATERIALIZED (
  SELECT
    k.trace, k.rank, k.step AS key, k.part, k.placement_reason,
    greatest(k.ts_ns, k.window_start) AS ts_ns,
    least(k.end_ns, k.window_end) AS end_ns
  FROM intervals_in_windows(kernels, windows) AS k  -- sql/views/intervals.sql
),
scale_up AS (SELECT * FROM clipped WHERE part = 'scale_up'),
compute AS (SELECT * FROM clipped WHERE part = 'compute'),
exposed AS (
  SELECT trace, rank, a_ns AS scale_up_ns, exposed_ns FROM intervals_overlap_totals(scale_up, compute)
),
comm_parts AS (
  SELECT
    trace, rank,
    sum(end_ns - ts_ns) FILTER (WHERE part IN ('scale_up', 'scale_out')) AS placed_ns,
    coalesce(sum(end_ns - ts_ns) FILTER (WHERE part = 'unplaced'), 0) AS unplaced_ns,
    min(placement_reason) AS placement_reason
  FROM clipped
  GROUP BY ALL
),
stepped AS (
  SELECT trace, rank, count(*) AS steps_used, sum(window_end - window_start) AS steps_ns
  FROM windows
  GROUP BY ALL
),
gpu_ranks AS (
  SELECT DISTINCT trace, rank FROM gpu_ops WHERE kind = 'kernel'
)
SELECT
  m.trace,
  m.rank,
  CASE
    WHEN g.rank IS NULL OR s.rank IS NULL OR s.steps_ns = 0 THEN NULL
    WHEN coalesce(c.placed_ns, 0) = 0 AND coalesce(c.unplaced_ns, 0) > 0 THEN NULL
    ELSE coalesce(e.exposed_ns, 0) / 2 / s.steps_ns
  END AS value,
  CASE
    WHEN g.rank IS NULL THEN 'no GPU kernels'
    WHEN s.rank IS NULL THEN 'no steps (no ProfilerStep#N annotations, no inference engine iterations)'
    WHEN s.steps_ns = 0 THEN 'steps have zero duration'
    WHEN coalesce(c.placed_ns, 0) = 0 AND coalesce(c.unplaced_ns, 0) > 0
      THEN 'group placement unknown: ' || c.placement_reason
  END AS reason,
  s.steps_used,
  coalesce(e.exposed_ns, 0) / 1e9 AS exposed_scale_up_s,
  coalesce(e.scale_up_ns, 0) / 1e9 AS scale_up_comm_s,
  s.steps_ns / 1e9 AS steps_s,
  coalesce(c.unplaced_ns, 0) / 1e9 AS unplaced_comm_s
FROM metric_scope AS m
LEFT JOIN gpu_ranks AS g USING (trace, rank)
LEFT JOIN stepped AS s USING (trace, rank)
LEFT JOIN exposed AS e USING (trace, rank)
LEFT JOIN comm_parts AS c USING (trace, rank)
