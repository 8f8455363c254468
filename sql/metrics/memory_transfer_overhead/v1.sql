-- metric: memory_transfer_overhead
-- version: 1
-- unit: ratio
-- ccl_bench_unit: %
-- grain: rank
-- category: memory
-- polarity: lower
-- leaderboard: memory
-- summary: mean
-- description: Share of the rank's GPU span spent in memcpys that no compute kernel overlaps, |U(memcpy) - U(non-comm kernels)| / span(memcpy ∪ kernels), 0..1.
-- needs: GPU kernels or memcpy activities
-- applies_if: table events | no GPU kernels or memcpy activities
-- params: none
-- columns:
--   exposed_memcpy_s  |U(memcpy) - U(non-comm kernels)|, s
--   memcpy_s          |U(memcpy)|, s
--   span_s            span of memcpys and kernels, s
--   memcpys           memcpys on the rank
-- Definition: U(memcpy) = union of the rank's memcpy activities (`gpu_memcpy`,
-- every direction); U(non-comm kernels) = union of its kernels that the shared
-- classification does not call comm. The exposed copy time is the first minus the
-- second (`intervals_subtract`; classification: kernel_class_rules version 1), so a copy hidden under compute costs nothing and
-- one running beside a comm kernel alone still counts. The span runs from the
-- first start to the last end over memcpys and all kernels (comm included).
-- Memsets count nowhere. A rank with kernels but no memcpy scores 0.
-- Differs from CCL-Bench: CCL-Bench reports percent (ccl_bench_unit). Its JSON
-- (Kineto) path measures copy kernels, not memcpy activities: events of category
-- kernel (or Op, gpu_op, device_op, none) whose name matches
-- memcpy|memset|copy_kernel|copy.|copy-start|copy-done|dma (trace_metric_utils.py,
-- memsets included), against the span of those events; the memcpy activities
-- (category gpu_memcpy) a Kineto trace records its copies as are never read, so a
-- trace without such kernels gives -1. Its Nsight path reads the memcpy activities
-- (CUPTI_ACTIVITY_KIND_MEMCPY) as here, and its TPU variant divides DMA time by the
-- step time. Here: memcpy activities over the kernel/memcpy span, 0..1.
WITH memcpys AS (
  SELECT trace, rank, 0 AS key, ts_ns, end_ns FROM gpu_ops_classified_with(1) WHERE kind = 'memcpy'
),
compute AS (
  SELECT trace, rank, 0 AS key, ts_ns, end_ns
  FROM gpu_ops_classified_with(1)
  WHERE kind = 'kernel' AND kernel_class <> 'comm'
),
exposed AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS exposed_ns
  FROM intervals_subtract(memcpys, compute)
  GROUP BY ALL
),
copy_busy AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS memcpy_ns
  FROM intervals_union(memcpys)
  GROUP BY ALL
),
span AS (
  SELECT
    trace,
    rank,
    count(*) FILTER (WHERE kind = 'memcpy') AS memcpys,
    count(*) FILTER (WHERE kind = 'kernel') AS kernels,
    min(ts_ns) AS first_ns,
    max(end_ns) AS last_ns
  FROM gpu_ops
  WHERE kind IN ('kernel', 'memcpy')
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  coalesce(e.exposed_ns, 0) / nullif(s.last_ns - s.first_ns, 0) AS value,
  CASE
    WHEN s.trace IS NULL THEN 'no GPU kernels or memcpy activities'
    WHEN s.last_ns = s.first_ns THEN 'GPU span is zero'
  END AS reason,
  coalesce(e.exposed_ns, 0) / 1e9 AS exposed_memcpy_s,
  coalesce(c.memcpy_ns, 0) / 1e9 AS memcpy_s,
  (s.last_ns - s.first_ns) / 1e9 AS span_s,
  s.memcpys
FROM metric_scope AS m
LEFT JOIN span AS s USING (trace, rank)
LEFT JOIN exposed AS e USING (trace, rank)
LEFT JOIN copy_busy AS c USING (trace, rank)
