-- metric: collective_vol_total_gb
-- version: 1
-- unit: GB
-- grain: rank
-- category: collectives
-- family: collectives
-- see_also: collective_vol_allgather_gb, collective_vol_allreduce_gb, collective_vol_alltoall_gb, collective_vol_reducescatter_gb
-- polarity: neutral
-- leaderboard: communication
-- summary: mean
-- ccl_bench_trace_types: json, tpu_profiler, json_tpu
-- description: Bytes moved by all collectives per rank over the whole trace, Σ message bytes / 1e9 (GB) over every collective type; for XLA, per device of the rank.
-- needs: GPU kernels or XLA ops; collective message sizes (kernel collective args, CPU collective ops with record_shapes, or XLA shapes)
-- applies_if: table events | no GPU kernels and no XLA ops
-- params: none
-- columns:
--   collectives    collectives (GPU) or collective XLA ops on the rank
--   unsized        those without a message size, not in the value
--   four_types_gb  GB of all_reduce, all_gather, reduce_scatter and all_to_all only (the sum of
--                    the four collective_vol_<type>_gb)
--   source         gpu collectives | xla collective ops; gpu | xla when the rank ran none
-- Definition: as collective_vol_allreduce_gb and its siblings, over every typed
-- collective of the rank (`collective_volumes_with(2, ...)`): all_reduce,
-- all_gather, reduce_scatter, all_to_all, and broadcast, reduce, send, recv,
-- gather, scatter too; `four_types_gb` is the sum over the first four only,
-- CCL-Bench's total. A rank with GPU kernels or XLA ops but no collectives
-- scores 0; one whose collectives all lack a size is not applicable; `unsized`
-- counts the collectives left out of the bytes.
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
-- CCL-Bench's total is the sum of its four types; broadcast and point-to-point
-- traffic (pipeline parallelism) are real bytes moved and count here.
WITH volume AS (
  SELECT
    trace, rank,
    sum(collectives) AS collectives,
    sum(sized) AS sized,
    sum(bytes / devices) AS bytes,
    sum(bytes / devices) FILTER (WHERE coll_type IN ('all_reduce', 'all_gather', 'reduce_scatter', 'all_to_all'))
      AS four_types_bytes,
    any_value(source) AS source
  FROM collective_volumes_with(2, metric_scope)
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  CASE
    WHEN d.rank IS NULL THEN NULL
    WHEN v.collectives IS NULL THEN 0.0
    WHEN v.sized > 0 THEN v.bytes / 1e9
  END AS value,
  CASE
    WHEN d.rank IS NULL THEN 'no GPU kernels and no XLA ops'
    WHEN v.sized = 0 THEN 'none of the ' || v.collectives || ' collectives has a known message size'
  END AS reason,
  coalesce(v.collectives, 0) AS collectives,
  coalesce(v.collectives - v.sized, 0) AS unsized,
  coalesce(v.four_types_bytes, 0) / 1e9 AS four_types_gb,
  coalesce(v.source, d.device_source) AS source
FROM metric_scope AS m
LEFT JOIN (SELECT trace, rank, min(device_source) AS device_source FROM device_ranks GROUP BY ALL) AS d
  USING (trace, rank)
LEFT JOIN volume AS v USING (trace, rank)
