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
WITH ops AS (
  SELECT * FROM cpu_collectives_with(1, files) WHERE coll_type IS NOT NULL
),
best_size AS (  -- the best way each record states its message
  SELECT *
  FROM _collective_cpu_op_sizes
  QUALIFY row_number() OVER (PARTITION BY trace, rank, file_id, event_idx ORDER BY size_preference) = 1
),
grouped AS (
  SELECT
    o.*,
    s.size_kind, s.in_bytes, s.out_bytes, s.in_nelems AS size_in_nelems, s.out_nelems AS size_out_nelems,
    s.dtype AS size_dtype,
    CASE WHEN o.coll_type IN ('all_gather', 'reduce_scatter')
      THEN _nelems_ratio(s.in_nelems, s.out_nelems) END AS ratio_group_size,
    p.pg_size,
    t.world_size
  FROM ops AS o
  LEFT JOIN best_size AS s USING (trace, rank, file_id, event_idx)
  LEFT JOIN _process_group_sizes AS p ON p.trace = o.trace AND p.rank = o.rank AND p.pg_name = o.pg_name
  LEFT JOIN traces AS t ON t.trace = o.trace
),
sized AS (
  SELECT
    *,
    coalesce(group_size, ratio_group_size, pg_size, world_size) AS group_size_,
    CASE
      WHEN group_size IS NOT NULL THEN 'Group size'
      WHEN ratio_group_size IS NOT NULL THEN CASE coll_type WHEN 'all_gather' THEN 'Out/In' ELSE 'In/Out' END || ' ' || size_kind
      WHEN pg_size IS NOT NULL THEN 'process group ' || pg_name || ' size'
      WHEN world_size IS NOT NULL THEN 'trace world size'
    END AS group_size_source
  FROM grouped
)
SELECT
  o.trace,
  o.rank,
  st.step,
  o.role,
  o.name,
  o.coll_type,
  o.tid,
  o.ts_ns,
  o.dur_ns,
  o.end_ns,
  CAST(CASE
    WHEN o.coll_type = 'all_gather' AND o.out_bytes IS NOT NULL THEN o.out_bytes
    WHEN o.coll_type = 'all_gather' THEN o.in_bytes * o.group_size_  -- only the input is listed
    ELSE o.in_bytes
  END AS BIGINT) AS bytes,
  o.in_bytes,
  o.out_bytes,
  coalesce(o.dtype, o.size_dtype) AS dtype,
  o.group_size_ AS group_size,
  CASE
    WHEN o.in_bytes IS NULL THEN NULL
    WHEN o.coll_type = 'all_gather' AND o.out_bytes IS NULL THEN o.size_kind || ' x group size'
    WHEN o.coll_type = 'all_gather' THEN o.size_kind || ': output'
    ELSE o.size_kind || ': input'
  END AS size_source,
  o.group_size_source,
  CASE
    WHEN o.in_bytes IS NULL AND o.args LIKE '%TensorList%'
      THEN 'size unknown: the op lists a TensorList, whose element type Kineto does not record'
    WHEN o.in_bytes IS NULL THEN 'size unknown: no msg nelems and no sized Input Dims'
  END AS reason,
  o.pg_name,
  o.seq,
  o.file_id,
  o.event_idx
FROM (
  SELECT s.*, e.args
  FROM sized AS s
  JOIN events AS e USING (trace, rank, file_id, event_idx)
) AS o
LEFT JOIN steps AS st
  ON st.trace = o.trace AND st.rank = o.rank AND st.source = 'cpu_annotation'
  AND o.ts_ns >= st.ts_ns AND o.ts_ns < st.end_ns;
