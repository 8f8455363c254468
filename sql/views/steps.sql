-- Training/inference steps, from whichever record of them a rank has, and the step
-- each GPU activity belongs to.
-- requires: kernel_classes, xla

-- One row per (trace, rank, step). Per (trace, rank) the first source it has wins:
--   cpu_annotation       `ProfilerStep#N` on the CPU track (what `prof.step()`
--                        records: a user_annotation, a cpu_op in older PyTorch)
--   gpu_annotation       `ProfilerStep#N` on the GPU annotation track
--                        (gpu_user_annotation), for ranks without CPU-track steps
--   xla_device_steps, xla_host_annotation, xla_step_markers, xla_module_runs
--                        the steps of an XLA profile (`xla_steps`, whose own
--                        precedence picks one of these per rank)
-- `step` is N (the XLA step number). A step recorded on several tracks (threads,
-- streams, XLA device planes) is ONE row from its first start to its last end:
-- an XLA step ends when its slowest device ends. `records` = how many step
-- records were merged into the row (one per thread, stream or device plane).
CREATE OR REPLACE VIEW steps AS
WITH kineto AS (
  SELECT
    trace,
    rank,
    CASE WHEN cat = 'gpu_user_annotation' THEN 'gpu_annotation' ELSE 'cpu_annotation' END AS source,
    TRY_CAST(regexp_extract(name, 'ProfilerStep\s*#\s*(\d+)', 1) AS BIGINT) AS step,
    ts_ns,
    end_ns
  FROM slices
  WHERE cat IN ('user_annotation', 'cpu_op', 'gpu_user_annotation')
    AND regexp_matches(name, '^ProfilerStep\s*#\s*\d+')
    AND dur_ns IS NOT NULL
),
candidates AS (
  SELECT
    trace, rank, source, step, min(ts_ns) AS ts_ns, max(end_ns) AS end_ns,
    count(*) AS records,
    CASE source WHEN 'cpu_annotation' THEN 1 ELSE 2 END AS preference
  FROM kineto
  GROUP BY ALL
  UNION ALL
  SELECT
    trace, rank, 'xla_' || any_value(source) AS source, step, min(ts_ns), max(end_ns),
    count(*) AS records, 3 AS preference
  FROM xla_steps
  WHERE step IS NOT NULL
  GROUP BY trace, rank, step
),
chosen AS (
  SELECT trace, rank, min(preference) AS preference
  FROM candidates
  GROUP BY ALL
)
SELECT c.trace, c.rank, c.step, c.ts_ns, c.end_ns, c.end_ns - c.ts_ns AS dur_ns, c.source, c.records
FROM candidates AS c
JOIN chosen AS h ON h.trace = c.trace AND h.rank = c.rank AND h.preference = c.preference;

-- The runtime call (cudaLaunchKernel, cudaMemcpyAsync, ...) that launched each
-- GPU activity, matched on the CUPTI correlation id within one rank.
CREATE OR REPLACE VIEW gpu_launches AS
SELECT trace, rank, correlation, min(ts_ns) AS launch_ns
FROM slices
WHERE cat IN ('cuda_runtime', 'cuda_driver', 'hip_runtime', 'mtia_runtime', 'xpu_runtime', 'privateuse1_runtime')
  AND correlation IS NOT NULL
GROUP BY ALL;

-- Every GPU activity classified by kernel_class_rules `rules_version`, with the
-- step it belongs to (NULL when none, or the rank has no steps):
--   * CPU-track steps (cpu_annotation): the step whose CPU span contains the
--     activity's LAUNCH (the runtime call with its correlation id), as HTA does: a
--     kernel that runs after its step ended still belongs to the step that issued
--     it; NULL when the launch is not in the trace.
--   * GPU-track steps (gpu_annotation): the step whose GPU span contains the
--     activity's START (the annotation is on the GPU timeline already).
-- `launch_ns` is the launch time when known. (One equality join with the time
-- compared as a residual, as before GPU-track steps: an ASOF join sorted every
-- activity with all its columns, a time picked per step in the join condition
-- defeated the plan, and a MATERIALIZED CTE of the steps stopped DuckDB from
-- pruning the activities' columns; so the rank's step source is looked up first,
-- from `steps` itself.)
CREATE OR REPLACE MACRO gpu_ops_steps_with(rules_version) AS TABLE
SELECT a.* EXCLUDE (_step_time_ns), s.step
FROM (
  SELECT
    o.*,
    l.launch_ns,
    CASE WHEN b.source = 'gpu_annotation' THEN o.ts_ns ELSE l.launch_ns END AS _step_time_ns
  FROM gpu_ops_classified_with(rules_version) AS o
  LEFT JOIN gpu_launches AS l USING (trace, rank, correlation)
  LEFT JOIN (SELECT DISTINCT trace, rank, source FROM steps) AS b
    ON b.trace = o.trace AND b.rank = o.rank
) AS a
LEFT JOIN steps AS s
  ON s.trace = a.trace AND s.rank = a.rank AND s.source IN ('cpu_annotation', 'gpu_annotation')
  AND a._step_time_ns >= s.ts_ns AND a._step_time_ns < s.end_ns;

-- Version 1 of gpu_ops_steps_with, for ad-hoc queries.
CREATE OR REPLACE VIEW gpu_ops_steps AS
SELECT * FROM gpu_ops_steps_with(1);
