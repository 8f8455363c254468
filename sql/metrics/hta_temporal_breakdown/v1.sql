-- metric: hta_temporal_breakdown
-- version: 1
-- unit: us
-- grain: rank
-- category: hta
-- family: hta
-- see_also: aggregate_gpu_utilization, mean_sm_coverage, compute_utilization_proxy, hta_critical_path_breakdown, break_down_steps
-- polarity: neutral
-- summary: mean
-- description: HTA 0.5.0-compatible temporal breakdown per rank (get_temporal_breakdown): value = kernel_time_us = last GPU end - first GPU start over HTA's analysed window, split into idle, compute and non-compute microseconds.
-- needs: HTA GPU rows (events with a `stream` arg) on the rank
-- columns:
--   idle_time_us           kernel_time - |union of GPU rows|, us
--   compute_time_us        |union of COMPUTATION rows|, us
--   non_compute_time_us    kernel_time - compute - idle (comm/memory/other not under compute), us
--   kernel_time_us         last merged GPU end - first GPU start (the value), us
--   idle_time_pctg         100 x idle / kernel_time, rounded to 2 decimals as HTA prints it
--   compute_time_pctg      100 x compute / kernel_time, rounded likewise
--   non_compute_time_pctg  100 x non-compute / kernel_time, rounded likewise
-- Reproduces HTA 0.5.0 exactly, quirks included (all from sql/views/hta.sql):
-- HTA's load filter, its µs rounding of float timestamps (ceil ts, floor end),
-- its ProfilerStep tail filter (CPU rows before the start of the last step, the
-- GPU rows they launched; none when the trace has <= 1 ProfilerStep names), and
-- its "GPU rows" = every row with a stream arg (kernels, memcpy, memset and
-- cuda_sync events alike), all streams merged:
--   kernel_time     = end of the last merged GPU interval - start of the first
--   idle_time       = kernel_time - |union of GPU rows|
--   compute_time    = |union of COMPUTATION rows| (HTA 0.5.0 name regexes; note
--                     `Stream Wait Event` counts as COMPUTATION)
--   non_compute_time = kernel_time - compute - idle (comm/memory/other time
--                     not under compute)
-- The *_pctg columns are 100 * x / kernel_time rounded to 2 decimals with
-- numpy's half-to-even rounding, as HTA prints them. Times in microseconds (HTA's
-- unit), not seconds, so that they compare with HTA's output digit for digit.
-- Differs from the cclq-native metrics: HTA's window, not the whole trace.
WITH span AS (
  -- one read of the merged intervals: key 'ALL' gives the span and the busy
  -- time, key 'COMPUTATION' the compute time (a rank with COMPUTATION rows has
  -- 'ALL' rows too, so the ranks are those with GPU rows)
  SELECT
    trace,
    rank,
    -- HTA: merged.iloc[-1].end - merged.iloc[0].ts (intervals in time order)
    arg_max(end_us, seq) FILTER (WHERE key = 'ALL') - arg_min(ts_us, seq) FILTER (WHERE key = 'ALL') AS kernel_time_us,
    sum(end_us - ts_us) FILTER (WHERE key = 'ALL') AS busy_us,
    sum(end_us - ts_us) FILTER (WHERE key = 'COMPUTATION') AS compute_time_us
  FROM hta_gpu_merged
  WHERE key IN ('ALL', 'COMPUTATION')
  GROUP BY ALL
),
breakdown AS (
  SELECT
    s.trace,
    s.rank,
    s.kernel_time_us,
    s.kernel_time_us - s.busy_us AS idle_time_us,
    coalesce(s.compute_time_us, 0) AS compute_time_us,
    s.kernel_time_us - coalesce(s.compute_time_us, 0) - (s.kernel_time_us - s.busy_us) AS non_compute_time_us
  FROM span AS s
)
SELECT
  m.trace,
  m.rank,
  b.kernel_time_us AS value,
  CASE WHEN b.kernel_time_us IS NULL THEN 'no GPU rows (events with a stream arg) in the HTA window' END AS reason,
  b.idle_time_us,
  b.compute_time_us,
  b.non_compute_time_us,
  b.kernel_time_us,
  -- HTA: round(100 * (x / kernel_time), 2)
  hta_round(100 * (b.idle_time_us / b.kernel_time_us), 2) AS idle_time_pctg,
  hta_round(100 * (b.compute_time_us / b.kernel_time_us), 2) AS compute_time_pctg,
  hta_round(100 * (b.non_compute_time_us / b.kernel_time_us), 2) AS non_compute_time_pctg
FROM metric_scope AS m
LEFT JOIN breakdown AS b USING (trace, rank)
