-- metric: total_communication_time
-- version: 3
-- unit: s
-- grain: rank
-- category: communication
-- family: communication
-- see_also: total_comm_time_s, traffic_window
-- polarity: lower
-- leaderboard: communication
-- summary: mean
-- ccl_bench_trace_types: nsys, json, json_tpu
-- description: Wall time with at least one collective running, |U(comm kernels)| per rank over the whole trace (a CPU-only rank: |U(Gloo's collective records)|), in seconds.
-- needs: GPU kernels, or CPU collectives (Gloo) on a rank without GPU kernels and XLA ops
-- applies_if: table events | no GPU kernels and no CPU collectives
-- params: none
-- columns:
--   comm_kernels     communication kernels on the rank (GPU ranks)
--   source           gpu_kernels | cpu_collectives (what was measured)
--   cpu_collectives  Gloo collective records on the rank (CPU-only ranks)
-- Definition, per rank:
--   gpu_kernels      the rank has GPU kernels: as version 2, |U(comm kernels)| over all
--                    streams and the whole trace (kernel_class_rules version 2).
--   cpu_collectives  no GPU kernels and no XLA ops, but Gloo's collective records
--                    (sql/views/cpu_communication.sql, `cpu_comm_intervals`: the
--                    `collectives` rows with source cpu_backend; Gloo runs each
--                    collective inside its record on a worker thread): |U(records)|.
-- A rank with neither is not applicable (XLA: total_comm_time_s).
-- Differs from version 2: a CPU-only rank (a PyTorch run on Gloo) gets its Gloo
-- collectives' time where version 2 said "no GPU kernels"; GPU ranks are unchanged.
WITH gpu AS (
  SELECT * FROM total_communication_time_rows(2, metric_scope)
),
cpu_comm AS (
  SELECT * FROM cpu_comm_intervals(metric_scope)
),
cpu_busy AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS comm_ns FROM intervals_union(cpu_comm) GROUP BY ALL
),
cpu_seen AS (
  SELECT trace, rank, count(*) AS records FROM cpu_comm GROUP BY ALL
)
SELECT
  g.trace,
  g.rank,
  CASE WHEN g.value IS NOT NULL THEN g.value WHEN s.rank IS NOT NULL THEN coalesce(b.comm_ns, 0) / 1e9 END AS value,
  CASE
    WHEN g.value IS NOT NULL OR s.rank IS NOT NULL THEN NULL
    ELSE 'no GPU kernels and no CPU collectives (Gloo records)'
  END AS reason,
  g.comm_kernels,
  CASE WHEN g.value IS NOT NULL THEN 'gpu_kernels' WHEN s.rank IS NOT NULL THEN 'cpu_collectives' END AS source,
  s.records AS cpu_collectives
FROM gpu AS g
LEFT JOIN cpu_seen AS s ON s.trace = g.trace AND s.rank = g.rank AND g.value IS NULL
LEFT JOIN cpu_busy AS b ON b.trace = g.trace AND b.rank = g.rank
