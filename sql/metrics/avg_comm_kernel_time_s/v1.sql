-- metric: avg_comm_kernel_time_s
-- version: 1
-- unit: s
-- grain: trace
-- category: communication
-- family: communication
-- see_also: total_comm_time_s, allreduce_comm_time_s, comm_kernel_breakdown_tpu
-- polarity: lower
-- summary: value
-- description: Mean device time of one collective XLA op (an async start/done pair is one op, start to done), in seconds.
-- needs: collective XLA ops on device planes
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- columns:
--   comm_ops  collective XLA ops averaged
-- Definition: mean of xla_ops.device_ps over ops with op_kind = 'comm', every
-- device. Differs from CCL-Bench group 21 (mean over comm-named X events,
-- host included): device ops only, and an async pair is one op with its span.
WITH per_trace AS (
  SELECT o.trace, avg(o.device_ps) AS mean_ps, count(*) AS comm_ops
  FROM xla_ops AS o
  JOIN metric_scope AS m USING (trace, rank)
  WHERE o.op_kind = 'comm'
  GROUP BY o.trace
)
SELECT
  x.trace,
  p.mean_ps / 1e12 AS value,
  coalesce(x.no_ops_reason, CASE WHEN p.comm_ops IS NULL THEN 'no collective XLA ops' END) AS reason,
  p.comm_ops
FROM xla_scope_ops(metric_scope) AS x
LEFT JOIN per_trace AS p USING (trace)
