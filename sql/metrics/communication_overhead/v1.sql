-- metric: communication_overhead
-- version: 1
-- unit: ratio
-- grain: rank
-- category: communication
-- family: communication
-- see_also: communication_ratio, communication_fraction
-- polarity: lower
-- summary: ratio comm_s / kernel_s
-- ccl_bench_unit: ratio
-- description: Share of GPU kernel time in communication kernels, Σdur(comm kernels) / Σdur(all kernels), pooled over every rank, 0..1 (CCL-Bench group 1's communication overhead).
-- needs: GPU kernels
-- params: none
-- columns:
--   comm_s    the rank's communication kernel time, seconds (summed, not merged)
--   kernel_s  the rank's kernel time, communication included, seconds
--   kernels   the rank's kernels with a positive duration
-- Definition: per rank, comm_s and kernel_s over the whole trace, kernels with a
-- positive duration only (memcpy/memset are not kernels); comm = the kernels
-- kernel_class_rules v2 calls comm. The row value is the rank's share; the one
-- number `python -m cclq.main` prints is Σcomm_s / Σkernel_s over the ranks
-- (the summary), which for a single rank is the rank's share.
-- Differs from CCL-Bench (tools/communication_overhead_group_1): CCL-Bench reads
-- kineto_trace_0.json only (rank 0; any other file name fails) and calls
-- communication the kernels whose name starts with ncclDevKernel_AllReduce /
-- ReduceScatter / AllGather / Broadcast / Reduce / SendRecv, so NCCL < 2.19's
-- ncclKernel_*, RCCL, cross_device_reduce and DeepEP kernels count as compute.
-- Here every rank and the shared classification. Same definition as
-- communication_ratio v2 at rank grain (that one reports only the pooled value).
WITH per_rank AS (
  SELECT
    o.trace, o.rank,
    count(*) AS kernels,
    sum(o.dur_ns) AS kernel_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE o.kernel_class = 'comm'), 0) AS comm_ns
  FROM gpu_ops_classified_with(2) AS o
  SEMI JOIN metric_scope USING (trace, rank)
  WHERE o.kind = 'kernel' AND o.dur_ns > 0
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.comm_ns / p.kernel_ns AS value,
  CASE WHEN p.rank IS NULL THEN 'no GPU kernels with a duration' END AS reason,
  p.comm_ns / 1e9 AS comm_s,
  p.kernel_ns / 1e9 AS kernel_s,
  p.kernels
FROM metric_scope AS m
LEFT JOIN per_rank AS p USING (trace, rank)
