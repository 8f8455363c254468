-- metric: compute_bound_fraction
-- version: 1
-- unit: ratio
-- grain: rank
-- category: compute
-- family: efficiency
-- see_also: memory_bound_fraction, mean_sm_coverage
-- polarity: neutral
-- leaderboard: gpu_efficiency
-- summary: mean
-- description: Share of kernel time in long, GPU-filling kernels: Σdur(kernels with SM coverage > 0.7 and dur > 10 µs) / Σdur(kernels with a coverage) per rank, 0..1.
-- needs: GPU kernels with `blocks per SM`, or a grid and the GPU's SM count in deviceProperties
-- applies_if: table events | no GPU kernels
-- params: none
-- columns:
--   compute_bound_s           time of kernels with SM coverage > 0.7 and longer than 10 us, s
--   kernel_s                  time of the kernels with a known SM coverage, s
--   kernels_without_coverage  kernels without a known SM coverage (left out)
-- Definition: SM coverage as in mean_sm_coverage v1 (view `kernel_sm_coverage`:
-- min(blocks per SM, 1), else grid blocks / SM count). A kernel is compute-bound
-- when its coverage is strictly above 0.7 and its duration strictly above
-- 10 µs (10,000 ns). Numerator and denominator are taken over the kernels whose
-- coverage is known (all kernels, comm included); `kernels_without_coverage`
-- says how many were left out. Not applicable when no kernel has a coverage.
-- This is a launch-shape proxy, not a roofline measurement.
-- Differs from CCL-Bench: CCL-Bench reports percent, has an nsys-only
-- implementation (grid / numMultiprocessors, every kernel) and is no longer
-- registered in its main.py. Here it is 0..1 and works on Kineto traces.
WITH per_rank AS (
  SELECT
    trace,
    rank,
    count(*) AS kernels,
    count(*) FILTER (WHERE sm_coverage IS NULL) AS kernels_without_coverage,
    sum(dur_ns) FILTER (WHERE sm_coverage IS NOT NULL) AS covered_ns,
    coalesce(sum(dur_ns) FILTER (WHERE sm_coverage > 0.7 AND dur_ns > 10000), 0) AS compute_bound_ns
  FROM kernel_sm_coverage
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.compute_bound_ns / nullif(p.covered_ns, 0) AS value,
  CASE
    WHEN p.kernels IS NULL THEN 'no GPU kernels'
    WHEN p.covered_ns IS NULL THEN 'no blocks per SM, and no grid with a known SM count'
    WHEN p.covered_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  p.compute_bound_ns / 1e9 AS compute_bound_s,
  p.covered_ns / 1e9 AS kernel_s,
  p.kernels_without_coverage
FROM metric_scope AS m
LEFT JOIN per_rank AS p USING (trace, rank)
