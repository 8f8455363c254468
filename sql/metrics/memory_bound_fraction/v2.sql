-- metric: memory_bound_fraction
-- version: 2
-- unit: ratio
-- grain: rank
-- category: memory
-- polarity: neutral
-- leaderboard: gpu_efficiency
-- summary: ratio memory_bound_s / kernel_s
-- description: Share of GPU kernel time in memory-bound kernel families (elementwise, normalization, softmax, reduction, memory transfer) per rank, 0..1.
-- needs: GPU kernels
-- params: none
-- Definition: every kernel gets one family by the 'boundness' rules of
-- kernel_family_rules v2 (sql/views/kernel_families.sql), first match in the
-- order communication (the shared classification), memory_transfer, gemm,
-- softmax, normalization, elementwise, reduction, else other. value =
-- Σdur(memory_transfer + softmax + normalization + elementwise + reduction) /
-- Σdur(all kernels), durations summed, not merged, whole trace. Memcpy/memset
-- activities are not kernels and are not counted (memory_transfer_overhead
-- covers them); copy kernels (e.g. direct_copy_kernel_cuda) are memory_transfer.
-- The per-family seconds are detail columns.
-- Differs from CCL-Bench: CCL-Bench reports percent over all sampled rank files
-- together, and its nsys variant is a different metric altogether (kernels with
-- grid/SM coverage < 50%). Here it is 0..1 per rank, names only, the same for
-- every trace format.
-- Summary: Σ memory_bound_s / Σ kernel_s over the ranks: every rank's kernels
-- pooled, as CCL-Bench's JSON tool pools the kernels of all its rank files.
-- Differs from version 1: its summary was the unweighted mean of the per-rank
-- values; families v2 pair with kernel_class_rules v2 (DeepEP's kernels move
-- between `communication` and `other`, neither memory-bound, so the values do
-- not change, only `communication_s`).
WITH families AS (
  SELECT name, boundness, memory_bound FROM kernel_name_families(2)
),
per_rank AS (
  SELECT
    o.trace,
    o.rank,
    count(*) AS kernels,
    sum(o.dur_ns) AS kernel_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.memory_bound), 0) AS memory_bound_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'elementwise'), 0) AS elementwise_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'normalization'), 0) AS normalization_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'softmax'), 0) AS softmax_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'reduction'), 0) AS reduction_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'memory_transfer'), 0) AS memory_transfer_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'gemm'), 0) AS gemm_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.boundness = 'communication'), 0) AS communication_ns
  FROM gpu_ops AS o
  JOIN families AS f USING (name)
  WHERE o.kind = 'kernel'
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.memory_bound_ns / nullif(p.kernel_ns, 0) AS value,
  CASE
    WHEN p.kernels IS NULL THEN 'no GPU kernels'
    WHEN p.kernel_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  p.memory_bound_ns / 1e9 AS memory_bound_s,
  p.kernel_ns / 1e9 AS kernel_s,
  p.elementwise_ns / 1e9 AS elementwise_s,
  p.normalization_ns / 1e9 AS normalization_s,
  p.softmax_ns / 1e9 AS softmax_s,
  p.reduction_ns / 1e9 AS reduction_s,
  p.memory_transfer_ns / 1e9 AS memory_transfer_s,
  p.gemm_ns / 1e9 AS gemm_s,
  p.communication_ns / 1e9 AS communication_s
FROM metric_scope AS m
LEFT JOIN per_rank AS p USING (trace, rank)
