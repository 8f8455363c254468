-- metric: mean_sm_coverage
-- version: 2
-- unit: ratio
-- grain: rank
-- category: compute
-- polarity: higher
-- leaderboard: gpu_efficiency
-- summary: ratio coverage_weighted_s / covered_s
-- description: Duration-weighted mean SM coverage of the rank's GPU kernels, Σ(dur·min(blocks per SM, 1)) / Σdur, 0..1.
-- needs: GPU kernels with `blocks per SM`, or a grid and the GPU's SM count in deviceProperties
-- params: none
-- Definition: a kernel's SM coverage (view `kernel_sm_coverage`,
-- sql/views/sm_coverage.sql) is min(blocks_per_sm, 1) from Kineto's `blocks per
-- SM`; where that argument is missing (ROCm traces, older PyTorch) it falls back
-- to min(grid[1]*grid[2]*grid[3] / SM count, 1) with the SM count (`numSms` or
-- `smCount`) of the kernel's device from the file's deviceProperties. Kernels
-- with neither are left out of both sums; `kernels_with_coverage` says how many
-- counted and `coverage_source` which way ('blocks_per_sm', 'grid' or 'mixed').
-- Not applicable when no kernel of the rank has a coverage.
-- Differs from CCL-Bench: CCL-Bench reports percent; its nsys variant is an
-- unweighted mean over kernels. Here it is 0..1 and always duration-weighted.
-- Summary: Σ coverage_weighted_s / Σ covered_s over the ranks, i.e. the
-- duration-weighted coverage of every kernel of every rank pooled, as
-- CCL-Bench's JSON tool pools the kernels of all its rank files (a rank with
-- more kernel time weighs more). `coverage_weighted_s` = Σ(dur x coverage),
-- `covered_s` = Σdur of the kernels with a coverage, per rank.
-- Differs from version 1: the same rows plus those two columns; version 1's
-- summary was the unweighted mean of the per-rank values.
WITH per_rank AS (
  SELECT
    trace,
    rank,
    count(*) AS kernels,
    count(sm_coverage) AS kernels_with_coverage,
    sum(sm_coverage * dur_ns) FILTER (WHERE sm_coverage IS NOT NULL) AS weighted_ns,
    sum(dur_ns) FILTER (WHERE sm_coverage IS NOT NULL) AS covered_ns,
    CASE
      WHEN count(DISTINCT coverage_source) > 1 THEN 'mixed'
      ELSE any_value(coverage_source)
    END AS coverage_source
  FROM kernel_sm_coverage
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.weighted_ns / nullif(p.covered_ns, 0) AS value,
  CASE
    WHEN p.kernels IS NULL THEN 'no GPU kernels'
    WHEN p.kernels_with_coverage = 0 THEN 'no blocks per SM, and no grid with a known SM count'
    WHEN p.covered_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  p.kernels,
  p.kernels_with_coverage,
  p.coverage_source,
  p.weighted_ns / 1e9 AS coverage_weighted_s,
  p.covered_ns / 1e9 AS covered_s
FROM metric_scope AS m
LEFT JOIN per_rank AS p USING (trace, rank)
