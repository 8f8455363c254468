-- metric: kernel_compute_time_group_6
-- version: 1
-- unit: s
-- grain: trace
-- category: compute
-- family: time
-- see_also: total_kernel_time, total_compute_time_s
-- polarity: neutral
-- summary: value
-- description: Total GPU kernel time outside communication, Σdur(kernels the shared classification does not call comm) over every rank and the whole trace, in seconds.
-- needs: GPU kernels
-- params: none
-- columns:
--   kernels        the compute kernels counted
--   comm_kernel_s  the communication kernel time left out, seconds
--   ranks          the ranks with kernels
-- Definition: durations are summed, not merged (two concurrent kernels both
-- count), over every rank of the trace and the whole trace. Kernels only:
-- memcpy and memset activities count on neither side. comm = kernel_class_rules
-- v2 (sql/views/kernel_classes.sql: NCCL/RCCL, cross_device_reduce, DeepEP's
-- exchange kernels, ...).
-- Differs from CCL-Bench (tools/kernel_compute_time_group_6): CCL-Bench reads
-- only nsys_0.sqlite (plus nsys_1.sqlite for qwen-32b with pp = 2), answers
-- "n/a" for any model family other than deepseek-v2-lite, llama-3.1-8B and
-- qwen-32b, and calls communication any kernel whose name contains `nccl` or
-- `cross_device_reduce`. Here every trace format with GPU kernels (Kineto,
-- Nsight Systems), every rank file, any model, and the shared classification
-- (which also counts DeepEP/MoE exchange kernels as communication).
WITH per_trace AS (
  SELECT
    o.trace,
    count(*) FILTER (WHERE o.kernel_class <> 'comm') AS kernels,
    coalesce(sum(o.dur_ns) FILTER (WHERE o.kernel_class <> 'comm'), 0) AS compute_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE o.kernel_class = 'comm'), 0) AS comm_ns,
    count(DISTINCT o.rank) AS ranks
  FROM gpu_ops_classified_with(2) AS o
  SEMI JOIN metric_scope USING (trace, rank)
  WHERE o.kind = 'kernel'
  GROUP BY o.trace
)
SELECT
  t.trace,
  p.compute_ns / 1e9 AS value,
  CASE WHEN p.trace IS NULL THEN 'no GPU kernels' END AS reason,
  p.kernels,
  p.comm_ns / 1e9 AS comm_kernel_s,
  p.ranks
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN per_trace AS p USING (trace)
