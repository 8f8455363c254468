-- metric: communication_ratio
-- version: 2
-- unit: ratio
-- grain: trace
-- category: communication
-- polarity: lower
-- summary: value
-- description: Share of GPU kernel time spent in communication kernels, Σdur(comm kernels) / Σdur(all kernels) over all ranks, 0..1.
-- needs: GPU kernels
-- params: none
-- Definition: durations are summed, not merged (two concurrent kernels both count),
-- over every rank of the trace and the whole trace (no step window). comm = kernels
-- the shared classification calls `comm` (sql/views/kernel_classes.sql,
-- kernel_class_rules version 2).
-- Memcpy/memset activities are not kernels and count on neither side. A trace with
-- kernels but no communication scores 0.
-- Differs from CCL-Bench: CCL-Bench reports percent (0..100), uses its own comm
-- regex, and reads at most 16 sampled rank files; here it is 0..1 over every rank.
-- Differs from version 1: kernel_class_rules version 2 (sql/views/kernel_classes.sql):
-- DeepEP's dispatch/combine/notify/cached-notify/barrier kernels (deep_ep::,
-- dpsk::ep::) are communication, its get_dispatch_layout is compute; version 1
-- called get_dispatch_layout comm and left cached_notify, barrier and the
-- dpsk::ep::cuda:: names compute.
WITH scoped_kernels AS (
  SELECT o.trace, o.rank, o.kernel_class, o.dur_ns
  FROM gpu_ops_classified_with(2) AS o
  JOIN metric_scope AS m USING (trace, rank)
  WHERE o.kind = 'kernel'
),
per_trace AS (
  SELECT
    trace,
    count(*) AS kernels,
    count(DISTINCT rank) AS ranks_with_kernels,
    sum(dur_ns) AS kernel_ns,
    coalesce(sum(dur_ns) FILTER (WHERE kernel_class = 'comm'), 0) AS comm_ns
  FROM scoped_kernels
  GROUP BY trace
)
SELECT
  t.trace,
  p.comm_ns / nullif(p.kernel_ns, 0) AS value,
  CASE
    WHEN p.kernels IS NULL THEN 'no GPU kernels'
    WHEN p.kernel_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  p.comm_ns / 1e9 AS comm_s,
  p.kernel_ns / 1e9 AS kernel_s,
  p.ranks_with_kernels
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN per_trace AS p USING (trace)
