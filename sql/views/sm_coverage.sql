-- SM coverage: how much of its GPU one kernel's grid can occupy at once, the
-- launch-shape proxy behind mean_sm_coverage and compute_bound_fraction.
-- requires: gpu, catalog

-- One row per (trace, rank, device) that the profiler described: the GPU's
-- streaming-multiprocessor count from Kineto's `deviceProperties` (`numSms`;
-- `smCount` as some writers spell it). AMD lists compute units under `numSms`.
CREATE OR REPLACE VIEW gpu_sm_counts AS
WITH listed AS (
  SELECT
    f.trace,
    f.data_rank AS rank,
    TRY_CAST(p.prop ->> 'id' AS INTEGER) AS device,
    coalesce(TRY_CAST(p.prop ->> 'numSms' AS INTEGER), TRY_CAST(p.prop ->> 'smCount' AS INTEGER)) AS sm_count
  FROM file_ranks AS f,
    unnest(TRY_CAST(f.device_properties AS JSON[])) AS p(prop)
)
SELECT trace, rank, device, max(sm_count) AS sm_count
FROM listed
WHERE device IS NOT NULL AND sm_count > 0
GROUP BY ALL;

-- One row per GPU kernel with its SM coverage in 0..1:
--   min(blocks_per_sm, 1)                 when the kernel carries `blocks per SM`
--                                          (CUPTI's grid blocks / SM count);
--   min(grid blocks / sm_count, 1)        otherwise, with grid blocks =
--                                          grid[1]*grid[2]*grid[3] and the SM count
--                                          of the kernel's device (gpu_sm_counts);
--   NULL                                  when neither is known.
-- `coverage_source` says which: 'blocks_per_sm' | 'grid' | NULL. ROCm traces carry
-- grids but no blocks per SM; their grid is taken to count workgroups (blocks).
CREATE OR REPLACE VIEW kernel_sm_coverage AS
SELECT
  k.trace,
  k.rank,
  k.device,
  k.stream,
  k.name,
  k.ts_ns,
  k.dur_ns,
  k.end_ns,
  k.blocks_per_sm,
  k.grid[1] * k.grid[2] * k.grid[3] AS grid_blocks,
  c.sm_count,
  CASE
    WHEN k.blocks_per_sm IS NOT NULL THEN least(k.blocks_per_sm, 1.0)
    WHEN len(k.grid) = 3 AND c.sm_count > 0 THEN least((k.grid[1] * k.grid[2] * k.grid[3]) / c.sm_count, 1.0)
  END AS sm_coverage,
  CASE
    WHEN k.blocks_per_sm IS NOT NULL THEN 'blocks_per_sm'
    WHEN len(k.grid) = 3 AND c.sm_count > 0 THEN 'grid'
  END AS coverage_source
FROM kernels AS k
LEFT JOIN gpu_sm_counts AS c
  ON c.trace = k.trace AND c.rank = k.rank AND c.device = k.device;
