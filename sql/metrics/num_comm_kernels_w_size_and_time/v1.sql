-- metric: num_comm_kernels_w_size_and_time
-- version: 1
-- unit: count
-- grain: trace
-- category: collectives
-- family: collectives
-- see_also: num_comm_kernels, coll_call_num
-- polarity: neutral
-- summary: value
-- description: Number of collective XLA ops with a known message size (> 0 bytes) and device time (> 0): the samples bandwidth and Hockney metrics use.
-- needs: XLA ops on device planes (or host XLA ops of a host-only profile)
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- columns:
--   comm_ops  all collective XLA ops, sized or not
-- Definition: count of xla_ops rows with op_kind = 'comm', message_bytes > 0 and
-- device_ps > 0. message_bytes: result shape (shape_with_layout; a tuple sums its
-- arrays; a pair uses the done's shape), else raw_bytes_accessed, else
-- bytes_accessed. Group 21 parses only a leading array shape (a tuple falls back
-- to the bytes-accessed arguments) and counts both halves of an async pair.
WITH per_trace AS (
  SELECT
    o.trace,
    count(*) FILTER (WHERE o.op_kind = 'comm' AND o.message_bytes > 0 AND o.device_ps > 0) AS sized_comm_ops,
    count(*) FILTER (WHERE o.op_kind = 'comm') AS comm_ops
  FROM xla_ops AS o
  JOIN metric_scope AS m USING (trace, rank)
  GROUP BY o.trace
)
SELECT
  x.trace,
  p.sized_comm_ops AS value,
  x.no_ops_reason AS reason,
  p.comm_ops
FROM xla_scope_ops(metric_scope) AS x
LEFT JOIN per_trace AS p USING (trace)
