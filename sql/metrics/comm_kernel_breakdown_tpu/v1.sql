-- metric: comm_kernel_breakdown_tpu
-- version: 1
-- unit: s
-- grain: trace
-- category: communication
-- family: communication
-- see_also: total_comm_time_s, allreduce_comm_time_s, avg_comm_kernel_time_s
-- polarity: lower
-- summary: value
-- description: Total device time of XLA communication ops (all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute, send/recv), in seconds, over every device of the profile; the split by collective type is in the details.
-- needs: an XLA/xprof profile (TPU, or GPU through XLA) with communication ops
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- params: none
-- columns:
--   events                the communication op events counted (an async op's -start and -done are two)
--   all_reduce_s          all-reduce device time, seconds
--   all_gather_s          all-gather device time, seconds
--   reduce_scatter_s      reduce-scatter device time, seconds
--   all_to_all_s          all-to-all device time, seconds
--   collective_permute_s  collective-permute device time, seconds
--   other_comm_s          send, recv, broadcast and other communication ops, seconds
--   devices               the devices with communication ops
-- Definition: over `xla_op_events` (sql/views/xla.sql: one row per op event on a
-- device's XLA Ops line, or per host XLA op of a CPU-only profile) whose
-- classification (xla_op_rules) is comm: value = Σ device_duration_ps (else dur)
-- in seconds. Each event counts once, as in CCL-Bench, so an async collective's
-- -start and -done halves add their own device times (the transfer between them
-- is not device time of either).
-- Differs from CCL-Bench (tools/comm_kernel_breakdown_tpu_group_4): CCL-Bench
-- returns a dict (per type {total_us, count, avg_us}, total_communication_time_us,
-- the batch and TP parsed from the file name), which its website cannot turn
-- into a number; the number here is that dict's total, in seconds, and the
-- types are detail columns. CCL-Bench reads the folder's single *.json.gz (it
-- stops when there are several), matches name substrings on every event,
-- host threads included, so a host-side `send`/`recv` or any name containing
-- `send` counts; here device ops only and the shared XLA rules (which also know
-- JAX's psum / ppermute names and xprof's categories).
WITH comm AS (
  SELECT e.trace, e.rank, e.pid, e.device_ps, e.coll_type
  FROM xla_op_events AS e
  SEMI JOIN metric_scope USING (trace, rank)
  WHERE e.op_kind = 'comm'
),
per_trace AS (
  SELECT
    trace,
    count(*) AS events,
    sum(device_ps) AS comm_ps,
    coalesce(sum(device_ps) FILTER (WHERE coll_type = 'all_reduce'), 0) AS all_reduce_ps,
    coalesce(sum(device_ps) FILTER (WHERE coll_type = 'all_gather'), 0) AS all_gather_ps,
    coalesce(sum(device_ps) FILTER (WHERE coll_type = 'reduce_scatter'), 0) AS reduce_scatter_ps,
    coalesce(sum(device_ps) FILTER (WHERE coll_type = 'all_to_all'), 0) AS all_to_all_ps,
    coalesce(sum(device_ps) FILTER (WHERE coll_type = 'collective_permute'), 0) AS collective_permute_ps,
    count(DISTINCT (rank, pid)) AS devices
  FROM comm
  GROUP BY trace
)
SELECT
  s.trace,
  CASE WHEN s.xla_ops > 0 THEN coalesce(p.comm_ps, 0) / 1e12 END AS value,
  s.no_ops_reason AS reason,
  coalesce(p.events, 0) AS events,
  p.all_reduce_ps / 1e12 AS all_reduce_s,
  p.all_gather_ps / 1e12 AS all_gather_s,
  p.reduce_scatter_ps / 1e12 AS reduce_scatter_s,
  p.all_to_all_ps / 1e12 AS all_to_all_s,
  p.collective_permute_ps / 1e12 AS collective_permute_s,
  (p.comm_ps - p.all_reduce_ps - p.all_gather_ps - p.reduce_scatter_ps - p.all_to_all_ps
   - p.collective_permute_ps) / 1e12 AS other_comm_s,
  p.devices
FROM xla_scope_ops(metric_scope) AS s
LEFT JOIN per_trace AS p USING (trace)
