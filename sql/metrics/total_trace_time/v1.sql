-- metric: total_trace_time
-- version: 1
-- unit: s
-- grain: trace
-- category: step_time
-- family: time
-- see_also: avg_step_time, wall_time_s, gpu_step_score
-- polarity: neutral
-- leaderboard: model_execution
-- summary: value
-- description: Span of device activity over every rank of the trace, last end minus first start of GPU kernels, memcpys and memsets or XLA device ops, in seconds.
-- needs: GPU activity (kernels, memcpy, memset) or XLA device ops
-- applies_if: table events | no GPU activity and no XLA device ops
-- params: none
-- columns:
--   ranks           ranks with device work
--   source          gpu | xla | gpu,xla: the device work spanned
--   profile_span_s  span of every recorded event (the profiler window, CPU side included), s
-- Definition: min over ranks of the first start and max of the last end of the
-- device work the views hold, whatever format it came from: GPU activities
-- (`gpu_ops`: kernels, memcpys, memsets; not the cuda_sync waits, which are host
-- time) and XLA device activity (`xla_wall_time`: every slice on a device plane,
-- or the host XLA ops of a host-only profile). Nsight Systems exports will reach
-- it through the same views. Ranks' clocks are epoch nanoseconds
-- (baseTimeNanoseconds), so the span across ranks is real, up to the hosts'
-- clock offsets. `profile_span_s` is the span of every recorded event (the
-- profiler window, CPU side included); `ranks` how many ranks had device work;
-- `source` gpu | xla | gpu,xla.
-- The profiler's window length depends on how long it was left on, so the
-- polarity is neutral (CCL-Bench marks lower as better).
-- Differs from CCL-Bench (tools/total_trace_time): CCL-Bench spans the `kernel`
-- events of the JSON files (float64 microseconds; memcpys left out), the
-- CUPTI kernels of an Nsight Systems export, and on TPU the events of TPU pids
-- divided by 1e9 as if they were nanoseconds although they are microseconds (a
-- value 1000 times too small). Here every format through the same views, exact
-- integer nanoseconds.
WITH gpu AS (
  SELECT trace, rank, min(ts_ns) AS start_ns, max(end_ns) AS end_ns
  FROM gpu_ops
  SEMI JOIN metric_scope USING (trace, rank)
  WHERE kind IN ('kernel', 'memcpy', 'memset') AND end_ns IS NOT NULL
  GROUP BY ALL
),
xla AS (
  SELECT trace, rank, start_ns, end_ns
  FROM xla_wall_time
  SEMI JOIN metric_scope USING (trace, rank)
  WHERE start_ns IS NOT NULL
),
activity AS (
  SELECT *, 'gpu' AS source FROM gpu
  UNION ALL
  SELECT *, 'xla' AS source FROM xla
),
per_trace AS (
  SELECT
    trace,
    min(start_ns) AS start_ns,
    max(end_ns) AS end_ns,
    count(DISTINCT rank) AS ranks,
    string_agg(DISTINCT source, ',' ORDER BY source) AS source
  FROM activity
  GROUP BY trace
),
profile AS (
  SELECT f.trace, min(f.ts_min_ns) AS start_ns, max(f.ts_max_ns) AS end_ns
  FROM files AS f
  SEMI JOIN metric_scope USING (trace, rank)
  GROUP BY f.trace
)
SELECT
  t.trace,
  (p.end_ns - p.start_ns) / 1e9 AS value,
  CASE WHEN p.trace IS NULL THEN 'no GPU activity and no XLA device ops' END AS reason,
  p.ranks,
  p.source,
  (w.end_ns - w.start_ns) / 1e9 AS profile_span_s
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN per_trace AS p USING (trace)
LEFT JOIN profile AS w USING (trace)
