-- metric: num_comm_kernels
-- version: 1
-- unit: count
-- grain: trace
-- category: collectives
-- family: collectives
-- see_also: num_comm_kernels_w_size_and_time, coll_call_num
-- polarity: neutral
-- summary: value
-- description: Number of collective XLA ops executed on all devices of the profile (an async start/done pair counts once).
-- needs: XLA ops on device planes (or host XLA ops of a host-only profile)
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- columns:
--   devices  XLA device planes the ops ran on
-- Definition: count of xla_ops rows with op_kind = 'comm', all devices, the whole
-- profile. 0 when the profile has XLA ops but no collective.
-- Differs from CCL-Bench group 21: device ops only, and an async pair is one
-- collective where group 21's substring match counts `-start` and `-done` (2).
WITH per_trace AS (
  SELECT o.trace, count(*) FILTER (WHERE o.op_kind = 'comm') AS comm_ops, count(DISTINCT o.pid || ':' || coalesce(o.device, -1)) AS devices
  FROM xla_ops AS o
  JOIN metric_scope AS m USING (trace, rank)
  GROUP BY o.trace
)
SELECT
  x.trace,
  p.comm_ops AS value,
  x.no_ops_reason AS reason,
  p.devices
FROM xla_scope_ops(metric_scope) AS x
LEFT JOIN per_trace AS p USING (trace)
