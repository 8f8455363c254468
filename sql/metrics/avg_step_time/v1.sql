-- metric: avg_step_time
-- version: 1
-- unit: s
-- grain: rank
-- summary: mean
-- description: Mean ProfilerStep duration per rank in seconds, first and last step dropped when there are more than two.
-- needs: ProfilerStep#N annotations
-- The first profiled step carries warm-up effects and the last is cut by the
-- profiler window, so with three or more steps only the inner ones count
-- (CCL-Bench's convention). `steps_used` says how many were averaged.
WITH numbered AS (
  SELECT
    trace, rank, step, dur_ns,
    row_number() OVER (PARTITION BY trace, rank ORDER BY step) AS i,
    count(*) OVER (PARTITION BY trace, rank) AS n
  FROM steps
),
inner_steps AS (
  SELECT trace, rank, avg(dur_ns) AS mean_ns, count(*) AS steps_used, max(n) AS steps_seen
  FROM numbered
  WHERE n <= 2 OR (i > 1 AND i < n)
  GROUP BY ALL
)
SELECT
  s.trace,
  s.rank,
  p.mean_ns / 1e9 AS value,
  CASE WHEN p.steps_used IS NULL THEN 'no ProfilerStep annotations' END AS reason,
  p.steps_used,
  p.steps_seen
FROM metric_scope AS s
LEFT JOIN inner_steps AS p USING (trace, rank)
