-- metric: coll_call_num
-- version: 1
-- unit: count
-- grain: step
-- summary: mean
-- description: Communication kernels launched per rank per step (ncclKernel_*, ncclDevKernel_*, and every other kernel classed comm).
-- needs: ProfilerStep#N annotations, GPU kernels with launch correlation
-- A kernel belongs to the step whose CPU span contains its launch (see the
-- `gpu_ops_steps` view). Steps without communication count 0. CCL-Bench counted
-- rank 0's whole trace; the per-step count is comparable across profiling windows.
WITH per_step AS (
  SELECT s.trace, s.rank, s.step, count(o.kernel_class) AS comm_kernels
  FROM steps AS s
  LEFT JOIN gpu_ops_steps AS o
    ON o.trace = s.trace AND o.rank = s.rank AND o.step = s.step
    AND o.kind = 'kernel' AND o.kernel_class = 'comm'
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.step,
  p.comm_kernels AS value,
  CASE WHEN p.step IS NULL THEN 'no ProfilerStep annotations' END AS reason
FROM metric_scope AS m
LEFT JOIN per_step AS p USING (trace, rank)
