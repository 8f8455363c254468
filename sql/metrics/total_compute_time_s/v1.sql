-- metric: total_compute_time_s
-- version: 1
-- unit: s
-- grain: trace
-- category: compute
-- family: time
-- see_also: total_kernel_time, kernel_compute_time_group_6
-- polarity: neutral
-- summary: value
-- description: Sum of the device time of compute XLA ops (fusions, convolutions, dots, custom calls) over all devices, in seconds.
-- needs: XLA ops on device planes (or host XLA ops of a host-only profile)
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- columns:
--   devices       XLA devices
--   per_device_s  the value / devices, s
-- Definition: sum of xla_ops.device_ps (device_duration_ps, else the event's dur)
-- over ops with op_kind = 'compute' (xla_op_rules), all devices added up.
-- Differs from CCL-Bench group 21: only device-plane XLA ops count (group 21
-- classifies every X event, host threads included, by substrings of name + cat);
-- the dur fallback is per op (group 21 uses dur only when NO event has
-- device_duration_ps). Like group 21 the devices are summed, not merged or
-- averaged: `per_device_s` is the mean per device.
WITH per_trace AS (
  SELECT d.trace, sum(d.compute_ps) AS compute_ps, count(*) AS devices
  FROM xla_device_totals AS d
  JOIN metric_scope AS m USING (trace, rank)
  GROUP BY d.trace
)
SELECT
  x.trace,
  p.compute_ps / 1e12 AS value,
  x.no_ops_reason AS reason,
  p.devices,
  p.compute_ps / 1e12 / p.devices AS per_device_s
FROM xla_scope_ops(metric_scope) AS x
LEFT JOIN per_trace AS p USING (trace)
