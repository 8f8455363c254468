-- metric: gpu_step_score
-- version: 1
-- unit: score
-- grain: trace
-- category: step_time
-- family: time
-- see_also: avg_step_time, total_trace_time, wall_time_s
-- polarity: higher
-- summary: value
-- description: Composite of GPU count and step time, w * (G0 / G) + (1 - w) * (T0 / T): G the GPUs used, T the mean step time (avg_step_time v2), G0 = 16, T0 = 0.44 s, w = 0.5 unless --param says otherwise.
-- needs: steps (ProfilerStep#N or inference engine iterations)
-- assumes: gpu
-- params: gpus = card.total_count, g0 default 16, t0 default 0.44, w default 0.5
-- columns:
--   gpus         G, the GPUs used: the card's total_count, else the ranks in the trace
--   gpus_source  where G came from ('card total_count' or 'ranks traced')
--   step_time_s  T, the mean over ranks of each rank's mean inner step, seconds (avg_step_time v2)
--   g0           the reference GPU count
--   t0           the reference step time, seconds
--   w            the weight of the GPU term
-- Definition: T = the mean over ranks of avg_step_time v2's per-rank value (the
-- inner steps, first and last dropped when there are more than two); G = the
-- card's xpu_spec.total_count, else the number of ranks of the trace.
-- value = w * (g0 / G) + (1 - w) * (t0 / T); higher is better (fewer GPUs,
-- shorter steps).
-- Differs from CCL-Bench (tools/gpu_step_score): CCL-Bench reads G from a
-- gpu_count.txt that its run script writes into the trace folder, else counts
-- rank*_trace.json files, and G0, T0 and w from gpu_step_score_config.yaml in
-- the folder (defaults 16, 0.44, 0.5); it returns -1 when either is missing.
-- Here G comes from the workload card (or the ranks traced: a trace of a subset
-- of ranks then overstates the score) and G0, T0, w are parameters with the
-- same defaults (--param g0=... t0=... w=...). CCL-Bench's T is its own
-- avg_step_time (first rank file, ProfilerStep only); here avg_step_time v2's.
WITH numbered AS (
  SELECT
    trace, rank, dur_ns,
    row_number() OVER (PARTITION BY trace, rank ORDER BY step) AS i,
    count(*) OVER (PARTITION BY trace, rank) AS n
  FROM steps_with(2)
  SEMI JOIN metric_scope USING (trace, rank)
),
per_rank AS (
  SELECT trace, rank, avg(dur_ns) AS mean_ns
  FROM numbered
  WHERE is_inner_step(i, n)
  GROUP BY ALL
),
per_trace AS (
  SELECT trace, avg(mean_ns) / 1e9 AS step_time_s FROM per_rank GROUP BY trace
),
ranks AS (
  SELECT trace, count(DISTINCT rank) AS ranks FROM trace_ranks GROUP BY trace
),
inputs AS (
  SELECT
    t.trace,
    coalesce(p.gpus, r.ranks) AS gpus,
    CASE WHEN p.gpus IS NOT NULL THEN 'card total_count' ELSE 'ranks traced' END AS gpus_source,
    s.step_time_s, p.g0, p.t0, p.w
  FROM (SELECT DISTINCT trace FROM metric_scope) AS t
  JOIN metric_params AS p USING (trace)
  LEFT JOIN ranks AS r USING (trace)
  LEFT JOIN per_trace AS s USING (trace)
)
SELECT
  trace,
  CASE WHEN step_time_s > 0 AND gpus > 0 THEN w * (g0 / gpus) + (1 - w) * (t0 / step_time_s) END AS value,
  CASE
    WHEN step_time_s IS NULL THEN 'no steps (no ProfilerStep#N annotations, no inference engine iterations)'
    WHEN NOT step_time_s > 0 THEN 'steps have zero duration'
    WHEN NOT gpus > 0 THEN 'GPU count is ' || gpus
  END AS reason,
  gpus,
  gpus_source,
  step_time_s,
  g0,
  t0,
  w
FROM inputs
