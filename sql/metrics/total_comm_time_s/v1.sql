-- metric: total_comm_time_s
-- version: 1
-- unit: s
-- grain: trace
-- category: communication
-- family: communication
-- see_also: total_communication_time, traffic_window, allreduce_comm_time_s, avg_comm_kernel_time_s, comm_kernel_breakdown_tpu
-- polarity: lower
-- summary: value
-- description: Sum of the device time of collective XLA ops over all devices (an async start/done pair counts from start to done), in seconds.
-- needs: XLA ops on device planes (or host XLA ops of a host-only profile)
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- columns:
--   comm_ops      collective XLA ops counted
--   devices       XLA devices
--   per_device_s  the value / devices, s
-- Definition: sum of xla_ops.device_ps over ops with op_kind = 'comm': device_duration_ps
-- (else dur) of synchronous collectives; for an async `-start`/`-done` pair, the
-- span from the start's ts to the done's end, counted once (the transfer runs
-- between the two, overlapped with the ops in between). All devices added up.
-- Differs from CCL-Bench group 21: only device-plane XLA ops count (no host
-- events whose names mention a collective); async pairs count their whole span
-- once, where group 21 adds the two halves' own (short) device times; no merging
-- across devices, as in group 21.
WITH per_trace AS (
  SELECT d.trace, sum(d.comm_ps) AS comm_ps, sum(d.comm_ops) AS comm_ops, count(*) AS devices
  FROM xla_device_totals AS d
  JOIN metric_scope AS m USING (trace, rank)
  GROUP BY d.trace
)
SELECT
  x.trace,
  p.comm_ps / 1e12 AS value,
  x.no_ops_reason AS reason,
  p.comm_ops,
  p.devices,
  p.comm_ps / 1e12 / p.devices AS per_device_s
FROM xla_scope_ops(metric_scope) AS x
LEFT JOIN per_trace AS p USING (trace)
