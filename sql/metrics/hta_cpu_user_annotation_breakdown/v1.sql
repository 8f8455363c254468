-- metric: hta_cpu_user_annotation_breakdown
-- version: 1
-- unit: us
-- grain: rank
-- category: hta
-- family: hta
-- see_also: hta_gpu_user_annotation_breakdown
-- polarity: neutral
-- summary: sum
-- description: HTA 0.5.0-compatible user annotation breakdown (get_gpu_user_annotation_breakdown with use_gpu_annotation=False): the CPU time of each user annotation (record_function ranges, ProfilerStep#N included) per rank, one row per annotation name (HTA's "others" bucket past num_kernels names), value = total µs.
-- needs: `user_annotation` events in the HTA window
-- params: num_kernels default 1000, duration_ratio default 0.8
-- columns:
--   name      the annotation name, or "others" for HTA's bucket
--   sum_us    total duration, µs (the value)
--   max_us    longest instance (for a bucketed group: see below)
--   min_us    shortest instance
--   mean_us   mean instance
--   std_us    sample standard deviation (0 for a single instance)
--   names     how many annotation names the row stands for (1, or the size of "others")
-- Reproduces HTA 0.5.0 for every rank: the rows HTA analyses (sql/views/hta.sql:
-- its load, tail filter and µs rounding) with category `user_annotation`, grouped by
-- name (hta_aggregate_by_name in sql/views/hta_analyses.sql, HTA's
-- _aggr_gpu_kernel_time): when a rank has more than num_kernels names, HTA
-- buckets names into "others" (past the duration_ratio quantile of the running
-- totals, or past num_kernels) and then (HTA quirk) re-aggregates the per-name
-- totals only, so a kept name's max = min = mean = its total and std = 0. A
-- rank without such events has value NULL and a reason (HTA returns None for
-- the whole trace when the category is absent).
WITH annotations AS (
  SELECT e.trace, e.rank, 'all' AS key, e.name, e.dur_us
  FROM hta_events AS e
  JOIN metric_scope AS m USING (trace, rank)
  WHERE e.cat = 'user_annotation'
),
by_name AS (
  SELECT *
  FROM hta_aggregate_by_name(
    annotations,
    (SELECT any_value(num_kernels) FROM metric_params),
    (SELECT any_value(duration_ratio) FROM metric_params)
  )
)
SELECT
  m.trace,
  m.rank,
  b.sum_us AS value,
  CASE WHEN b.name IS NULL THEN 'no user_annotation events in the HTA window' END AS reason,
  b.name,
  b.sum_us,
  b.max_us,
  b.min_us,
  b.mean_us,
  b.std_us,
  b.names
FROM metric_scope AS m
LEFT JOIN by_name AS b USING (trace, rank)
