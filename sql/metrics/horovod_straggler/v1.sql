-- metric: horovod_straggler
-- version: 1
-- unit: rank
-- grain: trace
-- category: collectives
-- family: stragglers
-- see_also: straggler, straggler_metrics, straggler_rank
-- polarity: neutral
-- summary: value
-- description: The worker that reported its tensors ready last most often in Horovod's negotiations (the one the others waited for), with how late it was.
-- needs: a Horovod timeline with two or more workers
-- applies_if: format horovod | no Horovod timeline
-- columns:
--   negotiations  negotiations with two or more workers
--   times_last    how often the rank was the last worker ready
--   last_share    times_last / negotiations
--   mean_late_s   mean of its tick - the first tick, over the negotiations it was last in, s
--   max_late_s    the largest such lateness, s
--   workers       workers seen in the negotiations
-- In each negotiation every worker ticks when its tensor is ready; the last tick
-- ends the wait (ties: the lowest rank). value = the worker last in the most
-- negotiations (ties: the lowest rank). Details: negotiations (with two or more
-- workers), times_last, last_share (times_last / negotiations), mean_late_s (mean
-- over those of its tick - the first tick), max_late_s, workers. The same idea
-- as straggler_rank on collectives, from the negotiation instead of the kernels.
WITH waited AS (
  -- the negotiations in which someone waited: two or more workers ticked
  SELECT trace, rank, pid, op_seq
  FROM horovod_negotiations
  GROUP BY ALL
  HAVING count(DISTINCT worker) >= 2
),
lasts AS (
  SELECT n.trace, n.worker, count(*) AS times_last, avg(n.late_ns) AS mean_late_ns, max(n.late_ns) AS max_late_ns
  FROM horovod_negotiations AS n
  JOIN waited AS w USING (trace, rank, pid, op_seq)
  WHERE n.last
  GROUP BY ALL
),
per_trace AS (
  SELECT
    trace,
    (SELECT count(*) FROM waited AS w WHERE w.trace = l.trace) AS negotiations,
    arg_max(worker, [times_last, -worker]) AS worker,
    max(times_last) AS times_last,
    arg_max(mean_late_ns, [times_last, -worker]) AS mean_late_ns,
    arg_max(max_late_ns, [times_last, -worker]) AS max_late_ns
  FROM lasts AS l
  GROUP BY trace
),
workers AS (
  SELECT trace, count(DISTINCT worker) AS workers FROM horovod_negotiations GROUP BY trace
)
SELECT
  s.trace,
  p.worker AS value,
  CASE
    WHEN p.trace IS NOT NULL THEN NULL
    WHEN w.workers = 1 THEN 'a single worker: nobody waits'
    ELSE 'no Horovod timeline'
  END AS reason,
  p.negotiations,
  p.times_last,
  p.times_last / p.negotiations AS last_share,
  p.mean_late_ns / 1e9 AS mean_late_s,
  p.max_late_ns / 1e9 AS max_late_s,
  w.workers
FROM (SELECT DISTINCT trace FROM metric_scope) AS s
LEFT JOIN per_trace AS p USING (trace)
LEFT JOIN workers AS w USING (trace)
