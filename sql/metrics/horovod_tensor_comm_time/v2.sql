-- metric: horovod_tensor_comm_time
-- version: 2
-- unit: s
-- grain: trace
-- category: communication
-- family: communication
-- see_also: horovod_phase_share, horovod_fused_tensors_per_cycle
-- polarity: lower
-- summary: sum
-- description: Communication time of each tensor in a Horovod timeline: the seconds of its NCCL/MPI/Gloo/oneCCL collective phases over all its operations (one row per tensor).
-- needs: a Horovod timeline (HOROVOD_TIMELINE)
-- applies_if: format horovod | no Horovod timeline
-- columns:
--   tensor         the tensor (Horovod timeline process)
--   ops            operations of the tensor
--   bytes          their output bytes
--   op             the operation types
--   negotiation_s  time in negotiation, s
-- The communication phases are horovod_phases with category 'communication'. A
-- collective that fuses several tensors is counted for each of them (their spans
-- are identical), so the `python -m cclq.main` summary (the sum over tensors) is
-- tensor-time, not wall time. Details: tensor, ops (operations of the tensor),
-- bytes (their output bytes), op (the operation types), negotiation_s.
-- Version 2: a trace without a Horovod timeline has a NULL value (and the reason),
-- not 0 (version 1 gave 0.0, which `python -m cclq.main` printed as a measurement).
WITH per_tensor AS (
  SELECT
    trace, tensor,
    sum(dur_ns) FILTER (WHERE category = 'communication') AS comm_ns,
    sum(dur_ns) FILTER (WHERE category = 'negotiation') AS negotiation_ns
  FROM horovod_phases
  WHERE trace IN (SELECT trace FROM metric_scope)
  GROUP BY ALL
),
ops AS (
  SELECT trace, tensor, count(*) AS ops, sum(bytes) AS bytes, string_agg(DISTINCT op, ',' ORDER BY op) AS op
  FROM horovod_ops
  GROUP BY ALL
)
SELECT
  s.trace,
  CASE WHEN t.trace IS NOT NULL THEN coalesce(t.comm_ns, 0) / 1e9 END AS value,
  CASE WHEN t.trace IS NULL THEN 'no Horovod timeline' END AS reason,
  t.tensor,
  o.ops,
  o.bytes,
  o.op,
  t.negotiation_ns / 1e9 AS negotiation_s
FROM (SELECT DISTINCT trace FROM metric_scope) AS s
LEFT JOIN per_tensor AS t USING (trace)
LEFT JOIN ops AS o ON o.trace = t.trace AND o.tensor IS NOT DISTINCT FROM t.tensor
ORDER BY s.trace, t.tensor
