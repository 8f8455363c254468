-- metric: wall_time_s
-- version: 1
-- unit: s
-- grain: trace
-- category: step_time
-- family: time
-- see_also: avg_step_time, total_trace_time, gpu_step_score
-- polarity: lower
-- summary: value
-- description: Span of device activity in an XLA profile (last end minus first start over device-plane events), in seconds.
-- needs: an xprof profile: device planes, or host XLA ops (JAX on CPU)
-- applies_if: format xprof chrome | no device planes and no host XLA ops (not an XLA/xprof profile)
-- columns:
--   span_source        the device-plane events the value spans (xla_wall_time.span_source;
--                        comma-separated when several)
--   all_events_span_s  span of every recorded event, host included, s
-- Definition (view xla_wall_time): per profile file, max(end) - min(ts) over every
-- slice on a device plane (/device:TPU:N, /device:GPU:N; all lines); a host-only
-- profile uses the span of its host XLA ops. With several files (hosts) the
-- longest counts.
-- Differs from CCL-Bench group 21, whose wall time spans ALL events, host threads
-- included (Python, tracing, compilation before the first device op): that figure
-- is the detail column `all_events_span_s`.
WITH per_trace AS (
  SELECT
    w.trace,
    max(w.device_span_ns) AS span_ns,
    max(w.all_events_span_ns) AS all_events_span_ns,
    string_agg(DISTINCT w.span_source, ',') AS span_source
  FROM xla_wall_time AS w
  JOIN metric_scope AS m USING (trace, rank)
  GROUP BY w.trace
)
SELECT
  t.trace,
  p.span_ns / 1e9 AS value,
  CASE WHEN p.span_ns IS NULL THEN 'no device planes and no host XLA ops (not an XLA/xprof profile)' END AS reason,
  p.span_source,
  p.all_events_span_ns / 1e9 AS all_events_span_s
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN per_trace AS p USING (trace)
