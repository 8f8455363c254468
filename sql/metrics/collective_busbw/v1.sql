-- metric: collective_busbw
-- version: 1
-- unit: GB/s
-- grain: trace
-- category: collectives
-- polarity: higher
-- summary: max
-- description: Median bus bandwidth (GB/s = 1e9 B/s) of the collectives of each (collective type, power-of-two message-size bucket), over every rank's instances.
-- needs: communication kernels whose type, message size and group size are known (kernel collective args, or CPU collective ops with record_shapes)
-- columns:
--   coll_type          the collective type
--   size_bucket        the lower bound of the size bucket (a power of two), bytes
--   size_range         the bucket as text (lower .. 2 x lower)
--   collectives        collectives in the bucket
--   ranks              ranks they ran on
--   min_bytes          smallest message in the bucket, bytes
--   max_bytes          largest message in the bucket, bytes
--   mean_busbw_gbps    mean bus bandwidth, GB/s
--   median_algbw_gbps  median algorithm bandwidth (bytes / duration), GB/s
-- Definition (nccl-tests, doc/PERFORMANCE.md): per collective instance on one
-- rank, algbw = bytes / kernel duration and busbw = algbw x factor(n), with
-- factor all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
-- broadcast, reduce, send, recv 1. bytes = nelems x dtype size of the full
-- message: an all_gather's output (the gathered tensor), a reduce_scatter's
-- input, every other type's input. n = the collective's own group size: the
-- kernel's Group size, else the linked CPU op's (its Group size, or for
-- all_gather / reduce_scatter the ratio of its output and input sizes), else
-- the process group's, and only last the trace's world size (the
-- `collectives` view lists the order; its size_source and group_size_source
-- columns say what each instance used). One row per (trace, coll_type, size_bucket), where
-- size_bucket = the power of two 2^k with 2^k <= bytes < 2^(k+1) (0 for empty
-- messages); value = median busbw of the instances in it, every rank in scope
-- pooled. The kernel duration on a rank includes waiting for late peers, so a
-- skewed collective reads slower than its links are (see collective_skew).
-- The summary for `python -m cclq.main` is the highest bucket median.
-- Differs from CCL-Bench group 6: GB = 1e9 B (not 2^30), all_gather sized by
-- its output (group 6 takes In msg nelems for every type), per-bucket medians
-- rather than one median over all sizes, all ranks rather than the first file,
-- and collectives sized from CPU-side ops when kernels carry no arguments.
WITH sized AS (
  SELECT
    c.trace,
    c.coll_type,
    c.rank,
    c.bytes,
    c.algbw_gbps,
    c.busbw_gbps,
    -- 2^floor(log2(bytes)); the two corrections guard log2's rounding at 2^k +- 1
    CASE WHEN c.bytes > 0 THEN CAST(2 ** floor(log2(c.bytes)) AS BIGINT) ELSE 0 END AS approx_bucket
  FROM collectives AS c
  JOIN metric_scope AS s USING (trace, rank)
  WHERE c.busbw_gbps IS NOT NULL
),
bucketed AS (
  SELECT
    *,
    CASE
      WHEN approx_bucket > bytes THEN approx_bucket // 2
      WHEN approx_bucket > 0 AND approx_bucket * 2 <= bytes THEN approx_bucket * 2
      ELSE approx_bucket
    END AS size_bucket
  FROM sized
),
buckets AS (
  SELECT
    trace,
    coll_type,
    size_bucket,
    median(busbw_gbps) AS median_busbw_gbps,
    count(*) AS collectives,
    count(DISTINCT rank) AS ranks,
    min(bytes) AS min_bytes,
    max(bytes) AS max_bytes,
    avg(busbw_gbps) AS mean_busbw_gbps,
    median(algbw_gbps) AS median_algbw_gbps
  FROM bucketed
  GROUP BY ALL
),
comm_seen AS (
  SELECT c.trace, count(*) AS comm_kernels, count(c.coll_type) AS typed, count(c.bytes) AS sized
  FROM collectives AS c
  JOIN metric_scope AS s USING (trace, rank)
  GROUP BY c.trace
)
SELECT
  t.trace,
  b.median_busbw_gbps AS value,
  CASE
    WHEN b.trace IS NOT NULL THEN NULL
    WHEN k.comm_kernels IS NULL THEN 'no communication kernels'
    WHEN k.typed = 0 THEN 'no communication kernel has a known collective type'
    WHEN k.sized = 0 THEN 'no collective has a known message size (no collective args on kernels, no record_shapes)'
    ELSE 'no collective has a known group size and a non-zero duration'
  END AS reason,
  b.coll_type,
  b.size_bucket,
  CASE WHEN b.size_bucket IS NOT NULL THEN format_bytes(b.size_bucket) || ' .. ' || format_bytes(2 * b.size_bucket) END AS size_range,
  b.collectives,
  b.ranks,
  b.min_bytes,
  b.max_bytes,
  b.mean_busbw_gbps,
  b.median_algbw_gbps
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN buckets AS b USING (trace)
LEFT JOIN comm_seen AS k USING (trace)
