-- The message of every CPU-side collective record, and the step it belongs to:
-- the view to read collectives from on ranks without GPU communication kernels
-- (Gloo on CPU, where `collectives`, built from GPU kernels, has no rows), and the
-- CPU side of NCCL ranks.
--
-- One row per typed record that `cpu_collectives` (rules version 1) finds:
-- `role` 'call' (c10d::* ops, record_param_comms: what the program asked for) or
-- 'backend' (nccl:*, gloo:*: what the backend ran; Gloo runs them on its worker
-- threads, and implements some collectives with others: reduce_scatter_tensor
-- is a gloo:all_reduce of the whole input). One call can be several 'call' rows
-- on NCCL ranks (c10d::allreduce_ > record_param_comms); count calls with
-- `coll_call_num` or `cpu_collective_calls_with`, not here.
--
-- `bytes` follows nccl-tests, as `collectives` does: all_gather counts its
-- OUTPUT (the gathered tensor), every other type its input. From the record's
-- own arguments (the shared `_collective_cpu_op_sizes`), best first:
--   1 'msg nelems'               In/Out msg nelems x dtype (record_param_comms)
--   2 'output and input tensors' a c10d::* op's Input Dims: entry 1 is the
--                                output, entry 2 the input
--   3 'input tensors'            the Input Dims the record was given (gloo:*,
--                                nccl:*): the input; an all_gather's output is
--                                then input x group size
-- c10d::allreduce_ lists its tensors as a TensorList without an element type, so
-- its bytes are NULL (reason says so); its backend record has them.
-- `group_size`: the record's Group size, else the Out/In ratio of an all_gather
-- (In/Out of a reduce_scatter) when both sides are known, else the size of the
-- record's process group, else the trace's world size.
-- `step`: the ProfilerStep (CPU track) whose span holds the record's start;
-- NULL when none does or the rank has no such steps.
-- requires: collectives, steps

CREATE OR REPLACE VIEW cpu_collective_messages AS
-- the records and their messages are `_cpu_collective_records_like` (collectives.sql,
-- which also makes Gloo's records the collectives of ranks without GPU ones);
-- this view adds the step
SELECT
  o.trace, o.rank, st.step, o.role, o.name, o.coll_type, o.tid, o.ts_ns, o.dur_ns, o.end_ns,
  o.bytes, o.in_bytes, o.out_bytes, o.dtype, o.group_size, o.size_source, o.group_size_source,
  o.reason, o.pg_name, o.seq, o.file_id, o.event_idx
FROM _cpu_collective_records_like('%', files) AS o
LEFT JOIN steps AS st
  ON st.trace = o.trace AND st.rank = o.rank AND st.source = 'cpu_annotation'
  AND o.ts_ns >= st.ts_ns AND o.ts_ns < st.end_ns;
