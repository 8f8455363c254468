-- metric: total_model_flops_from_args
-- version: 1
-- unit: FLOP
-- grain: trace
-- category: compute
-- family: efficiency
-- see_also: mfu, achieved_flops_from_trace_json
-- polarity: neutral
-- summary: value
-- description: Sum of the model_flops argument over the XLA ops of all devices (the model FLOPs the profile executed).
-- needs: XLA ops carrying model_flops
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- columns:
--   ops_with_model_flops  ops with a model_flops argument
-- Definition: sum(xla_ops.model_flops) over every device. Not applicable when no
-- op carries model_flops (CCL-Bench group 21 reports 0 there, and sums the
-- argument over every X event, host included).
WITH per_trace AS (
  SELECT o.trace, sum(o.model_flops) AS model_flops, count(o.model_flops) AS ops_with_model_flops
  FROM xla_ops AS o
  JOIN metric_scope AS m USING (trace, rank)
  GROUP BY o.trace
)
SELECT
  x.trace,
  p.model_flops AS value,
  coalesce(x.no_ops_reason, CASE WHEN coalesce(p.ops_with_model_flops, 0) = 0 THEN 'no XLA op carries model_flops' END) AS reason,
  p.ops_with_model_flops
FROM xla_scope_ops(metric_scope) AS x
LEFT JOIN per_trace AS p USING (trace)
