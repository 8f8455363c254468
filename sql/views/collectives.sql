-- Collectives: one row per collective instance per rank, built from the GPU
-- communication kernels (kernel_class = 'comm'), with its type, message size,
-- process group, sequence number, bandwidths, and a `match_id` that is equal for
-- the instances of one collective on different ranks (the cross-rank key that
-- skew and straggler metrics group by).
--
-- Where the facts come from, best first:
--   type  1. the kernel's `Collective name` argument (PyTorch >= 2.1 copies it
--            from record_param_comms; RCCL's ncclDevKernel_Generic needs it);
--         2. the innermost collective CPU op around the kernel's launch: the
--            CUDA/HIP runtime call with the kernel's `correlation` sits inside
--            `nccl:all_to_all`, `c10d::allreduce_`, `record_param_comms`,
--            `symm_mem::multimem_all_reduce_` ... on the same thread. When the
--            launch is not in the trace, the op whose External id the kernel
--            carries. (Old PyTorch, e.g. the 8xV100 DLRM traces, writes no
--            collective arguments on kernels and gives the runtime call its own
--            correlation as External id, so containment is the only link.)
--         3. the kernel name (kernel_class_rules: ncclKernel_AllReduce ...).
--   size  1. the kernel's `In/Out msg nelems` x `dtype`;
--         2. the same arguments on the CPU op (record_param_comms);
--         3. `Input Dims` x `Input type` of the innermost sizing CPU op (not
--            `c10d::*`, whose first argument is the OUTPUT tensor for
--            *_base_ ops): the tensors it was given, summed.
--   bytes = Out for all_gather, In for everything else (TraceLens' "full msg
--   size"); from Input Dims an all_gather's Out = In x group_size.
-- requires: kernel_classes, catalog

-- Bytes per element, the ONE dtype table: c10d dtype names (`Float`,
-- `BFloat16`, kernel `dtype` arg) and the C++ type names of `Input type`
-- (`float`, `long int`, `c10::Half`), keyed by `dtype_key()`.
CREATE OR REPLACE VIEW dtype_sizes AS
SELECT * FROM (VALUES
  ('float', 4), ('float32', 4), ('int', 4), ('int32', 4), ('uint32', 4), ('unsigned int', 4),
  ('double', 8), ('float64', 8), ('long', 8), ('long int', 8), ('long long', 8),
  ('int64', 8), ('uint64', 8), ('unsigned long', 8), ('complexfloat', 8), ('complex<float>', 8),
  ('half', 2), ('float16', 2), ('bfloat16', 2), ('bf16', 2), ('short', 2), ('short int', 2),
  ('int16', 2), ('uint16', 2), ('unsigned short', 2), ('complexhalf', 4), ('complex<half>', 4),
  ('byte', 1), ('char', 1), ('bool', 1), ('int8', 1), ('uint8', 1), ('signed char', 1),
  ('unsigned char', 1), ('float8_e4m3fn', 1), ('float8_e5m2', 1), ('float8_e4m3fnuz', 1),
  ('float8_e5m2fnuz', 1),
  ('complexdouble', 16), ('complex<double>', 16)
) AS t(dtype_key, dtype_bytes);

-- 'c10::BFloat16' -> 'bfloat16', 'Float' -> 'float', 'long int' -> 'long int'.
CREATE OR REPLACE MACRO dtype_key(t) AS
lower(trim(regexp_replace(t, '^(c10::|at::|torch\.)', '')));

-- nccl-tests' bus-bandwidth factor for a collective over n ranks
-- (doc/PERFORMANCE.md): all_reduce 2(n-1)/n; all_gather, reduce_scatter,
-- all_to_all, gather, scatter (n-1)/n; broadcast, reduce and point-to-point 1.
-- NULL for barrier and unknown types (no meaningful bus traffic).
CREATE OR REPLACE MACRO coll_busbw_factor(coll_type, n) AS
CASE
  WHEN coll_type = 'all_reduce' THEN 2.0 * (n - 1) / n
  WHEN coll_type IN ('all_gather', 'reduce_scatter', 'all_to_all', 'gather', 'scatter') THEN (n - 1) / n::DOUBLE
  WHEN coll_type IN ('broadcast', 'reduce', 'send', 'recv', 'send_recv') THEN 1.0
END;

-- CPU-side ops and annotations that name a collective, with what they say
-- about it. Wider than `cpu_collectives` (SymmMem and functional collectives)
-- and keeps what the linking needs (file, thread, args). `coll_type` is NULL
-- for ops that do not say which collective (record_param_comms without a
-- `Collective name`, c10d::wait).
CREATE OR REPLACE VIEW _collective_cpu_ops AS
SELECT
  trace, rank, file_id, event_idx, pid, tid, ts_ns, end_ns, name, external_id,
  coll_type_of(
    coalesce(collective_name, regexp_replace(name, '^(_?c10d(_functional)?::|nccl:|gloo:|symm_mem::)', ''))
  ) AS coll_type,
  in_msg_nelems, out_msg_nelems, dtype, group_size, pg_name, seq,
  -- c10d::* ops list the OUTPUT first for *_base_ ops: never a size source
  NOT starts_with(name, 'c10d::') AS sizes_inputs,
  args
FROM slices
WHERE cat IN ('cpu_op', 'user_annotation')
  AND (
    name LIKE 'c10d::%' OR name LIKE '%c10d_functional::%' OR name LIKE 'nccl:%'
    OR name LIKE 'gloo:%' OR name LIKE 'symm_mem::%' OR name = 'record_param_comms'
  );

-- The tensors a sizing op was given: one row per `Input Dims` entry whose
-- `Input type` has a known element size (Scalar, TensorList, '' drop out).
CREATE OR REPLACE VIEW _collective_cpu_op_tensors AS
WITH listed AS (
  SELECT
    trace, rank, file_id, event_idx,
    list_zip(
      TRY_CAST(args -> 'Input Dims' AS JSON[]),
      TRY_CAST(args -> 'Input type' AS VARCHAR[])
    ) AS inputs
  FROM _collective_cpu_ops
  WHERE sizes_inputs AND args LIKE '%Input Dims%'
),
entries AS (
  SELECT trace, rank, file_id, event_idx, unnest(inputs) AS input
  FROM listed
),
shaped AS (
  SELECT
    trace, rank, file_id, event_idx,
    TRY_CAST(input[1] AS BIGINT[]) AS shape,
    input[2] AS input_type
  FROM entries
)
SELECT
  s.trace, s.rank, s.file_id, s.event_idx, s.input_type, d.dtype_bytes,
  -- a 0-d tensor ([]) holds one element
  list_reduce(s.shape, lambda a, b: a * b, 1::BIGINT) AS nelems
FROM shaped AS s
JOIN dtype_sizes AS d ON d.dtype_key = dtype_key(s.input_type)
WHERE s.shape IS NOT NULL
  AND list_count(s.shape) = len(s.shape);  -- deeper nesting cast to NULL entries

-- Per collective CPU op: its message size in elements and bytes, from its own
-- msg-nelems arguments (record_param_comms) or else from its input tensors.
CREATE OR REPLACE VIEW _collective_cpu_op_sizes AS
WITH from_inputs AS (
  SELECT
    trace, rank, file_id, event_idx,
    sum(nelems) AS in_nelems,
    sum(nelems * dtype_bytes) AS in_bytes,
    string_agg(DISTINCT input_type, ',') AS input_types
  FROM _collective_cpu_op_tensors
  GROUP BY ALL
)
SELECT
  o.trace, o.rank, o.file_id, o.event_idx,
  CASE WHEN o.in_msg_nelems IS NOT NULL AND d.dtype_bytes IS NOT NULL THEN 'args' WHEN i.in_bytes IS NOT NULL THEN 'inputs' END AS size_kind,
  CASE WHEN o.in_msg_nelems IS NOT NULL AND d.dtype_bytes IS NOT NULL THEN o.in_msg_nelems ELSE i.in_nelems END AS in_nelems,
  CASE WHEN o.in_msg_nelems IS NOT NULL AND d.dtype_bytes IS NOT NULL THEN o.out_msg_nelems END AS out_nelems,
  CASE WHEN o.in_msg_nelems IS NOT NULL AND d.dtype_bytes IS NOT NULL THEN o.in_msg_nelems * d.dtype_bytes ELSE i.in_bytes END AS in_bytes,
  CASE WHEN o.in_msg_nelems IS NOT NULL AND d.dtype_bytes IS NOT NULL THEN o.out_msg_nelems * d.dtype_bytes END AS out_bytes,
  CASE WHEN o.in_msg_nelems IS NOT NULL AND d.dtype_bytes IS NOT NULL THEN o.dtype ELSE i.input_types END AS dtype
FROM _collective_cpu_ops AS o
LEFT JOIN dtype_sizes AS d ON d.dtype_key = dtype_key(o.dtype)
LEFT JOIN from_inputs AS i USING (trace, rank, file_id, event_idx);

-- The GPU communication kernels with every collective argument they carry.
CREATE OR REPLACE VIEW _collective_kernels AS
SELECT
  g.trace, g.rank, g.file_id, g.event_idx,
  g.name AS kernel_name, g.device, g.stream, g.ts_ns, g.dur_ns, g.end_ns,
  g.correlation, g.external_id, g.collective_name,
  coll_type_of(g.collective_name) AS arg_coll_type,
  -- without a Collective name, gpu_ops_classified's type is the kernel name's
  CASE WHEN coll_type_of(g.collective_name) IS NULL THEN g.coll_type END AS name_coll_type,
  e.in_msg_nelems, e.out_msg_nelems, e.dtype, e.group_size,
  e.pg_name, e.pg_desc, e.pg_ranks, e.seq, e.in_split_size, e.out_split_size
FROM gpu_ops_classified AS g
JOIN events AS e USING (trace, rank, file_id, event_idx)
WHERE g.kind = 'kernel' AND g.kernel_class = 'comm';

-- The collective CPU ops linked to each comm kernel. `via` = 'launch': the op
-- contains the start of the runtime call that launched the kernel (same file,
-- process and thread); 'External id': the launch is not in the trace and the
-- kernel's External id names the op. `depth_key` orders ops outermost ->
-- innermost (later start, then earlier end).
CREATE OR REPLACE VIEW _collective_kernel_ops AS
WITH launches AS (
  SELECT
    k.trace, k.rank, k.file_id, k.event_idx,
    arg_min(r.pid, r.ts_ns) AS pid,
    arg_min(r.tid, r.ts_ns) AS tid,
    min(r.ts_ns) AS launch_ns
  FROM _collective_kernels AS k
  JOIN slices AS r
    ON r.trace = k.trace AND r.rank = k.rank AND r.file_id = k.file_id
    AND r.correlation = k.correlation
    AND r.cat IN ('cuda_runtime', 'cuda_driver', 'hip_runtime', 'xpu_runtime', 'privateuse1_runtime')
  GROUP BY ALL
),
by_launch AS (
  SELECT l.trace, l.rank, l.file_id, l.event_idx, l.launch_ns, 'launch' AS via, o.event_idx AS op_idx,
         o.name AS op_name, o.coll_type, o.group_size, o.pg_name, o.seq, [o.ts_ns, -o.end_ns] AS depth_key
  FROM launches AS l
  JOIN _collective_cpu_ops AS o
    ON o.trace = l.trace AND o.rank = l.rank AND o.file_id = l.file_id
    AND o.pid = l.pid AND o.tid = l.tid
    AND o.ts_ns <= l.launch_ns AND l.launch_ns < o.end_ns
),
by_external_id AS (
  SELECT k.trace, k.rank, k.file_id, k.event_idx, NULL::BIGINT AS launch_ns, 'External id' AS via, o.event_idx AS op_idx,
         o.name AS op_name, o.coll_type, o.group_size, o.pg_name, o.seq, [o.ts_ns, -o.end_ns] AS depth_key
  FROM _collective_kernels AS k
  JOIN _collective_cpu_ops AS o
    ON o.trace = k.trace AND o.rank = k.rank AND o.file_id = k.file_id AND o.external_id = k.external_id
  WHERE NOT EXISTS (
    SELECT 1 FROM launches AS l
    WHERE l.trace = k.trace AND l.rank = k.rank AND l.file_id = k.file_id AND l.event_idx = k.event_idx
  )
),
no_op AS (  -- launched, but not inside any collective op: keep the launch time
  SELECT l.trace, l.rank, l.file_id, l.event_idx, l.launch_ns, 'launch' AS via, NULL::BIGINT AS op_idx,
         NULL AS op_name, NULL AS coll_type, NULL::BIGINT AS group_size, NULL AS pg_name, NULL::BIGINT AS seq,
         NULL::BIGINT[] AS depth_key
  FROM launches AS l
)
SELECT * FROM by_launch
UNION ALL SELECT * FROM by_external_id
UNION ALL SELECT * FROM no_op;

-- Per comm kernel: what its innermost linked CPU ops say (type, size, group).
CREATE OR REPLACE VIEW _collective_kernel_cpu AS
SELECT
  l.trace, l.rank, l.file_id, l.event_idx,
  max(l.launch_ns) AS launch_ns,
  max(l.via) FILTER (WHERE l.op_idx IS NOT NULL) AS via,
  max_by(l.coll_type, l.depth_key) FILTER (WHERE l.coll_type IS NOT NULL) AS cpu_coll_type,
  max_by(l.op_name, l.depth_key) FILTER (WHERE l.coll_type IS NOT NULL) AS type_op,
  max_by(l.op_name, l.depth_key) FILTER (WHERE s.size_kind IS NOT NULL) AS size_op,
  max_by(s.size_kind, l.depth_key) FILTER (WHERE s.size_kind IS NOT NULL) AS size_kind,
  max_by(s.in_nelems, l.depth_key) FILTER (WHERE s.size_kind IS NOT NULL) AS in_nelems,
  max_by(s.out_nelems, l.depth_key) FILTER (WHERE s.size_kind IS NOT NULL) AS out_nelems,
  max_by(s.in_bytes, l.depth_key) FILTER (WHERE s.size_kind IS NOT NULL) AS in_bytes,
  max_by(s.out_bytes, l.depth_key) FILTER (WHERE s.size_kind IS NOT NULL) AS out_bytes,
  max_by(s.dtype, l.depth_key) FILTER (WHERE s.size_kind IS NOT NULL) AS dtype,
  max_by(l.group_size, l.depth_key) FILTER (WHERE l.group_size IS NOT NULL) AS group_size,
  max_by(l.pg_name, l.depth_key) FILTER (WHERE l.pg_name IS NOT NULL) AS pg_name,
  max_by(l.seq, l.depth_key) FILTER (WHERE l.seq IS NOT NULL) AS seq,
  -- a TensorList input (c10d allreduce of a bucket list) has no shapes to size
  bool_or(l.op_idx IS NOT NULL) AS has_op
FROM _collective_kernel_ops AS l
LEFT JOIN _collective_cpu_op_sizes AS s
  ON s.trace = l.trace AND s.rank = l.rank AND s.file_id = l.file_id AND s.event_idx = l.op_idx
GROUP BY l.trace, l.rank, l.file_id, l.event_idx;

-- One row per collective instance per rank. Columns:
--   coll_type   all_reduce | all_gather | reduce_scatter | all_to_all | broadcast
--               | reduce | send | recv | send_recv | barrier | gather | scatter
--               | NULL (unknown; see reason)
--   type_source where coll_type came from (kernel arg / cpu op ... / kernel name)
--   bytes       message size (Out for all_gather, else In), size_source says how
--   group_size  ranks in the group: kernel arg, else CPU op arg, else the
--               trace's world size (group_size_source says which)
--   algbw_gbps  bytes / dur (GB/s = 1e9 B/s); busbw_gbps = algbw x nccl-tests
--               factor (coll_busbw_factor)
--   match_id    '<pg>/seq <Seq>' when Seq is known; else the rank-local ordinal
--               of this coll_type within its process group (or, without one,
--               its stream): '<pg or stream>/<coll_type> #<n>'
--   reason      why coll_type, bytes or group_size is missing (NULL when none is)
CREATE OR REPLACE VIEW collectives AS
WITH joined AS (
  SELECT
    k.*,
    c.launch_ns, c.via, c.cpu_coll_type, c.type_op, c.size_op, c.size_kind,
    c.in_nelems AS cpu_in_nelems, c.out_nelems AS cpu_out_nelems,
    c.in_bytes AS cpu_in_bytes, c.out_bytes AS cpu_out_bytes, c.dtype AS cpu_dtype,
    c.group_size AS cpu_group_size, c.pg_name AS cpu_pg_name, c.seq AS cpu_seq,
    coalesce(c.has_op, false) AS has_op,
    d.dtype_bytes AS kernel_dtype_bytes,
    t.world_size
  FROM _collective_kernels AS k
  LEFT JOIN _collective_kernel_cpu AS c USING (trace, rank, file_id, event_idx)
  LEFT JOIN dtype_sizes AS d ON d.dtype_key = dtype_key(k.dtype)
  LEFT JOIN traces AS t USING (trace)
),
typed AS (
  SELECT
    *,
    coalesce(arg_coll_type, cpu_coll_type, name_coll_type) AS coll_type_,
    CASE
      WHEN arg_coll_type IS NOT NULL THEN 'kernel arg Collective name=' || collective_name
      WHEN cpu_coll_type IS NOT NULL THEN 'cpu op ' || type_op || ' (' || via || ')'
      WHEN name_coll_type IS NOT NULL THEN 'kernel name'
    END AS type_source,
    coalesce(group_size, cpu_group_size, world_size) AS group_size_,
    CASE
      WHEN group_size IS NOT NULL THEN 'kernel arg'
      WHEN cpu_group_size IS NOT NULL THEN 'cpu op arg'
      WHEN world_size IS NOT NULL THEN 'trace world size'
    END AS group_size_source,
    -- the kernel's own msg-nelems win when its dtype is known
    in_msg_nelems IS NOT NULL AND kernel_dtype_bytes IS NOT NULL AS kernel_sized
  FROM joined
),
sized AS (
  SELECT
    *,
    CASE
      WHEN kernel_sized AND coll_type_ = 'all_gather' THEN out_msg_nelems * kernel_dtype_bytes
      WHEN kernel_sized THEN in_msg_nelems * kernel_dtype_bytes
      WHEN size_kind = 'args' AND coll_type_ = 'all_gather' THEN cpu_out_bytes
      WHEN size_kind = 'args' THEN cpu_in_bytes
      WHEN size_kind = 'inputs' AND coll_type_ = 'all_gather' THEN cpu_in_bytes * group_size_
      WHEN size_kind = 'inputs' THEN cpu_in_bytes
    END AS bytes_,
    CASE
      WHEN kernel_sized AND coll_type_ = 'all_gather' THEN 'kernel Out msg nelems x dtype'
      WHEN kernel_sized THEN 'kernel In msg nelems x dtype'
      WHEN size_kind = 'args' AND coll_type_ = 'all_gather' THEN 'cpu ' || size_op || ' Out msg nelems x dtype'
      WHEN size_kind = 'args' THEN 'cpu ' || size_op || ' In msg nelems x dtype'
      WHEN size_kind = 'inputs' AND coll_type_ = 'all_gather' AND group_size_ IS NOT NULL
        THEN 'cpu ' || size_op || ' Input Dims x Input type x group_size'
      WHEN size_kind = 'inputs' AND coll_type_ <> 'all_gather' THEN 'cpu ' || size_op || ' Input Dims x Input type'
    END AS size_source
  FROM typed
),
ordinals AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY trace, rank, coalesce(pg_name, cpu_pg_name, 'stream ' || stream), coalesce(coll_type_, 'unknown')
      ORDER BY ts_ns, event_idx
    ) AS ordinal
  FROM sized
)
SELECT
  trace,
  rank,
  coll_type_ AS coll_type,
  ts_ns,
  dur_ns,
  end_ns,
  bytes_ AS bytes,
  group_size_ AS group_size,
  coalesce(pg_name, cpu_pg_name) AS pg_name,
  pg_desc,
  coalesce(seq, cpu_seq) AS seq,
  bytes_ / nullif(dur_ns, 0) AS algbw_gbps,  -- bytes per ns = GB/s
  bytes_ / nullif(dur_ns, 0) * coll_busbw_factor(coll_type_, group_size_) AS busbw_gbps,
  CASE
    WHEN coalesce(seq, cpu_seq) IS NOT NULL
      THEN coalesce(pg_name, cpu_pg_name, '?') || '/seq ' || coalesce(seq, cpu_seq)
    ELSE coalesce(pg_name, cpu_pg_name, 'stream ' || stream) || '/' || coalesce(coll_type_, 'unknown') || ' #' || ordinal
  END AS match_id,
  type_source,
  size_source,
  group_size_source,
  nullif(concat_ws('; ',
    CASE WHEN coll_type_ IS NULL THEN
      'type unknown: no Collective name, '
      || CASE WHEN launch_ns IS NULL AND NOT has_op THEN 'launch not in trace' ELSE 'no collective CPU op around the launch' END
      || ', kernel name does not tell'
    END,
    CASE WHEN bytes_ IS NULL THEN
      'size unknown: '
      || CASE
           WHEN in_msg_nelems IS NOT NULL THEN 'unknown dtype ' || coalesce(dtype, 'NULL')
           WHEN size_kind = 'inputs' AND group_size_ IS NULL THEN 'all_gather without group size'
           WHEN has_op THEN 'the CPU ops give no msg nelems and no sized Input Dims'
           ELSE 'no msg nelems on the kernel and no linked CPU op'
         END
    END,
    CASE WHEN group_size_ IS NULL THEN 'group size unknown' END
  ), '') AS reason,
  coalesce(in_msg_nelems, cpu_in_nelems) AS in_nelems,
  coalesce(out_msg_nelems, cpu_out_nelems) AS out_nelems,
  coalesce(dtype, cpu_dtype) AS dtype,
  in_split_size,
  out_split_size,
  pg_ranks,
  collective_name,
  kernel_name,
  device,
  stream,
  launch_ns,
  correlation,
  external_id,
  file_id,
  event_idx
FROM ordinals;

-- One row per matched collective (trace, match_id, coll_type) over the ranks of
-- `scope` (a relation with trace, rank: pass `metric_scope` in a metric).
-- Per rank, an instance starts at its first kernel's start and ends at its last
-- kernel's end (Seq-matched collectives may launch several kernels).
--   start_skew_ns  latest start - earliest start across the ranks that ran it
--   end_skew_ns    latest end - earliest end
--   straggler_rank the rank that started last (ties: the lowest rank)
--   min_dur_ns     the shortest instance: the collective's own latency once
--                  every rank has arrived (TraceLens' comm_latency)
CREATE OR REPLACE MACRO collective_matches(scope) AS TABLE
WITH per_rank AS (
  SELECT
    c.trace, c.match_id, c.coll_type, c.rank,
    min(c.ts_ns) AS start_ns,
    max(c.end_ns) AS end_ns,
    max(c.bytes) AS bytes,
    max(c.group_size) AS group_size
  FROM collectives AS c
  JOIN query_table(scope) AS s ON s.trace = c.trace AND s.rank = c.rank
  GROUP BY c.trace, c.match_id, c.coll_type, c.rank
),
ranked AS (
  SELECT
    *,
    row_number() OVER (PARTITION BY trace, match_id, coll_type ORDER BY start_ns DESC, rank) AS late_order
  FROM per_rank
)
SELECT
  trace,
  match_id,
  coll_type,
  count(*) AS ranks_seen,
  max(group_size) AS group_size,
  max(bytes) AS bytes,
  min(start_ns) AS first_start_ns,
  max(start_ns) - min(start_ns) AS start_skew_ns,
  max(end_ns) - min(end_ns) AS end_skew_ns,
  min(end_ns - start_ns) AS min_dur_ns,
  max(rank) FILTER (WHERE late_order = 1) AS straggler_rank
FROM ranked
GROUP BY trace, match_id, coll_type;
