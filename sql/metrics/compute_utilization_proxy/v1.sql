-- metric: compute_utilization_proxy
-- version: 1
-- unit: ratio
-- grain: trace
-- category: compute
-- family: efficiency
-- see_also: aggregate_gpu_utilization, mean_sm_coverage, hta_temporal_breakdown
-- polarity: higher
-- summary: value
-- ccl_bench_unit: ratio
-- description: Mean over devices of the share of the device's active span spent in compute XLA ops, 0..1.
-- needs: XLA ops on device planes (or host XLA ops of a host-only profile)
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- columns:
--   devices       XLA devices averaged
--   min_fraction  the lowest device's compute fraction
--   max_fraction  the highest device's compute fraction
-- Definition (view xla_device_totals): per device, sum of compute ops' device time
-- / (last op end - first op start on that device); the value is the mean over the
-- trace's devices. Not clipped: device_duration_ps may exceed an op's span only
-- through profiler rounding.
-- Differs from CCL-Bench group 21: always per device (group 21 divides by the
-- whole-trace wall time when there is a single pid), the device span covers its
-- XLA ops only (group 21: every X event of the pid, other lines included), and
-- host threads are never devices.
WITH per_device AS (
  SELECT d.trace, d.compute_ps / 1e3 / d.span_ns AS fraction
  FROM xla_device_totals AS d
  JOIN metric_scope AS m USING (trace, rank)
  WHERE d.span_ns > 0
),
per_trace AS (
  SELECT trace, avg(fraction) AS mean_fraction, min(fraction) AS min_fraction, max(fraction) AS max_fraction,
         count(*) AS devices
  FROM per_device
  GROUP BY trace
)
SELECT
  x.trace,
  p.mean_fraction AS value,
  coalesce(x.no_ops_reason, CASE WHEN p.devices IS NULL THEN 'no device with a positive op span' END) AS reason,
  p.devices,
  p.min_fraction,
  p.max_fraction
FROM xla_scope_ops(metric_scope) AS x
LEFT JOIN per_trace AS p USING (trace)
