-- metric: avg_step_time
-- version: 3
-- unit: s
-- grain: rank
-- category: step_time
-- family: time
-- see_also: total_trace_time, wall_time_s, gpu_step_score
-- polarity: lower
-- leaderboard: model_execution
-- leaderboard_headline: yes
-- summary: mean
-- ccl_bench_trace_types: json_tpu, json
-- description: Mean step duration per rank in seconds (ProfilerStep#N, else inference engine iterations, else the steps of an XLA profile, per device), first and last step dropped when there are more than two.
-- needs: steps: ProfilerStep#N annotations (CPU or GPU track), vLLM/SGLang engine-iteration annotations, or XLA steps
-- params: none
-- columns:
--   steps_used     steps averaged (the inner ones)
--   steps_seen     steps found on the rank
--   source         the record the steps come from (`steps` view: cpu_annotation,
--                    gpu_annotation, an engine source, xla_...)
--   prefill_steps  averaged steps that are prefill engine iterations
--   decode_steps   averaged steps that are decode engine iterations
--   devices        device planes whose steps were averaged (XLA per-device steps), else 1
-- Definition: as version 2, except where a rank's steps are an XLA profile's
-- per-device records (`xla_steps` sources device_steps, a device's Steps line, and
-- module_runs): a step is per device. Each device plane's steps are numbered on
-- their own, the inner-step rule applies per device, each device gives the mean of
-- its inner steps, and the rank's value is the mean over its devices (`devices`).
-- `steps_used` / `steps_seen` are then summed over the devices.
-- Differs from version 2: version 2 (the `steps` view) joins a step number's
-- records across devices, from the first device's start to the last device's end,
-- so devices whose step records are apart in time (an xprof TensorFlow profile of
-- 8 GPUs: 19.9 ms on GPU:4, 21.3 ms on GPU:6, 627 ms apart) gave one 0.669 s step.
-- Differs from CCL-Bench: as version 2.
WITH base AS (
  SELECT * FROM avg_step_time_rows(2, metric_scope)
),
numbered AS (
  SELECT
    trace, rank, pid, step, dur_ns, source,
    row_number() OVER (PARTITION BY trace, rank, pid ORDER BY step) AS i,
    count(*) OVER (PARTITION BY trace, rank, pid) AS n
  FROM xla_steps
  WHERE source IN ('device_steps', 'module_runs')
    AND step IS NOT NULL
    AND trace IN (SELECT trace FROM metric_scope)
),
per_device AS (
  SELECT
    trace, rank, pid, avg(dur_ns) AS mean_ns, count(*) AS used, max(n) AS seen,
    any_value(source) AS source
  FROM numbered
  WHERE is_inner_step(i, n)
  GROUP BY ALL
),
per_rank AS (
  SELECT
    trace, rank, avg(mean_ns) AS mean_ns, CAST(sum(used) AS BIGINT) AS steps_used,
    CAST(sum(seen) AS BIGINT) AS steps_seen, 'xla_' || any_value(source) AS source,
    count(*) AS devices
  FROM per_device
  GROUP BY ALL
)
SELECT
  b.trace,
  b.rank,
  CASE WHEN d.rank IS NOT NULL THEN d.mean_ns / 1e9 ELSE b.value END AS value,
  CASE WHEN d.rank IS NULL THEN b.reason END AS reason,
  coalesce(d.steps_used, b.steps_used) AS steps_used,
  coalesce(d.steps_seen, b.steps_seen) AS steps_seen,
  coalesce(d.source, b.source) AS source,
  b.prefill_steps,
  b.decode_steps,
  CASE WHEN d.rank IS NOT NULL THEN d.devices WHEN b.value IS NOT NULL THEN 1 END AS devices
FROM base AS b
LEFT JOIN per_rank AS d
  ON d.trace = b.trace AND d.rank = b.rank AND b.source = d.source
ORDER BY b.trace, b.rank
