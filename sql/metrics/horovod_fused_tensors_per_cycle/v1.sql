-- metric: horovod_fused_tensors_per_cycle
-- version: 1
-- unit: count
-- grain: trace
-- category: communication
-- family: collectives
-- see_also: horovod_tensor_comm_time, horovod_phase_share
-- polarity: higher
-- summary: value
-- description: Mean number of tensors Horovod processed per cycle of its background loop (tensor operations starting in the cycle), over the cycles that processed any.
-- needs: a Horovod timeline with cycle markers (HOROVOD_TIMELINE_MARK_CYCLES=1)
-- applies_if: format horovod | no Horovod timeline
-- columns:
--   cycles       cycles with any operation
--   max_tensors  the most tensors in one cycle
--   ops          tensor operations counted
-- A cycle runs from one CYCLE_START marker to the next (the last: to the end of the
-- last operation). Horovod negotiates, then fuses into one collective (up to
-- HOROVOD_FUSION_THRESHOLD bytes) the tensors that are ready in a cycle, so more
-- tensors per cycle means fewer, larger collectives. Details: cycles (with any
-- operation), max_tensors, ops.
WITH per_cycle AS (
  SELECT c.trace, c.cycle, count(DISTINCT o.pid) AS tensors, count(*) AS ops
  FROM horovod_cycles AS c
  JOIN horovod_ops AS o
    ON o.trace = c.trace AND o.rank = c.rank AND o.ts_ns >= c.ts_ns AND o.ts_ns < c.end_ns
  GROUP BY ALL
),
per_trace AS (
  SELECT trace, avg(tensors) AS mean_tensors, count(*) AS cycles, max(tensors) AS max_tensors, sum(ops) AS ops
  FROM per_cycle
  GROUP BY trace
)
SELECT
  s.trace,
  p.mean_tensors AS value,
  CASE
    WHEN p.trace IS NOT NULL THEN NULL
    WHEN s.trace IN (SELECT trace FROM horovod_cycles) THEN 'no tensor operation inside a cycle'
    WHEN s.trace IN (SELECT trace FROM horovod_ops) THEN 'no CYCLE_START markers (set HOROVOD_TIMELINE_MARK_CYCLES=1)'
    ELSE 'no Horovod timeline'
  END AS reason,
  p.cycles,
  p.max_tensors,
  p.ops
FROM (SELECT DISTINCT trace FROM metric_scope) AS s
LEFT JOIN per_trace AS p USING (trace)
