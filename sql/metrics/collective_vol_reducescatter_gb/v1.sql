-- metric: collective_vol_reducescatter_gb
-- version: 1
-- unit: GB
-- grain: rank
-- category: collectives
-- polarity: neutral
-- leaderboard: communication
-- summary: mean
-- description: Bytes moved by ReduceScatter collectives per rank over the whole trace, Σ message bytes / 1e9 (GB); for XLA, per device of the rank.
-- needs: GPU kernels or XLA ops; collective message sizes (kernel collective args, CPU collective ops with record_shapes, or XLA shapes)
-- params: none
-- Definition: value = Σ bytes / 1e9 over the rank's reduce_scatter collectives with a
-- known size (`collective_volumes_with(2, ...)`, sql/views/collective_volumes.sql:
-- GPU comm kernels of kernel_class_rules v2 through the `collectives` view,
-- nccl-tests' message size; XLA collective ops by their result shape, divided by
-- the rank's device planes). A rank with GPU kernels or XLA ops but no reduce_scatter
-- scores 0; a rank whose reduce_scatter collectives all lack a size is not applicable;
-- where only some lack one, value counts the sized ones and `unsized` says how
-- many were left out.
-- Summary: the mean over ranks (what one rank moved); CCL-Bench reads rank 0's
-- file only, which equals the mean when ranks are alike.
-- Differs from CCL-Bench (tools/collective_data_volume): every rank instead of
-- rank 0's file only; GB = 1e9 B as there; sizes by nccl-tests' convention and
-- the `collectives` view's fallbacks (CPU-side collective ops when kernels carry
-- no arguments), where CCL-Bench takes `In msg nelems` x dtype of every kernel,
-- which counts an all_gather's per-rank input instead of the gathered output it
-- moves and gives 0 for kernels without arguments or with an unknown dtype;
-- XLA collectives sized by their result shape per device instead of
-- `bytes_accessed` summed over every device of the file.
WITH volume AS (
  SELECT * FROM collective_volumes_with(2, metric_scope) WHERE coll_type = 'reduce_scatter'
)
SELECT
  m.trace,
  m.rank,
  CASE
    WHEN d.rank IS NULL THEN NULL
    WHEN v.collectives IS NULL THEN 0.0
    WHEN v.sized > 0 THEN v.bytes / v.devices / 1e9
  END AS value,
  CASE
    WHEN d.rank IS NULL THEN 'no GPU kernels and no XLA ops'
    WHEN v.sized = 0 THEN 'none of the ' || v.collectives || ' reduce_scatter collectives has a known message size'
  END AS reason,
  coalesce(v.collectives, 0) AS collectives,
  coalesce(v.collectives - v.sized, 0) AS unsized,
  v.devices,
  coalesce(v.source, d.device_source) AS source
FROM metric_scope AS m
LEFT JOIN (SELECT trace, rank, min(device_source) AS device_source FROM device_ranks GROUP BY ALL) AS d
  USING (trace, rank)
LEFT JOIN volume AS v USING (trace, rank)
