-- metric: compute_comm_overlap
-- version: 1
-- unit: ratio
-- ccl_bench_unit: %
-- grain: rank
-- category: communication
-- family: overlap
-- see_also: communication_overlap_ratio, hta_comm_comp_overlap, scale_up_bw_utility
-- polarity: higher
-- leaderboard: communication
-- leaderboard_headline: yes
-- summary: mean
-- ccl_bench_trace_types: json, json_tpu, nsys
-- description: Share of communication time that runs under compute inside the inner steps, Σ_steps |U(comm) ∩ U(compute)| / Σ_steps |U(comm)| per rank, kernels clipped to each step, 0..1.
-- needs: steps (ProfilerStep#N, inference engine iterations or XLA steps), and communication kernels or XLA collective ops inside them
-- applies_if: table events | no GPU kernels and no XLA ops
-- params: none
-- columns:
--   steps_used    inner steps measured
--   comm_s        |U(comm)| within the inner steps, s
--   overlapped_s  the part of it that compute overlaps, s
--   source        gpu | xla: the device work measured
-- Definition: the rank's steps of step_marker_rules v2 (`steps_with(2)`), the
-- first and last dropped when there are more than two (as avg_step_time). In
-- each inner step window every GPU kernel is clipped to the window; comm = the
-- kernels kernel_class_rules v2 calls comm (NCCL/RCCL, DeepEP exchange, ...),
-- compute = every other kernel (memcpy/memset/sync activities are no kernels);
-- U = union over all streams. XLA ranks: the collective and compute XLA ops
-- (xla_ops op_kind comm / compute; other ops on neither side), one timeline per
-- device plane. value = Σ over windows (and planes) of the overlap over Σ of
-- |U(comm)|; `steps_used`, `comm_s`, `overlapped_s` are the sums. A rank
-- without steps is not applicable (communication_overlap_ratio covers the whole
-- trace), and so is one without communication in its inner steps.
-- Differs from communication_overlap_ratio: that metric is the whole trace,
-- every step and the time between them; this one is CCL-Bench's inner-step
-- window, so warm-up and the profiler's cut last step stay out.
-- Summary: the mean over ranks, as CCL-Bench.
-- Differs from CCL-Bench (tools/compute_comm_overlap): CCL-Bench reports
-- percent; its comm regex (`nccl|all[_-]?reduce|...|broadcast|collective`) calls
-- any kernel with one of those words in its name comm: CUTLASS 3 GEMMs, whose
-- names carry `cutlass::gemm::collective::CollectiveMma<...>`, count as
-- communication, and DeepEP's dispatch/combine do not; it reads timestamps as
-- float64 microseconds, samples at most
-- 16 rank files, and on XLA reads only the first JSON file and classifies every
-- X event by name, host Python frames included. Here one classification table,
-- exact integer nanoseconds, every rank, XLA ops per device plane.
WITH windows AS (  -- the inner steps (sql/views/steps.sql)
  SELECT * FROM inner_step_windows(2, metric_scope)
),
device_work AS (
  SELECT trace, rank, '' AS plane, ts_ns, end_ns, kernel_class = 'comm' AS is_comm, 'gpu' AS source
  FROM gpu_ops_classified_with(2)
  WHERE kind = 'kernel'
  UNION ALL
  SELECT trace, rank, pid || '/' || coalesce(device, -1) AS plane, ts_ns, end_ns, op_kind = 'comm' AS is_comm, 'xla'
  FROM xla_ops
  WHERE op_kind IN ('comm', 'compute')
),
clipped AS MATERIALIZED (
  -- one timeline per (step, device plane): `key`
  SELECT
    d.trace, d.rank, d.step || '/' || d.plane AS key,
    greatest(d.ts_ns, d.window_start) AS ts_ns,
    least(d.end_ns, d.window_end) AS end_ns,
    d.is_comm
  FROM intervals_in_windows(device_work, windows) AS d  -- sql/views/intervals.sql
),
comm AS (SELECT * FROM clipped WHERE is_comm),
compute AS (SELECT * FROM clipped WHERE NOT is_comm),
per_rank AS (
  SELECT trace, rank, a_ns AS comm_ns, overlap_ns FROM intervals_overlap_totals(comm, compute)
),
stepped AS (
  SELECT trace, rank, count(*) AS steps_used FROM windows GROUP BY ALL
),
sources AS (
  SELECT trace, rank, min(source) AS source FROM device_work GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.overlap_ns / nullif(p.comm_ns, 0) AS value,
  CASE
    WHEN d.rank IS NULL THEN 'no GPU kernels and no XLA ops'
    WHEN s.rank IS NULL THEN 'no steps (no ProfilerStep#N annotations, no inference engine iterations, no XLA steps)'
    WHEN coalesce(p.comm_ns, 0) = 0 THEN 'no communication in the inner steps'
  END AS reason,
  s.steps_used,
  p.comm_ns / 1e9 AS comm_s,
  p.overlap_ns / 1e9 AS overlapped_s,
  d.source
FROM metric_scope AS m
LEFT JOIN sources AS d USING (trace, rank)
LEFT JOIN stepped AS s USING (trace, rank)
LEFT JOIN per_rank AS p USING (trace, rank)
