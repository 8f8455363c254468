-- metric: hta_kernel_breakdown
-- version: 1
-- unit: us
-- grain: rank
-- category: hta
-- family: hta
-- see_also: dominant_kernel_concentration, moe_fraction
-- polarity: neutral
-- summary: sum
-- description: HTA 0.5.0-compatible per-kernel breakdown (get_gpu_kernel_breakdown's kernel_df, num_kernels = 10, duration_ratio = 0.8, memory kernels included): one row per (rank, kernel type, kernel name or "others"), value = total GPU µs of that name.
-- needs: HTA GPU rows (events with a `stream` arg) on the rank
-- params: num_kernels default 10, duration_ratio default 0.8, include_memory_kernels default 1
-- columns:
--   kernel_type  COMPUTATION, COMMUNICATION or MEMORY (HTA 0.5.0 name classes; OTHER is left out, as in HTA)
--   name         the full kernel name, or "others" for HTA's bucket
--   sum_us       total duration, µs (the value)
--   max_us       longest instance (for a bucketed group: see below)
--   min_us       shortest instance
--   mean_us      mean instance
--   std_us       sample standard deviation (0 for a single instance)
--   names        how many kernel names the row stands for (1, or the size of "others")
-- Reproduces HTA 0.5.0's kernel_df (breakdown_analysis.get_gpu_kernel_breakdown)
-- over the rows HTA analyses (sql/views/hta.sql): per rank and kernel type,
-- the GPU rows (stream <> -1, a GPU row HTA holds twice counts twice) grouped
-- by full name with hta_aggregate_by_name (sql/views/hta_analyses.sql): past
-- num_kernels names HTA buckets names into "others" and then (HTA quirk)
-- re-aggregates only the per-name totals, so a kept name's max = min = mean =
-- its total and std = 0 (golden kernel_breakdown.csv). With num_kernels at
-- least the number of names nothing is bucketed and every row has the true
-- statistics (golden kernel_breakdown_all.csv). include_memory_kernels = 0
-- leaves out MEMORY (HTA's TraceAnalysis default is to include them).
-- kernel_type_breakdown, the other half of the same HTA call, is the metric
-- hta_kernel_type_breakdown.
WITH kernels AS (
  SELECT e.trace, e.rank, e.kernel_type AS key, e.name, e.dur_us, unnest(range(e.copies)) AS copy_no
  FROM hta_events AS e
  JOIN metric_scope AS m USING (trace, rank)
  WHERE e.stream <> -1
    AND (e.kernel_type IN ('COMPUTATION', 'COMMUNICATION')
         OR (e.kernel_type = 'MEMORY' AND (SELECT any_value(include_memory_kernels) FROM metric_params) <> 0))
),
by_name AS (
  SELECT *
  FROM hta_aggregate_by_name(
    kernels,
    (SELECT any_value(num_kernels) FROM metric_params),
    (SELECT any_value(duration_ratio) FROM metric_params)
  )
)
SELECT
  m.trace,
  m.rank,
  b.sum_us AS value,
  CASE WHEN b.name IS NULL THEN 'no COMPUTATION, COMMUNICATION or MEMORY rows with a stream in the HTA window' END AS reason,
  b.key AS kernel_type,
  b.name,
  b.sum_us,
  b.max_us,
  b.min_us,
  b.mean_us,
  b.std_us,
  b.names
FROM metric_scope AS m
LEFT JOIN by_name AS b USING (trace, rank)
