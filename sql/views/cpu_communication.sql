-- Communication on ranks without GPU kernels and without XLA ops (a CPU run: PyTorch on
-- Gloo): what the step-time metrics of such a rank read (total_communication_time v3,
-- communication_overlap_ratio v3, communication_fraction v3).
-- requires: collectives, kernel_classes, slices, gpu, xla
--
-- The collectives of a CPU-only rank are Gloo's backend records (`gloo:all_reduce`,
-- ..., `collectives` rows with source 'cpu_backend'): Gloo runs each collective on a
-- worker thread inside its record, so the record's span is the communication (waits
-- for late peers included, as a kernel's is). The c10d calls (`c10d::allreduce_`)
-- only enqueue the work and return; NCCL's CPU records only launch a kernel. MPI's
-- backend writes no record of its own in a Kineto trace, so an MPI CPU run has none.

-- The ranks of `scope` (a relation of trace, rank) with no GPU kernel and no XLA op.
CREATE OR REPLACE MACRO cpu_only_ranks(scope) AS TABLE
SELECT trace, rank FROM query_table(scope)
EXCEPT SELECT DISTINCT trace, rank FROM gpu_ops WHERE kind = 'kernel'
EXCEPT SELECT DISTINCT trace, rank FROM xla_ops;

-- One row per CPU collective (Gloo's record) of the CPU-only ranks of `scope`, as an
-- interval (trace, rank, key 0, ts_ns, end_ns) with its type, for the interval macros.
CREATE OR REPLACE MACRO cpu_comm_intervals(scope) AS TABLE
SELECT c.trace, c.rank, 0 AS key, c.ts_ns, c.end_ns, c.coll_type
FROM collectives_with(2) AS c
SEMI JOIN cpu_only_ranks(scope) AS r USING (trace, rank)
WHERE c.source = 'cpu_backend' AND c.end_ns IS NOT NULL;

-- The CPU compute of the CPU-only ranks of `scope`: every CPU op (cat cpu_op) that the
-- 'cpu_op' collective rules of kernel_class_rules (version 2: c10d::*,
-- record_param_comms, nccl:*, gloo:*) do not match, as intervals. Nested ops merge
-- in a union; an op that waits for a collective is not one of them unless it is
-- itself a collective op (c10d::wait... is).
CREATE OR REPLACE MACRO cpu_compute_intervals(scope) AS TABLE
SELECT s.trace, s.rank, 0 AS key, s.ts_ns, s.end_ns
FROM slices AS s
SEMI JOIN cpu_only_ranks(scope) AS r USING (trace, rank)
WHERE s.cat = 'cpu_op' AND s.end_ns IS NOT NULL
  AND len(kernel_class_matches(s.name, 2, 'cpu_op')) = 0;
