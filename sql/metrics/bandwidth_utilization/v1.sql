-- metric: bandwidth_utilization
-- version: 1
-- unit: ratio
-- grain: trace
-- category: collectives
-- family: collectives
-- see_also: bandwidth_utilization_allreduce_group_6, collective_busbw
-- polarity: higher
-- summary: value
-- ccl_bench_unit: ratio
-- description: Mean over all-reduce kernels of T_expected / T_observed, T_expected = (S / n)(n - 1) / B with S the message bytes, n the group size and B the link bandwidth (CCL-Bench group 1's bandwidth utilization; B = 100 GB/s unless --param link_gbs says otherwise).
-- needs: GPU all-reduce kernels with a known message size and group size
-- assumes: link_gbs
-- params: link_gbs default 100
-- columns:
--   all_reduces        the all-reduce instances averaged (every rank's)
--   ranks              the ranks they ran on
--   link_gbs           B, the link bandwidth used, GB/s
--   median_busbw_gbps  the median bus bandwidth of those all-reduces, GB/s (nccl-tests' definition)
--   unsized            all-reduces left out: no message size or group size known, or group size 1
-- Definition: over the all-reduce collectives of every rank (`collectives_with(2)`,
-- sql/views/collectives.sql: type, bytes and group size from the kernel's
-- arguments or its CPU op) with bytes > 0, n >= 2 and a positive duration:
-- utilisation = ((S / n)(n - 1) / (B * 1e9)) / duration; value = the mean.
-- This is CCL-Bench's formula kept as is, including its choice of (n - 1)/n x S
-- as the bytes a rank moves (a ring all-reduce moves 2(n - 1)/n x S, so this is
-- busbw / (2B); `bandwidth_utilization_allreduce_group_6` uses nccl-tests' bus
-- bandwidth against the card's link bandwidth instead).
-- Differs from CCL-Bench (tools/bandwidth_utilization_group_1): CCL-Bench reads
-- kineto_trace_0.json only (rank 0), counts only kernels whose name starts with
-- ncclDevKernel_AllReduce and carries In msg nelems, dtype and Group size, knows
-- eight dtype spellings (Float, Float32, Double, Float64, Half, Float16,
-- BFloat16, BF16), and hard-codes B = 100 GB/s (Perlmutter's NVLink, 4 x 25
-- GB/s). Here every rank, the shared collective typing and sizing (old NCCL
-- kernel names, RCCL, sizes from the CPU op when the kernel has none, every
-- dtype of sql/views/dtypes.sql), and B as a parameter (default 100, CCL-Bench's).
WITH all_reduces AS (
  SELECT c.trace, c.rank, c.bytes, c.group_size, c.dur_ns, c.busbw_gbps
  FROM collectives_with(2) AS c
  SEMI JOIN metric_scope USING (trace, rank)
  WHERE c.coll_type = 'all_reduce'
),
per_trace AS (
  SELECT
    a.trace,
    avg(((a.bytes / a.group_size) * (a.group_size - 1) / (p.link_gbs * 1e9)) / (a.dur_ns / 1e9))
      FILTER (WHERE a.bytes > 0 AND a.group_size >= 2 AND a.dur_ns > 0) AS utilisation,
    count(*) FILTER (WHERE a.bytes > 0 AND a.group_size >= 2 AND a.dur_ns > 0) AS all_reduces,
    count(DISTINCT a.rank) FILTER (WHERE a.bytes > 0 AND a.group_size >= 2 AND a.dur_ns > 0) AS ranks,
    median(a.busbw_gbps) FILTER (WHERE a.bytes > 0 AND a.group_size >= 2 AND a.dur_ns > 0) AS median_busbw_gbps,
    count(*) FILTER (WHERE NOT (coalesce(a.bytes, 0) > 0 AND coalesce(a.group_size, 0) >= 2 AND a.dur_ns > 0))
      AS unsized
  FROM all_reduces AS a
  JOIN metric_params AS p USING (trace)
  GROUP BY a.trace
)
SELECT
  t.trace,
  CASE WHEN p.link_gbs > 0 THEN u.utilisation END AS value,
  CASE
    WHEN NOT p.link_gbs > 0 THEN 'link_gbs must be > 0'
    WHEN u.trace IS NULL THEN 'no all-reduce collectives'
    WHEN u.all_reduces = 0 THEN 'no all-reduce has a known message size, a group size >= 2 and a duration'
  END AS reason,
  u.all_reduces,
  u.ranks,
  p.link_gbs,
  u.median_busbw_gbps,
  u.unsized
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
JOIN metric_params AS p USING (trace)
LEFT JOIN per_trace AS u USING (trace)
