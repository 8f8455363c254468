-- metric: hta_idle_interval_stats
-- version: 1
-- unit: us
-- grain: rank
-- category: hta
-- family: hta
-- see_also: hta_idle_time_breakdown, aggregate_gpu_utilization
-- polarity: lower
-- summary: mean
-- description: HTA 0.5.0-compatible idle interval statistics (get_idle_time_breakdown with show_idle_interval_stats, consecutive_kernel_delay = 30 us) for every rank: one row per (rank, stream, idle category), value = the mean gap between consecutive kernels in that category, with HTA's describe() columns rounded to 2 decimals.
-- needs: HTA kernel rows (kernel, memcpy, memset, MTIA ccp events with a stream arg)
-- columns:
--   stream          the CUDA stream
--   idle_category   host_wait, kernel_wait or other (as in hta_idle_time_breakdown)
--   count           gaps in the category (the first kernel of a stream is in other with no gap, so other can have 0)
--   mean            mean gap, µs (NULL when count is 0)
--   std             sample standard deviation (NULL for fewer than 2 gaps)
--   min             smallest gap (negative when kernels overlap)
--   p25             25th percentile (linear interpolation, pandas' describe)
--   p50             median gap
--   p75             75th percentile
--   max             largest gap
-- Reproduces HTA 0.5.0 over the view hta_idle_intervals (the gaps the
-- hta_idle_time_breakdown metric sums): pandas' describe() of the gaps per
-- category, every value rounded to 2 decimals with numpy's half-to-even
-- rounding as HTA's DataFrame.round(2) does (count included, a whole number).
-- HTA lists a category when a kernel falls in it, even if none of its kernels
-- has a gap (count 0, the rest NaN: NULL here). For every rank (HTA's default
-- is rank 0).
WITH stats AS (
  SELECT
    i.trace,
    i.rank,
    i.stream,
    i.idle_category,
    count(i.idle_interval_us) AS count,
    avg(i.idle_interval_us) AS mean,
    stddev_samp(i.idle_interval_us) AS std,
    min(i.idle_interval_us) AS min,
    quantile_cont(i.idle_interval_us, 0.25) AS p25,
    quantile_cont(i.idle_interval_us, 0.5) AS p50,
    quantile_cont(i.idle_interval_us, 0.75) AS p75,
    max(i.idle_interval_us) AS max
  FROM hta_idle_intervals AS i
  JOIN metric_scope AS m USING (trace, rank)
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  hta_round(s.mean, 2) AS value,
  CASE WHEN s.stream IS NULL THEN 'no kernel, memcpy or memset rows with a stream in the HTA window' END AS reason,
  s.stream,
  s.idle_category,
  s.count,
  hta_round(s.mean, 2) AS mean,
  hta_round(s.std, 2) AS std,
  hta_round(s.min, 2) AS min,
  hta_round(s.p25, 2) AS p25,
  hta_round(s.p50, 2) AS p50,
  hta_round(s.p75, 2) AS p75,
  hta_round(s.max, 2) AS max
FROM metric_scope AS m
LEFT JOIN stats AS s USING (trace, rank)
