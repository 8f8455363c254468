-- metric: hta_time_blocked_on_full_queue
-- version: 1
-- unit: us
-- grain: rank
-- category: hta
-- family: hta
-- see_also: hta_cuda_kernel_launch_stats, hta_queue_length_summary
-- polarity: lower
-- summary: sum
-- description: HTA 0.5.0-compatible time blocked on a full launch queue (get_time_spent_blocked_on_full_queue, max_queue_length = 1024): one row per (rank, stream) whose queue reaches the limit, value = µs spent at or above it, and that share of the rank's trace duration.
-- needs: HTA launch calls with a GPU partner on the rank
-- params: max_queue_length default 1024
-- columns:
--   stream                                 the CUDA stream whose queue reached max_queue_length
--   duration_at_max_queue_length_us        µs from each point at or above the limit to the next point of the stream's series
--   relative_duration_at_max_queue_length  that time / the rank's duration (last ts - first ts of HTA's rows)
--   hta_reports                            true for the one stream per rank HTA's result keeps (see below)
-- Reproduces HTA 0.5.0 over the series of hta_queue_length (ties: launches
-- first, see that view): per stream, the sum of (next point's ts - ts) over the
-- points whose queue length is >= max_queue_length (the last point has no next
-- and adds nothing), divided by Trace.get_trace_duration (max ts - min ts of
-- the rank's rows, starts only). HTA quirk, reported rather than copied: HTA
-- collects the streams in a dict keyed by rank, so only the last stream (the
-- highest number) that reaches the limit survives in its output; every such
-- stream is a row here and `hta_reports` marks the one HTA shows. A rank
-- whose queues never reach the limit has value NULL and a reason (HTA: no row).
WITH blocked AS (
  SELECT
    q.trace,
    q.rank,
    q.stream,
    sum(q.next_ts_us - q.ts_us) FILTER (WHERE q.queue_length >= p.max_queue_length) AS duration_us,
    count(*) FILTER (WHERE q.queue_length >= p.max_queue_length) AS full_points
  FROM (
    SELECT *, lead(ts_us) OVER (PARTITION BY trace, rank, stream ORDER BY seq) AS next_ts_us
    FROM hta_queue_length
    SEMI JOIN metric_scope USING (trace, rank)
  ) AS q
  JOIN metric_params AS p USING (trace)
  GROUP BY ALL
  HAVING count(*) FILTER (WHERE q.queue_length >= p.max_queue_length) > 0
)
SELECT
  m.trace,
  m.rank,
  CASE WHEN b.stream IS NOT NULL THEN coalesce(b.duration_us, 0) END AS value,
  CASE WHEN b.stream IS NULL THEN 'no stream''s queue reaches max_queue_length' END AS reason,
  b.stream,
  CASE WHEN b.stream IS NOT NULL THEN coalesce(b.duration_us, 0) END AS duration_at_max_queue_length_us,
  CASE WHEN b.stream IS NOT NULL THEN coalesce(b.duration_us, 0) / d.duration_us END AS relative_duration_at_max_queue_length,
  b.stream = max(b.stream) OVER (PARTITION BY m.trace, m.rank) AS hta_reports
FROM metric_scope AS m
LEFT JOIN blocked AS b USING (trace, rank)
LEFT JOIN hta_rank_duration AS d USING (trace, rank)
