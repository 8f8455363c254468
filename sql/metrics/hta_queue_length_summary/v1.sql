-- metric: hta_queue_length_summary
-- version: 1
-- unit: count
-- grain: rank
-- category: hta
-- family: hta
-- see_also: hta_cuda_kernel_launch_stats, hta_time_blocked_on_full_queue
-- polarity: neutral
-- summary: mean
-- description: HTA 0.5.0-compatible queue length summary (get_queue_length_summary) for every rank: one row per (rank, CUDA stream), value = the mean number of outstanding GPU operations over the change points of HTA's queue length series, with HTA's describe() columns.
-- needs: HTA launch calls (cudaLaunchKernel, cudaMemcpyAsync, ... with a GPU partner) on the rank
-- columns:
--   stream          the CUDA stream (HTA keys streams by number alone)
--   count           change points of the stream's series (one per launch, one per GPU start)
--   mean            mean queue length over the change points (unweighted by time, as HTA)
--   std             sample standard deviation of the same
--   min             smallest queue length
--   p25             25th percentile (linear interpolation, pandas' describe)
--   p50             median
--   p75             75th percentile
--   max             largest queue length
--   order_sensitive  true when points share a timestamp with an opposite change, so HTA's unstable sort may give slightly different mean, std and percentiles
-- Reproduces HTA 0.5.0 (rows, window, links from sql/views/hta.sql; the series
-- is the view hta_queue_length): +1 at each launch call's ts on its GPU row's
-- stream, -1 at the GPU row's start, a running sum per stream in ts order, and
-- pandas' describe() over the points (for every rank; HTA's default is rank
-- 0). Where it differs: HTA sorts the points with an unstable sort, so at a
-- tied timestamp its order is not defined (it depends on numpy's sort kernel
-- for the CPU); we order launches first (a stable sort of HTA's concatenation).
-- count, min and max never depend on it; mean, std and the percentiles do only
-- on rows with order_sensitive, where HTA's mean and percentiles lie between
-- these and the same statistics of hta_queue_length.queue_length_low.
WITH stats AS (
  SELECT
    q.trace,
    q.rank,
    q.stream,
    count(*) AS count,
    avg(q.queue_length) AS mean,
    stddev_samp(q.queue_length) AS std,
    min(q.queue_length) AS min,
    quantile_cont(q.queue_length, 0.25) AS p25,
    quantile_cont(q.queue_length, 0.5) AS p50,
    quantile_cont(q.queue_length, 0.75) AS p75,
    max(q.queue_length) AS max,
    bool_or(q.queue_length <> q.queue_length_low) AS order_sensitive
  FROM hta_queue_length AS q
  JOIN metric_scope AS m USING (trace, rank)
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  s.mean AS value,
  CASE WHEN s.stream IS NULL THEN 'no launch calls with a GPU partner in the HTA window' END AS reason,
  s.stream,
  s.count,
  s.mean,
  s.std,
  s.min,
  s.p25,
  s.p50,
  s.p75,
  s.max,
  s.order_sensitive
FROM metric_scope AS m
LEFT JOIN stats AS s USING (trace, rank)
