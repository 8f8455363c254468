-- metric: avg_comm_bandwidth_GBps
-- version: 1
-- unit: GB/s
-- grain: trace
-- category: collectives
-- family: collectives
-- see_also: hockney_alpha_s, hockney_beta_s_per_byte, hockney_inverse_beta_Bps, collective_busbw
-- polarity: higher
-- summary: value
-- description: CCL-Bench group 21's aggregate collective bandwidth, (n_chips - 1) * sum(message bytes) / sum(device time) over sized and timed collective XLA ops, in GB/s (1e9 B/s).
-- needs: collective XLA ops with message size and device time; n_chips
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- params: n_chips = card.total_count
-- columns:
--   n_chips         chips of the trace (the card, else the device planes)
--   sized_comm_ops  collective XLA ops with a message size
--   message_bytes   their summed message bytes
--   comm_time_s     their summed device time, s
-- Definition: over xla_ops with op_kind = 'comm', message_bytes > 0 and device_ps > 0
-- (every collective type, every device): (n_chips - 1) * sum(message_bytes) /
-- sum(device time in s) / 1e9. The (n - 1) factor is group 21's rough scaling from
-- one message to the data a chip exchanges; it is not a bus bandwidth in the
-- nccl-tests sense. n_chips: --param n_chips=N, else the card's total_count.
-- Differs from group 21 only through the op set (device ops, async pairs once with
-- their span, tuple shapes summed).
WITH sized AS (
  SELECT o.trace, sum(o.message_bytes) AS bytes, sum(o.device_ps) AS device_ps, count(*) AS ops
  FROM xla_ops AS o
  JOIN metric_scope AS m USING (trace, rank)
  WHERE o.op_kind = 'comm' AND o.message_bytes > 0 AND o.device_ps > 0
  GROUP BY o.trace
)
SELECT
  x.trace,
  CASE WHEN p.n_chips >= 2 THEN (p.n_chips - 1) * s.bytes / (s.device_ps / 1e12) / 1e9 END AS value,
  CASE
    WHEN x.no_ops_reason IS NOT NULL THEN x.no_ops_reason
    WHEN s.ops IS NULL THEN 'no collective XLA ops with message size and device time'
    WHEN p.n_chips IS NULL THEN 'no n_chips (--param n_chips=N, or the card''s total_count)'
    WHEN p.n_chips < 2 THEN 'n_chips < 2'
  END AS reason,
  p.n_chips,
  s.ops AS sized_comm_ops,
  s.bytes AS message_bytes,
  s.device_ps / 1e12 AS comm_time_s
FROM xla_scope_ops(metric_scope) AS x
LEFT JOIN metric_params AS p USING (trace)
LEFT JOIN sized AS s USING (trace)
