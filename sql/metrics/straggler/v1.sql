-- metric: straggler
-- version: 1
-- unit: ratio
-- grain: trace
-- category: collectives
-- family: stragglers
-- see_also: straggler_metrics, straggler_rank, horovod_straggler, load_imbalance_ratio
-- polarity: lower
-- leaderboard: communication
-- summary: value
-- ccl_bench_trace_types: json
-- ccl_bench_unit: ratio
-- description: Spread of communication kernel time across ranks, (max - min) / max over ranks of Σdur(comm kernels), 0..1 (0 = every rank spends the same time in communication).
-- needs: two or more ranks with communication kernels
-- applies_if: ranks >= 2 | single rank
-- params: none
-- columns:
--   slowdown        max / min comm time across the ranks (CCL-Bench's second number)
--   straggler_rank  the rank with the least comm time (the likely straggler)
--   ranks           ranks counted
--   max_comm_s      the most comm time of a rank, s
--   min_comm_s      the least comm time of a rank, s
--   most_comm_rank  the rank with the most comm time
-- Definition: per rank, comm_s = Σ duration of the kernels kernel_class_rules v2
-- calls comm (every NCCL/RCCL kernel, DeepEP's exchange kernels, ...), summed
-- over streams, not merged, whole trace; value = (max - min) / max over the
-- ranks in scope that ran communication kernels. A collective kernel lasts
-- until the last rank joins, so the rank that arrives last waits least: the
-- rank with the LEAST comm time (`straggler_rank`) is the likely straggler, and
-- `slowdown` = max / min is CCL-Bench's second number. Details: the ranks
-- counted and the per-rank extremes.
-- Differs from straggler_rank: that metric matches collectives across ranks and
-- names the rank that starts them last most often; this one compares totals,
-- which is cheaper and needs no matching, but mixes in any per-rank difference
-- in communication volume (pipeline stages, uneven all_to_all).
-- Differs from CCL-Bench (tools/straggler): CCL-Bench reads only files named
-- rank*_trace.json (kineto_trace_N.json and worker-named files count for
-- nothing), keys ranks by file and pid, and counts kernels whose name starts
-- with `ncclDevKernel_` only: NCCL < 2.19's ncclKernel_*, RCCL and DeepEP
-- kernels are missed. Here every rank of the trace, the shared classification.
WITH per_rank AS (
  SELECT trace, rank, sum(dur_ns) AS comm_ns, count(*) AS comm_kernels
  FROM gpu_ops_classified_with(2)
  SEMI JOIN metric_scope USING (trace, rank)
  WHERE kind = 'kernel' AND kernel_class = 'comm'
  GROUP BY ALL
),
per_trace AS (
  SELECT
    trace,
    count(*) AS ranks,
    max(comm_ns) AS max_ns,
    min(comm_ns) AS min_ns,
    arg_min(rank, [comm_ns, rank]) AS least_comm_rank,
    arg_max(rank, [comm_ns, -rank]) AS most_comm_rank
  FROM per_rank
  GROUP BY trace
),
scope_ranks AS (
  SELECT trace, count(DISTINCT rank) AS n_ranks FROM metric_scope GROUP BY trace
)
SELECT
  s.trace,
  CASE WHEN p.ranks >= 2 THEN (p.max_ns - p.min_ns) / nullif(p.max_ns, 0) END AS value,
  CASE
    WHEN s.n_ranks < 2 THEN 'single rank'
    WHEN p.trace IS NULL THEN 'no communication kernels'
    WHEN p.ranks < 2 THEN 'communication kernels on one rank only'
    WHEN p.max_ns = 0 THEN 'communication kernels have zero duration'
  END AS reason,
  CASE WHEN p.ranks >= 2 THEN p.max_ns / nullif(p.min_ns, 0) END AS slowdown,
  CASE WHEN p.ranks >= 2 THEN p.least_comm_rank END AS straggler_rank,
  p.ranks,
  p.max_ns / 1e9 AS max_comm_s,
  p.min_ns / 1e9 AS min_comm_s,
  p.most_comm_rank
FROM scope_ranks AS s
LEFT JOIN per_trace AS p USING (trace)
