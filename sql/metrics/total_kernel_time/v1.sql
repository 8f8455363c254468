-- metric: total_kernel_time
-- version: 1
-- unit: s
-- grain: rank
-- category: compute
-- family: time
-- see_also: kernel_compute_time_group_6, total_compute_time_s, break_down_steps, hta_kernel_type_breakdown
-- polarity: neutral
-- leaderboard: gpu_efficiency
-- summary: sum
-- description: Sum of GPU kernel durations per rank, in seconds (not merged: concurrent kernels both count).
-- needs: GPU kernels
-- applies_if: table events | no GPU kernels
-- columns:
--   kernels  kernels on the rank
-- CCL-Bench sums over all rank files; `python -m cclq.main` does the same (summary: sum).
-- Memcpy/memset activities are not kernels and are not counted.
WITH per_rank AS (
  SELECT trace, rank, sum(dur_ns) AS kernel_ns, count(*) AS kernels
  FROM gpu_ops WHERE kind = 'kernel'
  GROUP BY ALL
)
SELECT
  s.trace,
  s.rank,
  p.kernel_ns / 1e9 AS value,
  CASE WHEN p.kernels IS NULL THEN 'no GPU kernels' END AS reason,
  p.kernels
FROM metric_scope AS s
LEFT JOIN per_rank AS p USING (trace, rank)
