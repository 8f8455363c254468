-- metric: communication_fraction
-- version: 2
-- unit: ratio
-- grain: rank
-- category: communication
-- polarity: lower
-- leaderboard: communication
-- summary: mean
-- description: Share of device op time spent in communication, 0..1: GPU sum(comm kernel time)/sum(kernel time) per rank; XLA per device plane sum(comm op time)/sum(op time), averaged over the rank's devices.
-- needs: GPU kernels (Kineto) or XLA ops (xprof)
-- One metric for both kinds of trace; `source` says which definition a row used.
-- * GPU (a rank with Kineto kernels): sum(dur) of kernels the shared
--   classification (gpu_ops_classified_with(2): kernel_class_rules version 2) calls `comm` /
--   sum(dur) of all kernels of the rank, over the whole trace (memcpy/memset
--   activities are not kernels). Kernels are summed, not merged.
-- * XLA (a rank with XLA ops, xla_ops): per device plane, sum of comm ops' device
--   time / sum of all ops' device time (comm + compute + other); an async
--   start/done pair counts its start-to-done span as comm time, so the ops it
--   overlaps are in the denominator too. The rank's value is the mean over its
--   devices (a host-only JAX profile: the device_ordinal of its host XLA ops).
-- A rank with neither is not applicable.
-- Differs from CCL-Bench: a ratio 0..1, not group 9's percentage; no step
-- windows (group 9 averages inner ProfilerStep windows, attributing whole kernels
-- that overlap them); XLA: device ops only (group 9 keeps every X event of a TPU
-- pid), every rank file rather than the first, async pairs by span.
-- Differs from version 1: kernel_class_rules version 2 (sql/views/kernel_classes.sql):
-- DeepEP's dispatch/combine/notify/cached-notify/barrier kernels (deep_ep::,
-- dpsk::ep::) are communication, its get_dispatch_layout is compute; version 1
-- called get_dispatch_layout comm and left cached_notify, barrier and the
-- dpsk::ep::cuda:: names compute.
WITH gpu AS (
  SELECT
    trace,
    rank,
    sum(dur_ns) FILTER (WHERE kernel_class = 'comm') AS comm_ns,
    sum(dur_ns) AS all_ns,
    count(*) AS kernels
  FROM gpu_ops_classified_with(2)
  WHERE kind = 'kernel'
  GROUP BY trace, rank
),
xla AS (
  SELECT
    trace,
    rank,
    avg(comm_ps / all_ps) AS mean_fraction,
    sum(comm_ps) AS comm_ps,
    sum(all_ps) AS all_ps,
    count(*) AS devices,
    string_agg(DISTINCT op_source, ',') AS op_source
  FROM xla_device_totals
  WHERE all_ps > 0
  GROUP BY trace, rank
)
SELECT
  s.trace,
  s.rank,
  CASE
    WHEN g.kernels IS NOT NULL THEN coalesce(g.comm_ns, 0) / g.all_ns
    ELSE x.mean_fraction
  END AS value,
  CASE
    WHEN g.kernels IS NULL AND x.devices IS NULL THEN 'no GPU kernels and no XLA ops'
    WHEN g.kernels IS NOT NULL AND coalesce(g.all_ns, 0) = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  CASE WHEN g.kernels IS NOT NULL THEN 'gpu_kernels' WHEN x.devices IS NOT NULL THEN 'xla_ops' END AS source,
  CASE WHEN g.kernels IS NULL THEN x.op_source END AS xla_op_source,
  CASE WHEN g.kernels IS NOT NULL THEN coalesce(g.comm_ns, 0) / 1e9 ELSE x.comm_ps / 1e12 END AS comm_s,
  CASE WHEN g.kernels IS NOT NULL THEN g.all_ns / 1e9 ELSE x.all_ps / 1e12 END AS op_time_s,
  x.devices AS xla_devices
FROM metric_scope AS s
LEFT JOIN gpu AS g USING (trace, rank)
LEFT JOIN xla AS x USING (trace, rank)
