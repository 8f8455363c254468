-- metric: allreduce_comm_time_s
-- version: 1
-- unit: s
-- grain: trace
-- category: communication
-- family: communication
-- see_also: total_comm_time_s, avg_comm_kernel_time_s, comm_kernel_breakdown_tpu
-- polarity: lower
-- summary: value
-- description: Sum of the device time of all-reduce XLA ops with a known message size, over all devices, in seconds.
-- needs: all-reduce XLA ops with message size and device time
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- columns:
--   allreduce_ops  all-reduce XLA ops counted
-- Definition: sum of xla_ops.device_ps over ops with op_kind = 'comm', coll_type =
-- 'all_reduce' (hlo_category all-reduce / all-reduce fusion, names all-reduce.N,
-- psum.N, ...; async pairs start to done), message_bytes > 0 and device_ps > 0.
-- Not applicable when there is none (group 21: NaN).
-- Differs from CCL-Bench group 21 (name regex allreduce|all-reduce|all_reduce over
-- every X event): device ops only, category-based typing, JAX `psum` names included.
WITH per_trace AS (
  SELECT o.trace, sum(o.device_ps) AS device_ps, count(*) AS ops
  FROM xla_ops AS o
  JOIN metric_scope AS m USING (trace, rank)
  WHERE o.op_kind = 'comm' AND o.coll_type = 'all_reduce' AND o.message_bytes > 0 AND o.device_ps > 0
  GROUP BY o.trace
)
SELECT
  x.trace,
  p.device_ps / 1e12 AS value,
  coalesce(
    x.no_ops_reason,
    CASE WHEN p.ops IS NULL THEN 'no all-reduce XLA ops with message size and device time' END
  ) AS reason,
  p.ops AS allreduce_ops
FROM xla_scope_ops(metric_scope) AS x
LEFT JOIN per_trace AS p USING (trace)
