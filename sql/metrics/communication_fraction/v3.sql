-- metric: communication_fraction
-- version: 3
-- unit: ratio
-- ccl_bench_unit: %
-- grain: rank
-- category: communication
-- family: communication
-- see_also: communication_ratio, communication_overhead, horovod_phase_share
-- polarity: lower
-- leaderboard: communication
-- leaderboard_headline: yes
-- summary: mean
-- ccl_bench_trace_types: nsys, json, json_tpu
-- description: Share of device op time spent in communication, 0..1: GPU sum(comm kernel time)/sum(kernel time) per rank; XLA per device plane sum(comm op time)/sum(op time), averaged over the rank's devices; a CPU-only rank (Gloo): |U(collectives) ∩ inner steps| / inner step time.
-- needs: GPU kernels (Kineto) or XLA ops (xprof), or CPU collectives (Gloo) and steps on a rank without either
-- applies_if: table events | no GPU kernels, no XLA ops and no CPU collectives
-- columns:
--   source         gpu_kernels | xla_ops | cpu_collectives: what was measured
--   xla_op_source  xla_ops: where the device totals come from (xla_device_totals.op_source)
--   comm_s         communication time, s (comm kernels, comm XLA ops summed over devices, or the
--                    union of a CPU rank's collectives inside its inner steps)
--   op_time_s      all kernel (or XLA op) time, s; a CPU rank: its inner steps' time
--   xla_devices    xla_ops: device planes averaged
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
-- * CPU (no GPU kernels and no XLA ops, but Gloo's collective records,
--   sql/views/cpu_communication.sql `cpu_comm_intervals`): the share of the step that
--   is communication: |U(records) ∩ U(inner steps)| / Σ inner step durations (steps
--   of `inner_step_windows(2, ...)`: the first and last dropped of three or more).
--   Without steps: not applicable (no_steps_reason).
-- A rank with none of them is not applicable.
-- Differs from CCL-Bench: a ratio 0..1, not group 9's percentage; no step
-- windows (group 9 averages inner ProfilerStep windows, attributing whole kernels
-- that overlap them); XLA: device ops only (group 9 keeps every X event of a TPU
-- pid), every rank file rather than the first, async pairs by span.
-- Differs from version 2: a CPU-only rank (a PyTorch run on Gloo) gets its
-- communication share of the step where version 2 said "no GPU kernels and no XLA
-- ops"; GPU and XLA ranks are unchanged.
WITH dev AS (
  SELECT * FROM communication_fraction_rows(2, metric_scope)
),
cpu_comm AS (
  SELECT * EXCLUDE (coll_type) FROM cpu_comm_intervals(metric_scope)
),
cpu_ranks AS (
  SELECT DISTINCT trace, rank FROM cpu_comm
),
windows AS (
  SELECT w.trace, w.rank, 0 AS key, w.window_start AS ts_ns, w.window_end AS end_ns
  FROM inner_step_windows(2, metric_scope) AS w
  SEMI JOIN cpu_ranks USING (trace, rank)
),
step_time AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS step_ns FROM windows GROUP BY ALL
),
in_steps AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS comm_ns FROM intervals_intersect(cpu_comm, windows) GROUP BY ALL
)
SELECT
  d.trace,
  d.rank,
  CASE WHEN d.source IS NOT NULL THEN d.value WHEN t.step_ns > 0 THEN coalesce(i.comm_ns, 0) / t.step_ns END AS value,
  CASE
    WHEN d.source IS NOT NULL THEN d.reason
    WHEN c.rank IS NULL THEN 'no GPU kernels, no XLA ops and no CPU collectives (Gloo records)'
    WHEN t.rank IS NULL THEN no_steps_reason(2)
    WHEN NOT t.step_ns > 0 THEN 'steps have zero duration'
  END AS reason,
  coalesce(d.source, CASE WHEN c.rank IS NOT NULL THEN 'cpu_collectives' END) AS source,
  d.xla_op_source,
  CASE WHEN d.source IS NOT NULL THEN d.comm_s WHEN t.rank IS NOT NULL THEN coalesce(i.comm_ns, 0) / 1e9 END AS comm_s,
  CASE WHEN d.source IS NOT NULL THEN d.op_time_s ELSE t.step_ns / 1e9 END AS op_time_s,
  d.xla_devices
FROM dev AS d
LEFT JOIN cpu_ranks AS c ON c.trace = d.trace AND c.rank = d.rank AND d.source IS NULL
LEFT JOIN step_time AS t ON t.trace = c.trace AND t.rank = c.rank
LEFT JOIN in_steps AS i ON i.trace = c.trace AND i.rank = c.rank
