-- The rows of the metric coll_call_num (sql/metrics/coll_call_num/v*.sql, whose
-- headers document them), ONE body for all its versions: its versions differ only in
-- the rules version (`rules_version`) of the steps (step_marker_rules), the kernel
-- classes and the CPU-side collective ops (kernel_class_rules), all the same number,
-- and in the 'no steps' reason that names the step markers of that version
-- (`no_steps_reason`). `scope` is the (trace, rank) relation to measure (the metric
-- passes `metric_scope`). A released version's rows never change: this body is frozen
-- with the metric files (sql/metrics/CHECKSUMS).
-- requires: steps, kernel_classes, gpu, xla
CREATE OR REPLACE MACRO coll_call_num_rows(rules_version, scope) AS TABLE
WITH step_list AS (
  SELECT trace, rank, step, ts_ns, end_ns, source FROM steps_with(rules_version)
),
gpu_ranks AS (
  SELECT DISTINCT trace, rank FROM gpu_ops WHERE kind = 'kernel'
),
xla_ranks AS (
  SELECT trace, rank, count(DISTINCT (pid, device)) AS devices FROM xla_ops GROUP BY ALL
),
cpu_scope AS (
  -- CPU-side collectives are counted only where there is nothing on a device
  SELECT trace, rank FROM query_table(scope)
  EXCEPT SELECT trace, rank FROM gpu_ranks
  EXCEPT SELECT trace, rank FROM xla_ranks
),
cpu_calls AS (
  SELECT trace, rank, ts_ns FROM cpu_collective_calls_with(rules_version, cpu_scope)
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
  FROM query_table(scope) AS m
  LEFT JOIN gpu_ranks AS g USING (trace, rank)
  LEFT JOIN xla_ranks AS x USING (trace, rank)
  LEFT JOIN cpu_ranks AS c USING (trace, rank)
),
gpu_counts AS (
  -- no `step IS NOT NULL` filter: the join on step below drops unattributed kernels
  SELECT trace, rank, step, count(*) AS calls
  FROM gpu_ops_steps_of(rules_version, rules_version)
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
    WHEN r.rank IS NULL THEN no_steps_reason(rules_version)
  END AS reason,
  b.source,
  p.step_source,
  p.comm_ops,
  CASE WHEN b.source = 'xla_ops' THEN b.devices END AS devices
FROM query_table(scope) AS m
LEFT JOIN basis AS b USING (trace, rank)
LEFT JOIN ranks_with_steps AS r USING (trace, rank)
LEFT JOIN per_step AS p USING (trace, rank);
