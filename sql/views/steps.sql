-- Training/inference steps, from whichever record of them a rank has, and the step
-- each GPU activity belongs to.
-- (The steps of XLA profiles are added by steps_xla.sql, which `extends` this module:
-- see sql/README.md.)
-- requires: kernel_classes

-- The records that mark a step, ONE versioned table (`step_marker_rules`). Per
-- (trace, rank) the source with the lowest `preference` that the rank has wins.
-- Columns: version, preference, source, cats (the event categories the pattern
-- applies to; NULL = any, for the category-less host events of xprof traces),
-- pattern (RE2, partial match unless anchored).
--   version 1  ProfilerStep#N only (CPU track, else GPU track), then XLA steps.
--   version 2  version 1, and when a rank has no ProfilerStep: the engine
--              iterations of inference servers (`engine_iterations_with`):
--                vllm_execute_context  vLLM's `execute_context_<n>(<tokens>)_
--                                      generation_<m>(<tokens>)` user annotation
--                                      (GPU worker, one per scheduler iteration)
--                vllm_execute_model    the model runner's execute_model Python
--                                      frame (with_stack traces without the
--                                      annotation)
--                sglang_run_batch      SGLang Scheduler.run_batch Python frame
--                sglang_forward_batch  SGLang TpModelWorker.forward_batch_generation
--                vllm_tpu_core_step    vLLM-TPU's EngineCore.step host frame
--                                      (`$core.py:<line> step` in xprof traces)
--              then XLA steps. Idle engine iterations (vLLM
--              execute_context_0(0)_generation_0(0): nothing scheduled, e.g.
--              a KV-connector poll) are not steps.
-- A metric pins the version it was defined with (`steps_with(<version>)`), so
-- new markers never move a released number; the plain `steps` view is the latest.
CREATE OR REPLACE VIEW step_marker_rules AS
WITH profiler_steps AS (
  SELECT * FROM (VALUES
    (1, 'cpu_annotation', ['user_annotation', 'cpu_op'], '^ProfilerStep\s*#\s*\d+'),
    (2, 'gpu_annotation', ['gpu_user_annotation'], '^ProfilerStep\s*#\s*\d+')
  ) AS t(preference, source, cats, pattern)
)
SELECT 1 AS version, * FROM profiler_steps
UNION ALL
SELECT 2, * FROM profiler_steps
UNION ALL
SELECT * FROM (VALUES
  (2, 3, 'vllm_execute_context', ['user_annotation'], '^execute_context_\d+\('),
  (2, 4, 'vllm_execute_model', ['python_function'], '(^|/)[A-Za-z0-9_]*model_runner\.py\(\d+\): execute_model$'),
  (2, 5, 'sglang_run_batch', ['python_function'], '(^|: )run_batch$'),
  (2, 6, 'sglang_forward_batch', ['python_function'], '(^|: )forward_batch_generation$'),
  (2, 7, 'vllm_tpu_core_step', NULL::VARCHAR[], '^\$core\.py:\d+ step$')
) AS t(version, preference, source, cats, pattern);

-- Every slice a step_marker_rules row of `rules_version` matches, with the rule's
-- source and preference (the first matching rule). The rules decide; the WHERE
-- below is only a cheap superset of them that keeps the scan as fast as a plain
-- ProfilerStep filter (a prefix test per event instead of hashing every CPU op
-- name for the rules; engine markers are looked for from version 2 only, so the
-- version-1 steps cost what they did before): a new rule must pass it
-- (tests/query/test_metrics_inference.py checks the shipped ones do). The regexes then
-- run once per distinct (name, cat), not per event (the LATERAL is a delim
-- join, as in gpu_ops_classified_with).
-- batch: shared always
--   read several times over by one query: see steps_with.
CREATE OR REPLACE MACRO _step_markers_with(rules_version) AS TABLE
SELECT s.trace, s.rank, s.pid, s.tid, s.cat, s.name, s.ts_ns, s.end_ns, s.dur_ns, m.source, m.preference
FROM (
  SELECT trace, rank, pid, tid, cat, name, ts_ns, end_ns, dur_ns
  FROM slices
  WHERE dur_ns IS NOT NULL
    AND (
      (cat IN ('user_annotation', 'cpu_op', 'gpu_user_annotation') AND starts_with(name, 'ProfilerStep'))
      OR (rules_version >= 2 AND (
        (cat = 'user_annotation' AND starts_with(name, 'execute_context_'))
        OR (cat = 'python_function'
            AND (suffix(name, 'execute_model') OR suffix(name, 'run_batch') OR suffix(name, 'forward_batch_generation')))
        OR (cat IS NULL AND starts_with(name, '$') AND suffix(name, ' step'))
      ))
    )
) AS s,
LATERAL (
  SELECT arg_min(r.source, r.preference) AS source, min(r.preference) AS preference
  FROM step_marker_rules AS r
  WHERE r.version = rules_version
    AND (r.cats IS NULL OR list_contains(r.cats, s.cat))
    AND regexp_matches(s.name, r.pattern)
) AS m
WHERE m.source IS NOT NULL;

-- One row per engine iteration of an inference server, per rank, from the engine
-- sources of step_marker_rules `rules_version` (preference 3 and up; none in
-- version 1). Per rank the first source it has wins (its lowest preference).
--   iteration       1, 2, ... in start order
--   phase           prefill | decode | mixed | idle | NULL (not recorded):
--                     vLLM: from the annotation's request counts (context
--                     requests: prompts being prefilled; generation requests:
--                     sequences decoding one token); idle when both are 0.
--                     SGLang: from the model runner frames that start inside the
--                     iteration on the rank, forward_extend (prefill),
--                     forward_decode (decode), forward_idle (idle).
--   context_requests, context_tokens, generation_requests, generation_tokens
--                   vLLM's annotation numbers (the first number in each
--                   parenthesis is the token count); NULL elsewhere.
-- batch: shared
CREATE OR REPLACE MACRO engine_iterations_with(rules_version) AS TABLE
WITH marked AS (
  SELECT * FROM _step_markers_with(rules_version) WHERE preference >= 3
),
chosen AS (
  SELECT trace, rank, min(preference) AS preference FROM marked GROUP BY ALL
),
iterations AS (
  SELECT
    m.*,
    row_number() OVER (PARTITION BY m.trace, m.rank ORDER BY m.ts_ns, m.end_ns) AS iteration,
    regexp_extract(
      m.name, '^execute_context_(\d+)\(([^)]*)\)_generation_(\d+)\(([^)]*)\)',
      ['context_requests', 'context_counts', 'generation_requests', 'generation_counts']
    ) AS vllm
  FROM marked AS m
  JOIN chosen AS c USING (trace, rank, preference)
),
sglang_frames AS (
  -- the model runner's per-mode forward frames, for SGLang iterations' phase
  SELECT s.trace, s.rank, s.ts_ns, regexp_extract(s.name, '(^|: )forward_(extend|decode|idle)$', 2) AS mode
  FROM slices AS s
  SEMI JOIN (SELECT DISTINCT trace, rank FROM iterations WHERE source LIKE 'sglang%') AS g USING (trace, rank)
  WHERE s.cat = 'python_function' AND regexp_matches(s.name, '(^|: )forward_(extend|decode|idle)$')
),
sglang_phases AS (
  SELECT
    i.trace, i.rank, i.iteration,
    CASE
      WHEN bool_or(f.mode = 'extend') AND bool_or(f.mode = 'decode') THEN 'mixed'
      WHEN bool_or(f.mode = 'extend') THEN 'prefill'
      WHEN bool_or(f.mode = 'decode') THEN 'decode'
      WHEN bool_or(f.mode = 'idle') THEN 'idle'
    END AS phase
  FROM iterations AS i
  JOIN sglang_frames AS f
    ON f.trace = i.trace AND f.rank = i.rank AND f.ts_ns >= i.ts_ns AND f.ts_ns < i.end_ns
  WHERE i.source LIKE 'sglang%'
  GROUP BY ALL
),
numbers AS (
  SELECT
    *,
    TRY_CAST(nullif(vllm.context_requests, '') AS BIGINT) AS context_requests,
    TRY_CAST(nullif(regexp_extract(vllm.context_counts, '(\d+)', 1), '') AS BIGINT) AS context_tokens,
    TRY_CAST(nullif(vllm.generation_requests, '') AS BIGINT) AS generation_requests,
    TRY_CAST(nullif(regexp_extract(vllm.generation_counts, '(\d+)', 1), '') AS BIGINT) AS generation_tokens
  FROM iterations
)
SELECT
  n.trace,
  n.rank,
  n.iteration,
  n.ts_ns,
  n.end_ns,
  n.dur_ns,
  n.source,
  CASE
    WHEN n.source = 'vllm_execute_context' THEN
      CASE
        WHEN n.context_requests > 0 AND n.generation_requests > 0 THEN 'mixed'
        WHEN n.context_requests > 0 THEN 'prefill'
        WHEN n.generation_requests > 0 THEN 'decode'
        WHEN n.context_requests = 0 AND n.generation_requests = 0 THEN 'idle'
      END
    ELSE p.phase
  END AS phase,
  n.context_requests,
  n.context_tokens,
  n.generation_requests,
  n.generation_tokens,
  n.name,
  n.pid,
  n.tid
FROM numbers AS n
LEFT JOIN sglang_phases AS p USING (trace, rank, iteration);

-- The engine iterations of the latest rules (version 2).
CREATE OR REPLACE VIEW engine_iterations AS
SELECT * FROM engine_iterations_with(2);

-- Extension point: steps from other records than step_marker_rules' (the steps of
-- an XLA profile, steps_xla.sql), one row per (trace, rank, step) in the columns
-- below, with a `preference` after every rule's (a rank's rule steps win). Empty
-- here; a module that extends this one replaces it.
CREATE OR REPLACE VIEW _steps_extra AS
SELECT
  NULL::VARCHAR AS trace, NULL::INTEGER AS rank, NULL::VARCHAR AS source, NULL::BIGINT AS step,
  NULL::BIGINT AS ts_ns, NULL::BIGINT AS end_ns, NULL::BIGINT AS records, NULL::INTEGER AS preference,
  NULL::VARCHAR AS phase
WHERE false;

-- One row per (trace, rank, step) by step_marker_rules `rules_version`. Per
-- (trace, rank) the first source it has wins:
--   cpu_annotation       `ProfilerStep#N` on the CPU track (what `prof.step()`
--                        records: a user_annotation, a cpu_op in older PyTorch)
--   gpu_annotation       `ProfilerStep#N` on the GPU annotation track
--                        (gpu_user_annotation), for ranks without CPU-track steps
--   vllm_execute_context, vllm_execute_model, sglang_run_batch,
--   sglang_forward_batch, vllm_tpu_core_step
--                        (version 2) engine iterations (`engine_iterations_with`),
--                        idle ones left out; `step` = the iteration number
--   xla_device_steps, xla_host_annotation, xla_step_markers, xla_module_runs
--                        the steps of an XLA profile (`xla_steps`, whose own
--                        precedence picks one of these per rank)
-- `step` is N (the XLA step number). A step recorded on several tracks (threads,
-- streams, XLA device planes) is ONE row from its first start to its last end:
-- an XLA step ends when its slowest device ends. `records` = how many step
-- records were merged into the row (one per thread, stream or device plane).
-- `phase` (engine iterations only): prefill | decode | mixed | NULL.
-- batch: shared always
--   (with _step_markers_with) coll_call_num planned steps_with six times (12
--   regex-rule joins, 69 scans); stored, 2.05 -> 0.87 CPU s on a 32 MB rank.
CREATE OR REPLACE MACRO steps_with(rules_version) AS TABLE
WITH kineto AS (
  SELECT
    trace,
    rank,
    source,
    preference,
    TRY_CAST(regexp_extract(name, 'ProfilerStep\s*#\s*(\d+)', 1) AS BIGINT) AS step,
    ts_ns,
    end_ns
  FROM _step_markers_with(rules_version)
  WHERE preference < 3
),
candidates AS MATERIALIZED (  -- read twice: for the preferred source, and the result
  SELECT
    trace, rank, source, step, min(ts_ns) AS ts_ns, max(end_ns) AS end_ns,
    count(*) AS records, preference, NULL::VARCHAR AS phase
  FROM kineto
  GROUP BY ALL
  UNION ALL
  SELECT
    trace, rank, source, iteration AS step, ts_ns, end_ns, 1 AS records,
    -- the rule's preference: engine sources rank after ProfilerStep, before XLA
    (SELECT min(r.preference) FROM step_marker_rules AS r
     WHERE r.version = rules_version AND r.source = e.source) AS preference,
    phase
  FROM engine_iterations_with(rules_version) AS e
  WHERE phase IS DISTINCT FROM 'idle'
  UNION ALL
  SELECT trace, rank, source, step, ts_ns, end_ns, records, preference, phase FROM _steps_extra
),
chosen AS (
  SELECT trace, rank, min(preference) AS preference
  FROM candidates
  GROUP BY ALL
)
SELECT c.trace, c.rank, c.step, c.ts_ns, c.end_ns, c.end_ns - c.ts_ns AS dur_ns, c.source, c.records, c.phase
FROM candidates AS c
JOIN chosen AS h ON h.trace = c.trace AND h.rank = c.rank AND h.preference = c.preference;

-- The steps of the latest rules (version 2): one row per (trace, rank, step) from
-- the first source a rank has (steps_with: ProfilerStep#N on the CPU track, else on
-- the GPU track, else inference engine iterations, else XLA steps). Metrics name
-- their version (`steps_with(<version>)`).
-- columns:
--   trace    the trace
--   rank     the rank
--   step     the step number: N of ProfilerStep#N, the engine iteration number, or the XLA step number
--   ts_ns    the step's first start, ns
--   end_ns   the step's last end, ns (an XLA step ends when its slowest device ends)
--   dur_ns   end_ns - ts_ns
--   source   the record the step comes from: cpu_annotation | gpu_annotation | an
--            engine source (vllm_execute_context, sglang_run_batch, ...) | xla_<source>
--   records  how many step records were merged into the row (threads, streams, device planes)
--   phase    engine iterations: prefill | decode | mixed; NULL otherwise
-- batch: shared
CREATE OR REPLACE VIEW steps AS
SELECT * FROM steps_with(2);

-- The runtime call (cudaLaunchKernel, cudaMemcpyAsync, ...) that launched each
-- GPU activity, matched on the CUPTI correlation id within one rank.
-- batch: shared
CREATE OR REPLACE VIEW gpu_launches AS
SELECT trace, rank, correlation, min(ts_ns) AS launch_ns
FROM slices
WHERE cat IN ('cuda_runtime', 'cuda_driver', 'hip_runtime', 'mtia_runtime', 'xpu_runtime', 'privateuse1_runtime')
  AND correlation IS NOT NULL
GROUP BY ALL;

-- Every GPU activity classified by kernel_class_rules `class_rules_version`, with
-- the step of step_marker_rules `step_rules_version` it belongs to (NULL when none,
-- or the rank has no steps):
--   * CPU-side steps (cpu_annotation, and the engine iterations of version 2,
--     which are CPU-side annotations and Python frames): the step whose CPU span
--     contains the activity's LAUNCH (the runtime call with its correlation id),
--     as HTA does: a kernel that runs after its step ended still belongs to the
--     step that issued it; NULL when the launch is not in the trace.
--   * GPU-track steps (gpu_annotation): the step whose GPU span contains the
--     activity's START (the annotation is on the GPU timeline already).
--   * XLA steps: no GPU activity is attributed (XLA ops have their own views).
-- `launch_ns` is the launch time when known. (The rank's step source is looked up first,
-- from the steps themselves: a time picked per step in the join condition defeated the
-- plan, and a MATERIALIZED CTE of the steps stopped DuckDB from pruning the activities'
-- columns.)
-- Each activity finds its step by an ASOF join, linear in activities and steps: an
-- equality join on the rank with the time as a residual compared every activity with
-- every step of its rank (quadratic: a long capture has tens of thousands of steps).
-- The ASOF join reads the rank's `_step_spans`: where its steps do not overlap, the
-- steps themselves; where they do, the elementary spans between consecutive step
-- boundaries, each with every step that covers it. An activity takes the steps of the
-- span that started last at or before its time, if the span still holds it; one row per
-- step, and one row with a NULL step when none (the rows of the containment join).
CREATE OR REPLACE MACRO _step_spans(step_rules_version) AS TABLE
WITH st AS MATERIALIZED (  -- read five times below
  SELECT trace, rank, step, ts_ns, end_ns
  FROM steps_with(step_rules_version)
  WHERE NOT starts_with(source, 'xla_') AND end_ns > ts_ns  -- an empty step holds no time
),
flagged AS (
  SELECT
    *,
    coalesce(max(end_ns) OVER (PARTITION BY trace, rank ORDER BY ts_ns, end_ns
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) > ts_ns, false) AS overlapped
  FROM st
),
overlapping AS (SELECT DISTINCT trace, rank FROM flagged WHERE overlapped),
plain AS (
  SELECT s.trace, s.rank, s.ts_ns AS span_ns, s.end_ns AS span_end_ns, [s.step] AS steps
  FROM st AS s ANTI JOIN overlapping AS o USING (trace, rank)
),
bounds AS (
  SELECT DISTINCT trace, rank, t
  FROM (
    SELECT trace, rank, ts_ns AS t FROM st SEMI JOIN overlapping USING (trace, rank)
    UNION ALL
    SELECT trace, rank, end_ns FROM st SEMI JOIN overlapping USING (trace, rank)
  )
),
spans AS (
  SELECT trace, rank, t AS span_ns, lead(t) OVER (PARTITION BY trace, rank ORDER BY t) AS span_end_ns
  FROM bounds
),
covered AS (
  SELECT p.trace, p.rank, p.span_ns, p.span_end_ns, list(s.step ORDER BY s.step) AS steps
  FROM spans AS p
  JOIN st AS s ON s.trace = p.trace AND s.rank = p.rank AND s.ts_ns <= p.span_ns AND p.span_ns < s.end_ns
  WHERE p.span_end_ns IS NOT NULL
  GROUP BY ALL
)
SELECT * FROM plain
UNION ALL
SELECT * FROM covered;

CREATE OR REPLACE MACRO gpu_ops_steps_of(class_rules_version, step_rules_version) AS TABLE
SELECT
  a.* EXCLUDE (_step_time_ns, _span_end_ns, _steps),
  unnest(CASE WHEN a._step_time_ns < a._span_end_ns THEN a._steps ELSE [NULL] END) AS step
FROM (
  SELECT x.*, p.span_end_ns AS _span_end_ns, p.steps AS _steps
  FROM (
    SELECT
      o.*,
      l.launch_ns,
      CASE WHEN b.source = 'gpu_annotation' THEN o.ts_ns ELSE l.launch_ns END AS _step_time_ns
    FROM gpu_ops_classified_with(class_rules_version) AS o
    LEFT JOIN gpu_launches AS l USING (trace, rank, correlation)
    LEFT JOIN (SELECT DISTINCT trace, rank, source FROM steps_with(step_rules_version)) AS b
      ON b.trace = o.trace AND b.rank = o.rank
  ) AS x
  ASOF LEFT JOIN _step_spans(step_rules_version) AS p
    ON p.trace = x.trace AND p.rank = x.rank AND x._step_time_ns >= p.span_ns
) AS a;

-- GPU activities by kernel_class_rules `rules_version` in the steps of
-- step_marker_rules version 1 (ProfilerStep#N only): what the metrics defined
-- before engine iterations were steps read.
CREATE OR REPLACE MACRO gpu_ops_steps_with(rules_version) AS TABLE
SELECT * FROM gpu_ops_steps_of(rules_version, 1);

-- The current class rules (version 2, as gpu_ops_classified) in the steps of the
-- latest step rules (as `steps`), for ad-hoc queries.
-- batch: shared
CREATE OR REPLACE VIEW gpu_ops_steps AS
SELECT * FROM gpu_ops_steps_of(2, 2);

-- The inner-step rule, the ONE place it is written: step `i` (1, 2, ... in step
-- order) of a rank's `n` steps is measured unless it is the first (warm-up) or the
-- last (cut by the profiler window) of three or more; with one or two steps all
-- are: CCL-Bench's `steps[1:-1] if len(steps) > 2`.
CREATE OR REPLACE MACRO is_inner_step(i, n) AS n <= 2 OR (i > 1 AND i < n);

-- Why a rank has no steps, naming the step markers of step_marker_rules
-- `rules_version` (the `reason` of the metrics that need steps).
CREATE OR REPLACE MACRO no_steps_reason(rules_version) AS
  CASE WHEN rules_version >= 2
    THEN 'no steps (no ProfilerStep#N annotations, no inference engine iterations, no XLA steps)'
    ELSE 'no steps (no ProfilerStep#N annotations, no XLA steps)'
  END;

-- The steps a per-step metric measures, per rank of `scope` (pass `metric_scope`):
-- the steps of steps_with(`rules_version`) that `is_inner_step`.
CREATE OR REPLACE MACRO inner_step_windows(rules_version, scope) AS TABLE
WITH numbered AS (
  SELECT
    trace, rank, step, ts_ns, end_ns,
    row_number() OVER (PARTITION BY trace, rank ORDER BY step) AS i,
    count(*) OVER (PARTITION BY trace, rank) AS n
  FROM steps_with(rules_version)
  SEMI JOIN query_table(scope) USING (trace, rank)
)
SELECT trace, rank, step, ts_ns AS window_start, end_ns AS window_end
FROM numbered
WHERE is_inner_step(i, n);
