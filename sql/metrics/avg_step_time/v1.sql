-- metric: avg_step_time
-- version: 1
-- unit: s
-- grain: rank
-- category: step_time
-- polarity: lower
-- leaderboard: model_execution
-- summary: mean
-- description: Mean step duration per rank in seconds (ProfilerStep#N, or the steps of an XLA profile), first and last step dropped when there are more than two.
-- needs: steps: ProfilerStep#N annotations (CPU or GPU track) or XLA steps
-- params: none
-- Definition: the rank's steps from `steps_with(1)` (`source` says which record:
-- cpu_annotation, gpu_annotation, or xla_device_steps / xla_host_annotation /
-- xla_step_markers / xla_module_runs), ordered by step number. With three or more
-- steps the first (warm-up effects) and the last (cut by the profiler window)
-- are dropped and the inner ones averaged; with one or two, all are averaged.
-- A step's duration is its span: for XLA, from its first start to its end on the
-- slowest device. `steps_used` / `steps_seen` say how many were averaged / found.
-- Differs from CCL-Bench: same inner-step rule (`steps[1:-1] if len(steps) > 2`)
-- on ProfilerStep#N; on TPU it divides the profile's wall time by the card's
-- `iteration` when it finds no step events, here such a rank is not applicable.
WITH numbered AS (
  SELECT
    trace, rank, step, dur_ns, source,
    row_number() OVER (PARTITION BY trace, rank ORDER BY step) AS i,
    count(*) OVER (PARTITION BY trace, rank) AS n
  FROM steps_with(1)
),
inner_steps AS (
  SELECT
    trace, rank, avg(dur_ns) AS mean_ns, count(*) AS steps_used, max(n) AS steps_seen,
    any_value(source) AS source
  FROM numbered
  WHERE n <= 2 OR (i > 1 AND i < n)
  GROUP BY ALL
)
SELECT
  s.trace,
  s.rank,
  p.mean_ns / 1e9 AS value,
  CASE WHEN p.steps_used IS NULL THEN 'no steps (no ProfilerStep#N annotations, no XLA steps)' END AS reason,
  p.steps_used,
  p.steps_seen,
  p.source
FROM metric_scope AS s
LEFT JOIN inner_steps AS p USING (trace, rank)
