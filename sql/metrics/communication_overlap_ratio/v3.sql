-- metric: communication_overlap_ratio
-- version: 3
-- unit: ratio
-- grain: rank
-- category: communication
-- family: overlap
-- see_also: compute_comm_overlap, hta_comm_comp_overlap
-- polarity: higher
-- summary: mean
-- ccl_bench_unit: ratio
-- description: Share of communication time hidden under compute: |U(comm) ∩ U(compute)| / |U(comm)| per rank, 0..1 (GPU: comm and non-comm kernels; a CPU-only rank: Gloo's collective records and CPU ops); exposed_s is the rest.
-- needs: communication kernels on the rank, or CPU collectives (Gloo) on a rank without GPU kernels and XLA ops
-- applies_if: table events | no GPU kernels and no CPU collectives
-- columns:
--   comm_kernels  communication kernels on the rank
--   comm_s        |U(comm kernels)|, s
--   overlapped_s  the part of it that compute kernels overlap, s
--   exposed_s     comm_s - overlapped_s: communication nothing hides, s
--   source        gpu_kernels | cpu_collectives (what was measured)
-- Definition, per rank, U = union of intervals:
--   gpu_kernels      the rank has GPU kernels: as version 2 (comm = kernel_class_rules
--                    version 2 comm kernels, compute = every other kernel).
--   cpu_collectives  no GPU kernels and no XLA ops, but Gloo's collective records
--                    (sql/views/cpu_communication.sql): comm = the records
--                    (`cpu_comm_intervals`), compute = the rank's CPU ops (cat cpu_op)
--                    that are not collective ops (`cpu_compute_intervals`): the
--                    forward and backward ops DDP overlaps its all-reduces with.
-- exposed_s = |U(comm) - U(compute)|: the communication the step waits for.
-- Differs from version 2: a CPU-only rank (a PyTorch run on Gloo) gets a value
-- where version 2 said "no GPU kernels"; exposed_s is new; GPU ranks are unchanged.
WITH gpu AS (
  SELECT * FROM communication_overlap_ratio_rows(2, metric_scope)
),
cpu_comm AS (
  SELECT * EXCLUDE (coll_type) FROM cpu_comm_intervals(metric_scope)
),
cpu_compute AS (
  SELECT * FROM cpu_compute_intervals(metric_scope)
),
cpu AS (
  SELECT trace, rank, a_ns AS comm_ns, overlap_ns, exposed_ns FROM intervals_overlap_totals(cpu_comm, cpu_compute)
)
SELECT
  g.trace,
  g.rank,
  CASE WHEN g.comm_kernels IS NOT NULL THEN g.value ELSE c.overlap_ns / c.comm_ns END AS value,
  CASE
    WHEN g.comm_kernels IS NOT NULL THEN g.reason
    WHEN c.rank IS NULL THEN 'no GPU kernels and no CPU collectives (Gloo records)'
    WHEN c.comm_ns = 0 THEN 'CPU collectives have zero duration'
  END AS reason,
  g.comm_kernels,
  CASE WHEN g.comm_kernels IS NOT NULL THEN g.comm_s ELSE c.comm_ns / 1e9 END AS comm_s,
  CASE WHEN g.comm_kernels IS NOT NULL THEN g.overlapped_s ELSE c.overlap_ns / 1e9 END AS overlapped_s,
  CASE WHEN g.comm_kernels IS NOT NULL THEN g.comm_s - g.overlapped_s ELSE c.exposed_ns / 1e9 END AS exposed_s,
  CASE WHEN g.comm_kernels IS NOT NULL THEN 'gpu_kernels' WHEN c.rank IS NOT NULL THEN 'cpu_collectives' END AS source
FROM gpu AS g
LEFT JOIN cpu AS c ON c.trace = g.trace AND c.rank = g.rank AND g.comm_kernels IS NULL
