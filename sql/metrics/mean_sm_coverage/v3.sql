-- metric: mean_sm_coverage
-- version: 3
-- unit: ratio
-- ccl_bench_unit: %
-- grain: rank
-- category: compute
-- family: efficiency
-- see_also: aggregate_gpu_utilization, compute_utilization_proxy, hta_temporal_breakdown, compute_bound_fraction
-- polarity: higher
-- leaderboard: gpu_efficiency
-- summary: ratio coverage_weighted_s / covered_s
-- ccl_bench_trace_types: nsys, json
-- description: Duration-weighted mean SM coverage of the rank's GPU kernels, Σ(dur·min(blocks per SM, 1)) / Σdur, 0..1.
-- needs: GPU kernels with `blocks per SM`, or a grid and the GPU's SM count in deviceProperties
-- params: none
-- columns:
--   kernels                kernels on the rank
--   kernels_with_coverage  kernels with a known SM coverage
--   coverage_source        blocks_per_sm | grid (the grid and the SM count) | mixed
--   coverage_weighted_s    Σ(duration x coverage) of the covered kernels, s
--   covered_s              Σ duration of the kernels with a coverage, s
--   sm_count_from          listed (the kernel's device is in deviceProperties) | only_device
--                            (the rank lists one device, whose SM count its kernels take) | mixed
--   grids_in_threads       covered kernels whose grid counts threads (ROCm Tensile), divided by the block
-- Definition: as version 2 (duration-weighted min(blocks per SM, 1), else
-- min(grid blocks / SM count, 1)), with two changes to the grid fallback:
-- * the SM count: the kernel's device's entry in the file's deviceProperties;
--   where the kernel's device is not listed and the rank lists exactly one
--   device, that device's SM count (a ROCm process that sees one GPU lists it as
--   id 0 while its kernels say device 2: tracelens_xdit_sd35 was "not applicable"
--   with 304 CUs listed). Two or more listed devices and none matching: no count.
-- * grid blocks: ROCm's Tensile GEMMs (`Cijk_*`) are launched through
--   hipExtModuleLaunchKernel, whose grid is the global work size in threads, not
--   in workgroups; where every grid dimension of such a kernel is a multiple of
--   its block dimension, grid blocks = Π grid[i] / block[i]. Taking threads for
--   blocks made every such kernel cover the whole GPU.
-- The reason, where no kernel has a coverage, says what is missing: neither
-- `blocks per SM` nor a grid, no deviceProperties at all, or which devices the
-- kernels ran on and which the properties list.
-- Differs from version 2: the two changes above; version 2 is not applicable
-- where the device ids do not join and overstates Tensile kernels' coverage.
-- Differs from CCL-Bench: as version 2 (CCL-Bench reports percent; its nsys
-- variant is an unweighted mean over kernels).
WITH listed AS (
  SELECT trace, rank, device, sm_count
  FROM gpu_sm_counts
  WHERE trace IN (SELECT trace FROM metric_scope)
),
only_device AS (
  SELECT trace, rank, any_value(sm_count) AS sm_count
  FROM listed
  GROUP BY ALL
  HAVING count(*) = 1
),
shaped AS (
  SELECT
    k.trace,
    k.rank,
    k.device,
    k.dur_ns,
    k.blocks_per_sm,
    k.grid,
    k.block,
    coalesce(c.sm_count, o.sm_count) AS sm_count,
    CASE WHEN c.sm_count IS NOT NULL THEN 'listed' WHEN o.sm_count IS NOT NULL THEN 'only_device' END
      AS sm_count_from,
    coalesce(
      regexp_matches(k.name, '^Cijk_') AND len(k.grid) = 3 AND len(k.block) = 3
      AND k.block[1] > 0 AND k.block[2] > 0 AND k.block[3] > 0
      AND k.grid[1] % k.block[1] = 0 AND k.grid[2] % k.block[2] = 0 AND k.grid[3] % k.block[3] = 0,
      false
    ) AS grid_in_threads
  FROM kernels AS k
  LEFT JOIN listed AS c
    ON c.trace = k.trace AND c.rank = k.rank AND c.device = k.device
  LEFT JOIN only_device AS o
    ON o.trace = k.trace AND o.rank = k.rank
  WHERE k.trace IN (SELECT trace FROM metric_scope)
),
covered AS (
  SELECT
    *,
    CASE
      WHEN blocks_per_sm IS NOT NULL THEN least(blocks_per_sm, 1.0)
      WHEN len(grid) = 3 AND sm_count > 0 AND grid_in_threads
        THEN least((grid[1] // block[1]) * (grid[2] // block[2]) * (grid[3] // block[3]) / sm_count, 1.0)
      WHEN len(grid) = 3 AND sm_count > 0 THEN least(grid[1] * grid[2] * grid[3] / sm_count, 1.0)
    END AS sm_coverage,
    CASE
      WHEN blocks_per_sm IS NOT NULL THEN 'blocks_per_sm'
      WHEN len(grid) = 3 AND sm_count > 0 THEN 'grid'
    END AS coverage_source
  FROM shaped
),
per_rank AS (
  SELECT
    trace,
    rank,
    count(*) AS kernels,
    count(sm_coverage) AS kernels_with_coverage,
    count(*) FILTER (WHERE len(grid) = 3) AS kernels_with_grid,
    sum(sm_coverage * dur_ns) FILTER (WHERE sm_coverage IS NOT NULL) AS weighted_ns,
    sum(dur_ns) FILTER (WHERE sm_coverage IS NOT NULL) AS covered_ns,
    CASE WHEN count(DISTINCT coverage_source) > 1 THEN 'mixed' ELSE any_value(coverage_source) END
      AS coverage_source,
    CASE
      WHEN count(DISTINCT sm_count_from) FILTER (WHERE coverage_source = 'grid') > 1 THEN 'mixed'
      ELSE any_value(sm_count_from) FILTER (WHERE coverage_source = 'grid')
    END AS sm_count_from,
    count(*) FILTER (WHERE grid_in_threads AND coverage_source = 'grid') AS grids_in_threads,
    string_agg(DISTINCT device::VARCHAR, ', ' ORDER BY device::VARCHAR) AS kernel_devices
  FROM covered
  GROUP BY ALL
),
listed_per_rank AS (
  SELECT trace, rank, string_agg(device::VARCHAR, ', ' ORDER BY device) AS listed_devices
  FROM listed
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.weighted_ns / nullif(p.covered_ns, 0) AS value,
  CASE
    WHEN p.kernels IS NULL THEN 'no GPU kernels'
    WHEN p.kernels_with_coverage = 0 AND p.kernels_with_grid = 0 THEN 'kernels carry neither blocks per SM nor a grid'
    WHEN p.kernels_with_coverage = 0 AND l.listed_devices IS NULL
      THEN 'kernels carry grids, but the trace lists no deviceProperties SM count'
    WHEN p.kernels_with_coverage = 0
      THEN format('kernels carry grids on device {}, but deviceProperties lists SM counts for device {} only '
                  '(several devices: which one is theirs is not known)', p.kernel_devices, l.listed_devices)
    WHEN p.covered_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  p.kernels,
  p.kernels_with_coverage,
  p.coverage_source,
  p.weighted_ns / 1e9 AS coverage_weighted_s,
  p.covered_ns / 1e9 AS covered_s,
  p.sm_count_from,
  p.grids_in_threads
FROM metric_scope AS m
LEFT JOIN per_rank AS p USING (trace, rank)
LEFT JOIN listed_per_rank AS l USING (trace, rank)
