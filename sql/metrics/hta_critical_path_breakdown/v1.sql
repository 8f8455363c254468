-- metric: hta_critical_path_breakdown
-- version: 1
-- unit: percent
-- grain: rank
-- category: hta
-- family: hta
-- see_also: hta_temporal_breakdown, break_down_steps
-- polarity: neutral
-- summary: max
-- description: HTA 0.5.0-compatible critical path breakdown (critical_path_analysis on the first ProfilerStep, then CPGraph.summary()): one row per bound_by class of the longest path through the rank's CPU/GPU dependency graph, value = the class's share of the path's duration in percent (one number per trace: the largest share, the class that bounds the path most).
-- params: only_rank default -1
-- needs: HTA rows with a ProfilerStep annotation on the rank, and no CUDA sync events (category cuda_sync)
-- columns:
--   bound_by     HTA's class of the path's edges: cpu_bound, gpu_compute_bound, gpu_communication_bound, gpu_kernel_launch_overhead, gpu_kernel_kernel_overhead, or '' (zero-weight dependency edges)
--   duration_us  µs of the path in that class (HTA's edge weights summed)
--   edges        number of the path's edges in that class
--   percentage   the class's share of the path's duration, percent (= value)
--   path_us      the whole path's duration, µs
-- Reproduces HTA 0.5.0's critical path summary (hta/analyzers/critical_path_analysis.py):
-- the graph of one iteration is the view hta_critical_path_edges
-- (sql/views/hta_critical_path.sql, which says how HTA builds it), the longest
-- path is computed in Python before the query (cclq/query/critical_path.py,
-- which reads the view once and leaves the path's edges in the temporary table
-- hta_critical_path_on_path): a longest path over a DAG is a sequential
-- recurrence in topological order that SQL can only write as a recursive CTE
-- relaxing one edge per round, quadratic on paths of 10^4..10^5 edges. The
-- percentages are HTA's: per class the sum of the recorded weights of the
-- path's edges over their total, times 100; the '' class (dependency edges,
-- always 0) is listed as HTA lists it.
-- Parity: every class and percentage of HTA's summary on the six golden traces
-- HTA analyses (tests/hta_golden/*/critical_path_summary.csv), to relative 1e-9
-- (tests/query/test_hta_critical_path.py). Not comparable: alexnet (no
-- ProfilerStep: HTA returns None, here a reason) and mtia_single_rank (HTA
-- fails an assertion: a kernel whose launch row is not a runtime row of the
-- window). Where it can differ from HTA: equally long paths are chosen between
-- as networkx does, by node and edge insertion order; HTA's node order comes
-- from an unstable sort of event ends by time, so at tied timestamps its choice
-- (and so the split of the same length between classes) may differ; the
-- path's length cannot.
-- `only_rank`: the one rank to analyse (HTA's critical_path_analysis takes one;
-- the graph is built for that rank only), -1 (default) every rank.
-- Ranks with CUDA sync events (cuda_sync) get a reason and no rows: HTA adds
-- GPU->CPU and GPU->GPU sync edges for them that this version does not build.
WITH scope AS (
  SELECT m.trace, m.rank, w.start_us IS NOT NULL AS has_window
  FROM metric_scope AS m
  JOIN metric_params AS p USING (trace)
  LEFT JOIN hta_critical_path_windows AS w USING (trace, rank)
  WHERE p.only_rank < 0 OR m.rank = p.only_rank
),
-- the path's edges, every column of hta_critical_path_edges (written by the Python step)
on_path AS (
  SELECT o.*
  FROM hta_critical_path_on_path AS o
  JOIN scope AS s USING (trace, rank)
),
paths AS (
  SELECT trace, rank, bool_or(has_sync_events) AS has_sync_events
  FROM on_path
  GROUP BY trace, rank
),
classes AS (
  SELECT o.trace, o.rank, o.bound_by, sum(o.weight_us) AS duration_us, count(*) AS edges
  FROM on_path AS o
  JOIN paths AS p USING (trace, rank)
  WHERE NOT p.has_sync_events
  GROUP BY ALL
),
totals AS (
  SELECT trace, rank, sum(duration_us) AS path_us FROM classes GROUP BY ALL
)
SELECT
  s.trace,
  s.rank,
  100.0 * c.duration_us / t.path_us AS value,
  CASE
    WHEN NOT s.has_window THEN 'no ProfilerStep annotation on the rank (HTA needs one for the window)'
    WHEN p.has_sync_events THEN 'CUDA sync events (cuda_sync) on the rank: their edges are not built'
    WHEN c.bound_by IS NULL THEN 'no operator or kernel in the first ProfilerStep'
  END AS reason,
  c.bound_by,
  c.duration_us,
  c.edges,
  100.0 * c.duration_us / t.path_us AS percentage,
  t.path_us
FROM scope AS s
LEFT JOIN paths AS p USING (trace, rank)
LEFT JOIN classes AS c USING (trace, rank)
LEFT JOIN totals AS t USING (trace, rank)
