-- metric: avg_step_time
-- version: 2
-- unit: s
-- grain: rank
-- category: step_time
-- polarity: lower
-- leaderboard: model_execution
-- summary: mean
-- description: Mean step duration per rank in seconds (ProfilerStep#N, else inference engine iterations, else the steps of an XLA profile), first and last step dropped when there are more than two.
-- needs: steps: ProfilerStep#N annotations (CPU or GPU track), vLLM/SGLang engine-iteration annotations, or XLA steps
-- params: none
-- Definition: as version 1, on the steps of step_marker_rules version 2
-- (`steps_with(2)`, sql/views/steps.sql): a rank without ProfilerStep#N uses the
-- engine iterations of an inference server (vLLM execute_context_* annotations,
-- else the model runner's execute_model frame; SGLang run_batch, else
-- forward_batch_generation; vLLM-TPU's `$core.py:<line> step`), idle iterations
-- (nothing scheduled) left out, before XLA steps. Ordered by step number (the
-- iteration number for engine iterations); with three or more steps the first
-- and the last are dropped and the inner ones averaged; with one or two, all are
-- averaged. On inference traces most iterations are decode steps, so the value is
-- close to the decode step time (see tpot, ttft for the split by phase).
-- `steps_used` / `steps_seen` say how many were averaged / found, `source` which
-- record, and `prefill_steps` / `decode_steps` how many of the averaged steps
-- were which phase (engine iterations that record it).
-- Differs from version 1: version 1 knows ProfilerStep#N and XLA steps only, so
-- it is not applicable to vLLM/SGLang traces without ProfilerStep.
-- Differs from CCL-Bench: the same inner-step rule (`steps[1:-1] if len(steps) >
-- 2`) and the same inference markers in the same order (ProfilerStep, vLLM
-- execute_context_, SGLang run_batch), plus execute_model/forward_batch frames
-- where the annotation is missing; CCL-Bench counts vLLM's idle iterations
-- (execute_context_0(0)_generation_0(0)) as steps, and on TPU divides the
-- profile's wall time by the card's `iteration` when it finds no step events,
-- where such a rank is not applicable here.
WITH numbered AS (
  SELECT
    trace, rank, step, dur_ns, source, phase,
    row_number() OVER (PARTITION BY trace, rank ORDER BY step) AS i,
    count(*) OVER (PARTITION BY trace, rank) AS n
  FROM steps_with(2)
),
inner_steps AS (
  SELECT
    trace, rank, avg(dur_ns) AS mean_ns, count(*) AS steps_used, max(n) AS steps_seen,
    any_value(source) AS source,
    count(*) FILTER (WHERE phase = 'prefill') AS prefill_steps,
    count(*) FILTER (WHERE phase = 'decode') AS decode_steps
  FROM numbered
  WHERE n <= 2 OR (i > 1 AND i < n)
  GROUP BY ALL
)
SELECT
  s.trace,
  s.rank,
  p.mean_ns / 1e9 AS value,
  CASE
    WHEN p.steps_used IS NULL
      THEN 'no steps (no ProfilerStep#N annotations, no inference engine iterations, no XLA steps)'
  END AS reason,
  p.steps_used,
  p.steps_seen,
  p.source,
  p.prefill_steps,
  p.decode_steps
FROM metric_scope AS s
LEFT JOIN inner_steps AS p USING (trace, rank)
