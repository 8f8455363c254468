-- metric: estimated_bandwidth
-- version: 1
-- unit: GB/s
-- grain: rank
-- category: memory
-- family: memory
-- see_also: average_memory_bandwidth, hta_memory_bw_summary
-- polarity: higher
-- summary: sum
-- description: Estimated aggregate memory bandwidth of an XLA profile: Σ bytes accessed by its device ops (raw_bytes_accessed, else bytes_accessed) / the devices' active span, GB/s, summed over hosts.
-- needs: an XLA/xprof profile whose ops carry raw_bytes_accessed or bytes_accessed
-- params: none
-- columns:
--   total_bytes     the bytes the host's device ops accessed
--   wall_s          the devices' active span on that host, seconds (xla_wall_time.device_span_ns)
--   ops_with_bytes  the op events that carried a byte count
-- Definition: per rank (one profile file: a host and its devices), over
-- `xla_op_events` (every device op event, or each host XLA op of a CPU-only
-- profile): total_bytes = Σ raw_bytes_accessed, else bytes_accessed, where > 0;
-- wall_s = max(end) - min(start) over the device planes' events
-- (`xla_wall_time`); value = total_bytes / wall_s / 1e9. Summary: the sum over
-- ranks, the bandwidth of the whole job (hosts run side by side).
-- Differs from CCL-Bench (tools/estimated_bandwidth_group_4): CCL-Bench takes the
-- first *.json / *.trace.json.gz file it finds (one host), sums the byte counts
-- of every event, host threads included, and divides by the span of every event
-- with a timestamp, host threads included (a host-side profiler setup before
-- the first op lengthens it). Here device ops over the devices' span, and every
-- host of the profile.
WITH bytes AS (
  SELECT
    e.trace, e.rank,
    sum(coalesce(nullif(e.raw_bytes_accessed, 0), e.bytes_accessed))
      FILTER (WHERE coalesce(nullif(e.raw_bytes_accessed, 0), e.bytes_accessed) > 0) AS total_bytes,
    count(*) FILTER (WHERE coalesce(nullif(e.raw_bytes_accessed, 0), e.bytes_accessed) > 0) AS ops_with_bytes
  FROM xla_op_events AS e
  SEMI JOIN metric_scope USING (trace, rank)
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  CASE WHEN b.total_bytes > 0 AND w.device_span_ns > 0 THEN b.total_bytes / (w.device_span_ns / 1e9) / 1e9 END
    AS value,
  CASE
    WHEN b.rank IS NULL THEN 'no XLA ops (not an XLA/xprof profile)'
    WHEN b.total_bytes IS NULL THEN 'no XLA op carries raw_bytes_accessed or bytes_accessed'
    WHEN NOT w.device_span_ns > 0 THEN 'the devices have no active span'
  END AS reason,
  b.total_bytes,
  w.device_span_ns / 1e9 AS wall_s,
  coalesce(b.ops_with_bytes, 0) AS ops_with_bytes
FROM metric_scope AS m
LEFT JOIN bytes AS b USING (trace, rank)
LEFT JOIN xla_wall_time AS w USING (trace, rank)
