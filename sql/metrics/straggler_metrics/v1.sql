-- metric: straggler_metrics
-- version: 1
-- unit: ratio
-- grain: trace
-- category: collectives
-- family: stragglers
-- see_also: straggler, straggler_rank, horovod_straggler
-- polarity: lower
-- summary: value
-- ccl_bench_unit: ratio
-- description: Straggler slowdown, max / min over ranks of Σdur(comm kernels), >= 1 (1 = every rank spends the same time in communication); `straggler` is the delay (max - min) / max of the same totals.
-- needs: two or more ranks with communication kernels
-- params: none
-- columns:
--   delay            (max - min) / max of the per-rank totals: the value of `straggler`
--   ranks            the ranks with communication kernels
--   max_comm_s       the largest per-rank communication kernel total, seconds
--   min_comm_s       the smallest per-rank total, seconds
--   least_comm_rank  the rank with the least communication time (the likely straggler: it waits least)
-- Definition: per rank, comm_s = Σ duration of the kernels kernel_class_rules
-- v2 calls comm, summed over streams, not merged, whole trace (as `straggler`);
-- value = max / min over the ranks in scope that ran communication kernels.
-- Why the slowdown: CCL-Bench's tools/main.py prints two lines for this name,
-- "Straggler Delay: d" and then "Straggler Slowdown: s", and its website takes
-- the last line of stdout, so the one number this name stands for is the
-- slowdown; the delay is a detail column here and the value of `straggler`.
-- Differs from CCL-Bench (tools/straggler): CCL-Bench reads only files named
-- rank*_trace.json, counts kernels whose name starts with `ncclDevKernel_`
-- (NCCL < 2.19's ncclKernel_*, RCCL and DeepEP kernels are missed) and returns
-- 0 when fewer than two ranks are found (here: no value, with the reason); it
-- prints words before the numbers, which its own float() parsing then rejects.
WITH per_rank AS (
  SELECT trace, rank, sum(dur_ns) AS comm_ns
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
    arg_min(rank, [comm_ns, rank]) AS least_comm_rank
  FROM per_rank
  GROUP BY trace
),
scope_ranks AS (
  SELECT trace, count(DISTINCT rank) AS n_ranks FROM metric_scope GROUP BY trace
)
SELECT
  s.trace,
  CASE WHEN p.ranks >= 2 THEN p.max_ns / nullif(p.min_ns, 0) END AS value,
  CASE
    WHEN s.n_ranks < 2 THEN 'single rank'
    WHEN p.trace IS NULL THEN 'no communication kernels'
    WHEN p.ranks < 2 THEN 'communication kernels on one rank only'
    WHEN p.min_ns = 0 THEN 'a rank''s communication kernels have zero duration'
  END AS reason,
  CASE WHEN p.ranks >= 2 THEN (p.max_ns - p.min_ns) / nullif(p.max_ns, 0) END AS delay,
  p.ranks,
  p.max_ns / 1e9 AS max_comm_s,
  p.min_ns / 1e9 AS min_comm_s,
  CASE WHEN p.ranks >= 2 THEN p.least_comm_rank END AS least_comm_rank
FROM scope_ranks AS s
LEFT JOIN per_trace AS p USING (trace)
