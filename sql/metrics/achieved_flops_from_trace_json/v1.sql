-- metric: achieved_flops_from_trace_json
-- version: 1
-- unit: FLOP/s
-- grain: trace
-- category: compute
-- family: efficiency
-- see_also: mfu, total_model_flops_from_args
-- polarity: higher
-- summary: value
-- description: Model FLOPs per second of device time over the XLA ops that report model_flops: sum(model_flops) / sum(device time), in FLOP/s.
-- needs: XLA ops with model_flops > 0 and device time > 0
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- columns:
--   ops            XLA ops with model_flops > 0 and a device time
--   model_flops    their summed model FLOPs
--   device_time_s  their summed device time, s
-- Definition: over xla_ops with model_flops > 0 and device_ps > 0 (every device):
-- sum(model_flops) / sum(device_ps / 1e12). Summing over devices makes it the
-- per-device rate while busy with those ops. As CCL-Bench group 21, apart from
-- the op set (device ops only; group 21 takes any X event with both fields).
WITH per_trace AS (
  SELECT o.trace, sum(o.model_flops) AS model_flops, sum(o.device_ps) AS device_ps, count(*) AS ops
  FROM xla_ops AS o
  JOIN metric_scope AS m USING (trace, rank)
  WHERE o.model_flops > 0 AND o.device_ps > 0
  GROUP BY o.trace
)
SELECT
  x.trace,
  p.model_flops / (p.device_ps / 1e12) AS value,
  coalesce(x.no_ops_reason, CASE WHEN p.ops IS NULL THEN 'no XLA op with model_flops > 0 and device time' END) AS reason,
  p.ops,
  p.model_flops,
  p.device_ps / 1e12 AS device_time_s
FROM xla_scope_ops(metric_scope) AS x
LEFT JOIN per_trace AS p USING (trace)
