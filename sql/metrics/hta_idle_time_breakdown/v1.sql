-- metric: hta_idle_time_breakdown
-- version: 1
-- unit: us
-- grain: rank
-- category: hta
-- family: hta
-- see_also: hta_idle_interval_stats, aggregate_gpu_utilization
-- polarity: lower
-- summary: sum
-- description: HTA 0.5.0-compatible idle time breakdown (get_idle_time_breakdown, consecutive_kernel_delay = 30 us) for every rank: one row per (rank, stream), value = the stream's total idle µs, split into host_wait / kernel_wait / other.
-- needs: HTA kernel rows (kernel, memcpy, memset, MTIA ccp events with a stream arg)
-- columns:
--   stream             the GPU stream (one row per stream)
--   host_wait_us       gaps whose kernel was launched after the previous kernel ended (waiting
--                        for the host), us
--   kernel_wait_us     other gaps shorter than 30 us (between consecutive kernels), us
--   other_us           the remaining gaps, us
--   host_wait_ratio    host_wait_us / idle time
--   kernel_wait_ratio  kernel_wait_us / idle time
--   other_ratio        other_us / idle time
--   kernels            kernels on the stream
-- Reproduces HTA 0.5.0 (rows, window, timestamps and CPU<->GPU links from
-- sql/views/hta.sql), but for every rank (HTA's default is rank 0 only).
-- Per stream, HTA's kernels (stream arg present and cat in kernel, Kernel,
-- gpu_memset, Memset, gpu_memcpy, Memcpy, mtia_ccp_events: cuda_sync excluded)
-- in ts order; each kernel's gap = ts - end of the previous kernel in that
-- order (negative when they overlap), categorised:
--   host_wait    the launching runtime call started after the previous kernel
--                ended (ts_runtime > prev_end)
--   kernel_wait  otherwise, when gap < 30 us
--   other        everything else, including the first kernel (no gap, 0)
-- value = sum of all gaps of the stream; host_wait_us / kernel_wait_us /
-- other_us = the sums per category, NULL when HTA reports no row for that
-- category; *_ratio = category / total, rounded to 2 decimals as HTA prints it
-- (NULL when the total is 0: HTA's NaN). HTA quirks kept: a kernel whose launch
-- is missing takes raw event #0 as its runtime call; a GPU row HTA holds twice
-- (see hta_events.copies) is walked twice. `kernels` = kernels on the stream.
WITH hta_kernels AS (
  SELECT
    e.trace,
    e.rank,
    e.stream,
    e.ts_us,
    e.end_us,
    e.ts_runtime_us,
    e.row_order,
    unnest(range(e.copies)) AS copy_no
  FROM hta_gpu_rows AS e
  JOIN metric_scope AS m USING (trace, rank)
  WHERE e.cat IN ('kernel', 'Kernel', 'gpu_memset', 'Memset', 'gpu_memcpy', 'Memcpy', 'mtia_ccp_events')
),
gaps AS (
  SELECT
    *,
    lag(end_us) OVER (PARTITION BY trace, rank, stream ORDER BY ts_us, row_order, copy_no) AS prev_end_us
  FROM hta_kernels
),
categorised AS (
  SELECT
    trace,
    rank,
    stream,
    ts_us - prev_end_us AS gap_us,
    -- NULL comparisons (first kernel, no runtime call) fall through to other,
    -- as NaN comparisons do in pandas
    CASE
      WHEN ts_runtime_us > prev_end_us THEN 'host_wait'
      WHEN ts_us - prev_end_us < 30 THEN 'kernel_wait'
      ELSE 'other'
    END AS category
  FROM gaps
),
per_stream AS (
  SELECT
    trace,
    rank,
    stream,
    count(*) AS kernels,
    coalesce(sum(gap_us), 0) AS idle_us,
    -- a category HTA lists (it has kernels) sums to 0 when all its gaps are NaN
    CASE WHEN count(*) FILTER (WHERE category = 'host_wait') > 0
      THEN coalesce(sum(gap_us) FILTER (WHERE category = 'host_wait'), 0) END AS host_wait_us,
    CASE WHEN count(*) FILTER (WHERE category = 'kernel_wait') > 0
      THEN coalesce(sum(gap_us) FILTER (WHERE category = 'kernel_wait'), 0) END AS kernel_wait_us,
    CASE WHEN count(*) FILTER (WHERE category = 'other') > 0
      THEN coalesce(sum(gap_us) FILTER (WHERE category = 'other'), 0) END AS other_us
  FROM categorised
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.idle_us AS value,
  CASE WHEN p.stream IS NULL THEN 'no kernel, memcpy or memset rows with a stream in the HTA window' END AS reason,
  p.stream,
  p.host_wait_us,
  p.kernel_wait_us,
  p.other_us,
  hta_round(p.host_wait_us / nullif(p.idle_us, 0), 2) AS host_wait_ratio,
  hta_round(p.kernel_wait_us / nullif(p.idle_us, 0), 2) AS kernel_wait_ratio,
  hta_round(p.other_us / nullif(p.idle_us, 0), 2) AS other_ratio,
  p.kernels
FROM metric_scope AS m
LEFT JOIN per_stream AS p USING (trace, rank)
