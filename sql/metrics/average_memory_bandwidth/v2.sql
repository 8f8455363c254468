-- metric: average_memory_bandwidth
-- version: 2
-- unit: GB/s
-- grain: rank
-- category: memory
-- polarity: higher
-- leaderboard: memory
-- summary: ratio memcpy_gb / memcpy_s
-- description: Achieved memcpy bandwidth per rank, Σbytes / Σdur over memcpy activities with bytes > 0 and dur > 0, in GB/s (1e9 B/s).
-- needs: memcpy activities with a byte count
-- params: none
-- Definition: memcpy activities are the GPU `gpu_memcpy` events (every direction:
-- HtoD, DtoH, DtoD, PtoP, ...) with Kineto's `bytes` argument; bytes per
-- nanosecond equals GB/s. A duration-weighted average: long copies weigh more.
-- Memsets are fills, not transfers, and are left out. Not applicable when the
-- rank has no memcpy with bytes > 0 and dur > 0.
-- Differs from CCL-Bench: its JSON variant picks events by a memcpy name regex
-- (which also catches memsets and copy kernels, whose `bytes` are absent), and its
-- TPU variant times copy-start/copy-done pairs; here only memcpy activities.
-- Summary: Σ memcpy_gb / Σ memcpy_s over the ranks: every rank's memcpys
-- pooled (bytes over time), as CCL-Bench's JSON tool pools its rank files.
-- Differs from version 1: the same rows plus `memcpy_gb`; version 1's summary
-- was the unweighted mean of the per-rank bandwidths.
WITH per_rank AS (
  SELECT trace, rank, count(*) AS memcpys, sum(bytes) AS total_bytes, sum(dur_ns) AS memcpy_ns
  FROM gpu_ops
  WHERE kind = 'memcpy' AND bytes > 0 AND dur_ns > 0
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.total_bytes / p.memcpy_ns AS value,
  CASE WHEN p.memcpys IS NULL THEN 'no memcpy with bytes and duration' END AS reason,
  p.memcpys,
  p.total_bytes AS bytes,
  p.memcpy_ns / 1e9 AS memcpy_s,
  p.total_bytes / 1e9 AS memcpy_gb
FROM metric_scope AS m
LEFT JOIN per_rank AS p USING (trace, rank)
