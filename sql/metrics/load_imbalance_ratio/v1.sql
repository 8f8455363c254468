-- metric: load_imbalance_ratio
-- version: 1
-- unit: ratio
-- grain: trace
-- category: compute
-- family: stragglers
-- see_also: straggler
-- polarity: lower
-- leaderboard: communication
-- summary: value
-- ccl_bench_trace_types: nsys, json
-- ccl_bench_unit: ratio
-- description: Busiest rank's GPU busy time over the idlest rank's, max / min over ranks of |U(kernels)| (>= 1; 1 = balanced).
-- needs: >= 2 ranks, GPU kernels on every rank
-- applies_if: ranks >= 2 | single rank
-- params: none
-- columns:
--   ranks         ranks of the trace in scope
--   world_size    the trace's world size
--   max_busy_s    the busiest rank's kernel busy time, s
--   min_busy_s    the idlest rank's kernel busy time, s
--   busiest_rank  the busiest rank
--   idlest_rank   the idlest rank
-- Definition: busy time of a rank = |U(kernels)|, the union of its kernel
-- intervals over every stream (whole trace; memcpy/memset are not kernels). The
-- ratio is over the ranks present in the warehouse for the trace (`ranks`; the
-- profiler's `world_size` may be larger when only some ranks were recorded). Not
-- applicable with a single rank ('single rank'), or when some rank has no kernel
-- time (the ratio would be infinite; the reason names the ranks).
-- Differs from CCL-Bench: CCL-Bench returns -1 for both cases and samples at most
-- 16 rank files; here every rank counts and the reason says why there is no value.
WITH kernel_intervals AS (
  SELECT k.trace, k.rank, 0 AS key, k.ts_ns, k.end_ns
  FROM kernels AS k
  JOIN metric_scope AS m USING (trace, rank)
),
busy AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS busy_ns
  FROM intervals_union(kernel_intervals)
  GROUP BY ALL
),
per_rank AS (
  SELECT m.trace, m.rank, coalesce(b.busy_ns, 0) AS busy_ns
  FROM metric_scope AS m
  LEFT JOIN busy AS b USING (trace, rank)
),
per_trace AS (
  SELECT
    trace,
    count(*) AS ranks,
    max(busy_ns) AS max_ns,
    min(busy_ns) AS min_ns,
    arg_max(rank, busy_ns) AS busiest_rank,
    arg_min(rank, busy_ns) AS idlest_rank,
    string_agg(rank::VARCHAR, ', ' ORDER BY rank) FILTER (WHERE busy_ns = 0) AS idle_ranks
  FROM per_rank
  GROUP BY trace
)
SELECT
  p.trace,
  CASE WHEN p.ranks >= 2 AND p.min_ns > 0 THEN p.max_ns / p.min_ns END AS value,
  CASE
    WHEN p.ranks < 2 THEN 'single rank'
    WHEN p.min_ns = 0 THEN 'no GPU kernel time on rank ' || p.idle_ranks
  END AS reason,
  p.ranks,
  t.world_size,
  p.max_ns / 1e9 AS max_busy_s,
  p.min_ns / 1e9 AS min_busy_s,
  p.busiest_rank,
  p.idlest_rank
FROM per_trace AS p
LEFT JOIN traces AS t USING (trace)
