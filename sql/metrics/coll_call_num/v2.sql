-- metric: coll_call_num
-- version: 2
-- unit: count
-- grain: step
-- category: collectives
-- polarity: neutral
-- summary: mean
-- description: Collective calls per rank and step: communication kernels (GPU ranks), else collective XLA ops per device plane (XLA), else outermost CPU-side collective ops (CPU-only ranks).
-- needs: steps (ProfilerStep#N on the CPU or GPU track, inference engine iterations, or XLA steps), and GPU kernels, CPU-side collective ops or XLA ops
-- params: none
-- Definition, per (rank, step) of the `steps` view; `source` says what was counted
-- (the first the rank has):
--   gpu_kernels  the rank has GPU kernels: its kernels that kernel_class_rules v2
--                calls comm (ncclDevKernel_*, ncclKernel_*, DeepEP's exchange
--                kernels, every other comm kernel), each in the step that issued
--                it (`gpu_ops_steps_of(2, 2)`: launch inside the CPU-side step
--                span, engine iterations included; start inside the GPU step
--                span with GPU-track steps only). A step without comm kernels counts 0.
--   xla_ops      the rank has XLA ops: its collective XLA ops (xla_ops, op_kind
--                comm; an async -start/-done pair is ONE op) per device plane: the
--                ops whose start lies in the plane's step (device Steps line or
--                module runs per plane; host step annotations for every plane),
--                summed over the rank's device planes and divided by their number
--                (`devices`), so the value is what one device issued, as one GPU's
--                kernels are; `comm_ops` is the sum over planes.
--   cpu_ops      no GPU kernels and no XLA ops, but CPU-side collective ops
--                (kernel_class_rules v2 'cpu_op' rules, the same as v1: c10d::*,
--                record_param_comms, nccl:*, gloo:*): the outermost typed op of each
--                nest on a thread (`cpu_collective_calls_with(2, ...)`: c10d::allreduce_ >
--                record_param_comms > nccl:all_reduce is one call; waits are none),
--                in the step whose span contains its start (`cpu_collective_calls_with`
--                runs for these ranks only).
-- A rank with none of the three (steps only) or without steps is not applicable,
-- with the reason; never 0 for "does not apply".
-- Differs from version 1: steps of step_marker_rules v2 (`steps_with(2)`: engine
-- iterations of vLLM/SGLang where a rank has no ProfilerStep#N) and
-- kernel_class_rules v2 (DeepEP's notify/cached-notify/barrier kernels count,
-- get_dispatch_layout does not).
-- Differs from CCL-Bench: CCL-Bench counts rank 0's whole kineto_trace_0.json
-- (kernel names starting ncclDevKernel_ AllReduce/ReduceScatter/AllGather/
-- Broadcast/Reduce/SendRecv only, not ncclKernel_*), not per step, and has no CPU
-- or XLA variant; here every rank, per step, with the shared classification.
WITH step_list AS (
  SELECT trace, rank, step, ts_ns, end_ns, source FROM steps_with(2)
),
gpu_ranks AS (
  SELECT DISTINCT trace, rank FROM gpu_ops WHERE kind = 'kernel'
),
xla_ranks AS (
  SELECT trace, rank, count(DISTINCT (pid, device)) AS devices FROM xla_ops GROUP BY ALL
),
cpu_scope AS (
  -- CPU-side collectives are counted only where there is nothing on a device
  SELECT trace, rank FROM metric_scope
  EXCEPT SELECT trace, rank FROM gpu_ranks
  EXCEPT SELECT trace, rank FROM xla_ranks
),
cpu_calls AS (
  SELECT trace, rank, ts_ns FROM cpu_collective_calls_with(2, cpu_scope)
),
cpu_ranks AS (
  SELECT DISTINCT trace, rank FROM cpu_calls
),
basis AS (
  SELECT
    m.trace,
    m.rank,
    CASE
      WHEN g.rank IS NOT NULL THEN 'gpu_kernels'
      WHEN x.rank IS NOT NULL THEN 'xla_ops'
      WHEN c.rank IS NOT NULL THEN 'cpu_ops'
    END AS source,
    x.devices
  FROM metric_scope AS m
  LEFT JOIN gpu_ranks AS g USING (trace, rank)
  LEFT JOIN xla_ranks AS x USING (trace, rank)
  LEFT JOIN cpu_ranks AS c USING (trace, rank)
),
gpu_counts AS (
  -- no `step IS NOT NULL` filter: the join on step below drops unattributed kernels
  SELECT trace, rank, step, count(*) AS calls
  FROM gpu_ops_steps_of(2, 2)
  WHERE kind = 'kernel' AND kernel_class = 'comm'
  GROUP BY ALL
),
cpu_counts AS (
  SELECT s.trace, s.rank, s.step, count(*) AS calls
  FROM cpu_calls AS c
  JOIN step_list AS s
    ON s.trace = c.trace AND s.rank = c.rank AND c.ts_ns >= s.ts_ns AND c.ts_ns < s.end_ns
  GROUP BY ALL
),
xla_step_spans AS (
  -- per device plane where the steps are (device Steps line, module runs); one
  -- span for all planes where they are on the host
  SELECT trace, rank, pid, step, ts_ns, end_ns
  FROM xla_steps
  WHERE source IN ('device_steps', 'module_runs')
  UNION ALL
  SELECT trace, rank, NULL AS pid, step, min(ts_ns), max(end_ns)
  FROM xla_steps
  WHERE source NOT IN ('device_steps', 'module_runs')
  GROUP BY trace, rank, step
),
xla_counts AS (
  SELECT x.trace, x.rank, x.step, count(*) AS calls
  FROM xla_ops AS o
  JOIN xla_step_spans AS x
    ON x.trace = o.trace AND x.rank = o.rank AND (x.pid IS NULL OR x.pid = o.pid)
    AND o.ts_ns >= x.ts_ns AND o.ts_ns < x.end_ns
  WHERE o.op_kind = 'comm'
  GROUP BY ALL
),
per_step AS (
  SELECT
    s.trace,
    s.rank,
    s.step,
    s.source AS step_source,
    b.source,
    CASE b.source
      WHEN 'gpu_kernels' THEN coalesce(g.calls, 0)
      WHEN 'xla_ops' THEN coalesce(x.calls, 0) / b.devices
      WHEN 'cpu_ops' THEN coalesce(c.calls, 0)
    END AS value,
    CASE WHEN b.source = 'xla_ops' THEN coalesce(x.calls, 0) END AS comm_ops,
    b.devices
  FROM step_list AS s
  JOIN basis AS b USING (trace, rank)
  LEFT JOIN gpu_counts AS g
    ON b.source = 'gpu_kernels' AND g.trace = s.trace AND g.rank = s.rank AND g.step = s.step
  LEFT JOIN xla_counts AS x
    ON b.source = 'xla_ops' AND x.trace = s.trace AND x.rank = s.rank AND x.step = s.step
  LEFT JOIN cpu_counts AS c
    ON b.source = 'cpu_ops' AND c.trace = s.trace AND c.rank = s.rank AND c.step = s.step
  WHERE b.source IS NOT NULL
),
ranks_with_steps AS (
  SELECT DISTINCT trace, rank FROM step_list
)
SELECT
  m.trace,
  m.rank,
  p.step,
  p.value,
  CASE
    WHEN b.source IS NULL THEN 'no GPU kernels, no CPU-side collective ops and no XLA ops'
    WHEN r.rank IS NULL THEN 'no steps (no ProfilerStep#N annotations, no inference engine iterations, no XLA steps)'
  END AS reason,
  b.source,
  p.step_source,
  p.comm_ops,
  CASE WHEN b.source = 'xla_ops' THEN b.devices END AS devices
FROM metric_scope AS m
LEFT JOIN basis AS b USING (trace, rank)
LEFT JOIN ranks_with_steps AS r USING (trace, rank)
LEFT JOIN per_step AS p USING (trace, rank)
