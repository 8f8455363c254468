-- metric: aggregate_gpu_utilization
-- version: 1
-- unit: ratio
-- ccl_bench_unit: %
-- grain: rank
-- category: compute
-- family: efficiency
-- see_also: mean_sm_coverage, compute_utilization_proxy, hta_temporal_breakdown, hta_idle_time_breakdown, hta_idle_interval_stats
-- polarity: higher
-- leaderboard: gpu_efficiency
-- leaderboard_headline: yes
-- summary: mean
-- description: Share of the rank's kernel span during which at least one GPU kernel runs, |U(kernels)| / (last kernel end - first kernel start) per rank, 0..1.
-- needs: GPU kernels
-- applies_if: table events | no GPU kernels
-- params: none
-- columns:
--   busy_s   time at least one kernel runs on the rank (union over streams), s
--   span_s   first kernel start to last kernel end on the rank, s
--   kernels  kernels on the rank
-- Definition: U = the union of all the rank's kernel intervals over every stream
-- (concurrent kernels count once); the span runs from the first kernel start to
-- the last kernel end on that rank. Memcpy/memset activities are not kernels and
-- count on neither side. A rank file normally holds one GPU; if it holds several
-- they share one timeline here.
-- Differs from CCL-Bench: CCL-Bench reports percent; its nsys variant merges every
-- device into one timeline. Here each rank is its own timeline (mean over ranks in
-- both).
WITH kernel_intervals AS (
  SELECT trace, rank, 0 AS key, ts_ns, end_ns FROM kernels
),
busy AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS busy_ns
  FROM intervals_union(kernel_intervals)
  GROUP BY ALL
),
span AS (
  SELECT trace, rank, count(*) AS kernels, min(ts_ns) AS first_ns, max(end_ns) AS last_ns
  FROM kernels
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  coalesce(b.busy_ns, 0) / nullif(s.last_ns - s.first_ns, 0) AS value,
  CASE
    WHEN s.kernels IS NULL THEN 'no GPU kernels'
    WHEN s.last_ns = s.first_ns THEN 'kernel span is zero'
  END AS reason,
  coalesce(b.busy_ns, 0) / 1e9 AS busy_s,
  (s.last_ns - s.first_ns) / 1e9 AS span_s,
  s.kernels
FROM metric_scope AS m
LEFT JOIN span AS s USING (trace, rank)
LEFT JOIN busy AS b USING (trace, rank)
