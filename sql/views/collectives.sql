-- Collectives: one row per collective instance per rank, built from the GPU
-- communication kernels (kernel_class = 'comm'), with its type, message size,
-- group size, process group, sequence number, bandwidths, and a `match_id` that
-- is equal for the instances of one collective on different ranks (the
-- cross-rank key that skew and straggler metrics group by).
--
-- Bytes and bandwidth follow nccl-tests (doc/PERFORMANCE.md):
--   bytes  = nelems x dtype size of the full message: all_gather counts its
--            OUTPUT (the gathered tensor, n x each rank's input), reduce_scatter
--            its INPUT (n x each rank's output), every other type its input
--            (for all_to_all(v) the rank's own send volume, so it can differ
--            between the ranks of one collective).
--   algbw  = bytes / kernel duration (GB/s = 1e9 B/s);
--   busbw  = algbw x factor(n): all_reduce 2(n-1)/n; all_gather,
--            reduce_scatter, all_to_all (n-1)/n; broadcast, send, recv 1
--            (`coll_busbw_factor`), n = the group size.
--
-- Where the facts come from, best first (type_source, size_source and
-- group_size_source name the one used):
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
--         2. a linked CPU op's `In/Out msg nelems` x `dtype` (record_param_comms);
--         3. a linked `c10d::*` op's `Input Dims` x `Input type`: c10d ops take
--            (output, input, ...) (c10d::_allgather_base_(Tensor output, Tensor
--            input, ProcessGroup, ...)), so entry 1 is the output and entry 2
--            the input; both sides are known;
--         4. `Input Dims` x `Input type` of any other linked op (nccl:*,
--            record_param_comms, symm_mem::*, functional collectives): the
--            tensors it was given, summed = the input only, so an all_gather's
--            output is taken as input x group size.
--         5. the rank's PyTorch execution trace: the `record_param_comms` node
--            linked to a linked op (et_links), whose input and output tensors
--            are exact (numel x itemsize); for when Kineto gives no size at all.
--         Between ops of the same level, the innermost wins.
--   group size n
--         1. the kernel's `Group size`;
--         2. all_gather / reduce_scatter: the kernel's larger / smaller of
--            In and Out msg nelems (the gathered tensor is n x the input);
--         3. a linked CPU op's `Group size` (innermost first);
--         4. all_gather / reduce_scatter: larger / smaller of the two sides of
--            the op that sized it (msg nelems, or a c10d op's output and input
--            Input Dims: c10d::_allgather_base_ [[1073741824], [16777216]]
--            -> n = 64);
--         5. the process group's size: the `Group size` another event of the
--            rank gives for the same process group name, or the length of an
--            untruncated `Process Group Ranks` list;
--         6. the trace's world size (wrong for sub-groups; used only when
--            nothing above says).
--
-- Cross-rank matching (`match_id`):
--   * with Seq (c10d's per-group sequence number): '<pg>/seq <Seq>', exact.
--   * without Seq: the rank-local ordinal within (process group, or the stream
--     when no group is named; coll_type; bytes where every rank of the group
--     moves the same message: all_reduce, all_gather, reduce_scatter,
--     broadcast, reduce, barrier), as '<pg>/<coll_type> <bytes> B #<n>', or
--     '<pg>/<coll_type> #<n>' for the other types. So a collective that one
--     rank lacks (outside its profiling window, sampled out) no longer shifts
--     the matches of other types or sizes.
--   Limitations without Seq: a missing collective of the same group, type and
--   size still shifts every later match of that key; all_to_all(v), send/recv,
--   gather/scatter and unknown types are keyed without a size (their bytes
--   differ between ranks), and collectives of unknown size share one 'size
--   unknown' key, so a missing one shifts the later matches of its type; a
--   rank that finds other bytes for a collective than its peers do (say, no
--   size on one rank) keys it apart from them; the stream fallback assumes
--   equal stream ids on every rank; and times are each rank's own clock (no
--   cross-host alignment).
-- CPU collectives (Gloo): on a rank with no GPU communication kernel and no
-- collective from other records, Gloo's `gloo:*` CPU records are its collectives
-- (`source` = 'cpu_backend'; `_collectives_from_cpu_backend` says why and how).
-- This is a change of this view, not a new version of the metrics that read it,
-- on purpose: it only adds rows for ranks that had none, so a released metric
-- version's result changes only where it had no answer (NULL, "no communication
-- kernels" / "no GPU kernels and no XLA ops"); every trace with GPU collectives
-- gives what it gave (the CHECKSUMS-frozen metric files are unchanged).
-- (Sources beyond the Kineto trace, the execution trace's tensor sizes and Horovod's
-- operations, are added by collectives_execution_traces.sql and collectives_horovod.sql,
-- which `extend` this module: see sql/README.md.)
-- requires: kernel_classes, catalog, dtypes

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

-- Ratio larger / smaller of two element counts when it is a whole number: the
-- group size of an all_gather (out = n x in) or a reduce_scatter (in = n x out).
-- NULL when either is NULL (DuckDB's least/greatest would skip a NULL).
CREATE OR REPLACE MACRO _nelems_ratio(a, b) AS
CASE
  WHEN a > 0 AND b > 0 AND greatest(a, b) % least(a, b) = 0 THEN greatest(a, b) // least(a, b)
END;

-- CPU-side ops and annotations that name a collective, with what they say
-- about it. Wider than `cpu_collectives` (SymmMem and functional collectives)
-- and keeps what the linking needs (file, thread, args). `coll_type` is NULL
-- for ops that do not say which collective (record_param_comms without a
-- `Collective name`, c10d::wait).
-- batch: shared always
--   as for the other collectives views marked `always`: a metric over `collectives` planned
--   the view's whole stack once per reference, each expansion reading the events for
--   the collective CPU ops five or more times (collective_busbw: 48 Parquet scans, 70%
--   of its time on a 127 MB rank); stored once, the CPU ops are read from the events
--   once and the collectives computed once (issue 42).
CREATE OR REPLACE VIEW _collective_cpu_ops AS
SELECT
  trace, rank, file_id, event_idx, pid, tid, ts_ns, end_ns, name, external_id,
  coll_type_of(
    coalesce(collective_name, regexp_replace(name, '^(_?c10d(_functional)?::|nccl:|gloo:|symm_mem::)', ''))
  ) AS coll_type,
  in_msg_nelems, out_msg_nelems, dtype, group_size, pg_name, seq,
  -- c10d::* ops take (output, input, ...): Input Dims entry 1 is the OUTPUT
  starts_with(name, 'c10d::') AS output_listed_first,
  args
FROM slices
WHERE cat IN ('cpu_op', 'user_annotation')
  AND (
    name LIKE 'c10d::%' OR name LIKE '%c10d_functional::%' OR name LIKE 'nccl:%'
    OR name LIKE 'gloo:%' OR name LIKE 'symm_mem::%' OR name = 'record_param_comms'
  );

-- The tensors a collective op was given: one row per `Input Dims` entry whose
-- `Input type` has a known element size (Scalar, TensorList, '' drop out), with
-- its 1-based `position` in the argument list.
CREATE OR REPLACE VIEW _collective_cpu_op_tensors AS
WITH listed AS (
  SELECT
    trace, rank, file_id, event_idx, output_listed_first,
    list_zip(
      TRY_CAST(args -> 'Input Dims' AS JSON[]),
      TRY_CAST(args -> 'Input type' AS VARCHAR[])
    ) AS inputs
  FROM _collective_cpu_ops
  WHERE args LIKE '%Input Dims%'
),
entries AS (
  SELECT
    trace, rank, file_id, event_idx, output_listed_first,
    unnest(inputs) AS input,
    generate_subscripts(inputs, 1) AS position  -- unnests in step with `input`
  FROM listed
),
shaped AS (
  SELECT
    trace, rank, file_id, event_idx, output_listed_first, position,
    TRY_CAST(input[1] AS BIGINT[]) AS shape,
    input[2] AS input_type
  FROM entries
)
SELECT
  s.trace, s.rank, s.file_id, s.event_idx, s.output_listed_first, s.position,
  s.input_type, d.dtype_bytes,
  -- a 0-d tensor ([]) holds one element
  list_reduce(s.shape, lambda a, b: a * b, 1::BIGINT) AS nelems
FROM shaped AS s
JOIN dtype_sizes AS d ON d.dtype_key = dtype_key(s.input_type)
WHERE s.shape IS NOT NULL
  AND list_count(s.shape) = len(s.shape);  -- deeper nesting cast to NULL entries

-- Extension point: CPU-op sizes from records other than the Kineto trace, in the
-- columns of `_collective_cpu_op_sizes` (size_preference 4 and up). Empty here; a
-- module that extends this one replaces it (collectives_execution_traces.sql: the
-- execution trace's tensors).
CREATE OR REPLACE VIEW _collective_cpu_op_sizes_extra AS
SELECT
  NULL::VARCHAR AS trace, NULL::INTEGER AS rank, NULL::VARCHAR AS file_id, NULL::BIGINT AS event_idx,
  NULL::INTEGER AS size_preference, NULL::VARCHAR AS size_kind, NULL::BIGINT AS in_nelems,
  NULL::BIGINT AS out_nelems, NULL::BIGINT AS in_bytes, NULL::BIGINT AS out_bytes, NULL::VARCHAR AS dtype
WHERE false;

-- What each collective CPU op says about its message, one row per way it says
-- it (`size_kind`, ranked by `size_preference`, 1 = best):
--   1 'msg nelems'               its own In/Out msg nelems x dtype
--   2 'output and input tensors' a c10d::* op: Input Dims entry 1 (output) and
--                                entry 2 (input), both sized
--   3 'input tensors'            any other op: its sized Input Dims, summed
--                                (the input; the output is unknown)
-- batch: shared always
--   read several times over by one query: see _collective_cpu_ops.
CREATE OR REPLACE VIEW _collective_cpu_op_sizes AS
WITH from_msg_nelems AS (
  SELECT
    o.trace, o.rank, o.file_id, o.event_idx,
    1 AS size_preference,
    'msg nelems' AS size_kind,
    o.in_msg_nelems AS in_nelems,
    o.out_msg_nelems AS out_nelems,
    o.in_msg_nelems * d.dtype_bytes AS in_bytes,
    o.out_msg_nelems * d.dtype_bytes AS out_bytes,
    o.dtype
  FROM _collective_cpu_ops AS o
  JOIN dtype_sizes AS d ON d.dtype_key = dtype_key(o.dtype)
  WHERE o.in_msg_nelems IS NOT NULL
),
from_output_and_input AS (
  SELECT
    trace, rank, file_id, event_idx,
    2 AS size_preference,
    'output and input tensors' AS size_kind,
    any_value(nelems) FILTER (WHERE position = 2) AS in_nelems,
    any_value(nelems) FILTER (WHERE position = 1) AS out_nelems,
    any_value(nelems * dtype_bytes) FILTER (WHERE position = 2) AS in_bytes,
    any_value(nelems * dtype_bytes) FILTER (WHERE position = 1) AS out_bytes,
    any_value(input_type) FILTER (WHERE position = 2) AS dtype
  FROM _collective_cpu_op_tensors
  WHERE output_listed_first AND position IN (1, 2)
  GROUP BY trace, rank, file_id, event_idx
  HAVING count(*) = 2  -- both entries are sized tensors (not a TensorList, not a group)
),
from_inputs AS (
  SELECT
    trace, rank, file_id, event_idx,
    3 AS size_preference,
    'input tensors' AS size_kind,
    sum(nelems) AS in_nelems,
    NULL::BIGINT AS out_nelems,
    sum(nelems * dtype_bytes) AS in_bytes,
    NULL::BIGINT AS out_bytes,
    string_agg(DISTINCT input_type, ',') AS dtype
  FROM _collective_cpu_op_tensors
  WHERE NOT output_listed_first
  GROUP BY trace, rank, file_id, event_idx
)
SELECT * FROM from_msg_nelems
UNION ALL SELECT * FROM from_output_and_input
UNION ALL SELECT * FROM from_inputs
UNION ALL SELECT * FROM _collective_cpu_op_sizes_extra;

-- The size of each process group a rank names, from any event that states it:
-- a `Group size` argument (kernel or CPU op), else the length of a
-- `Process Group Ranks` list (PyTorch truncates long lists with '...': those
-- are not counted).
CREATE OR REPLACE VIEW _process_group_sizes AS
WITH stated AS (
  SELECT
    trace, rank, pg_name, group_size,
    CASE
      WHEN NOT contains(pg_ranks, '...') THEN nullif(len(TRY_CAST(pg_ranks AS BIGINT[])), 0)
    END AS listed_ranks
  FROM events
  WHERE pg_name IS NOT NULL
    AND (group_size IS NOT NULL OR pg_ranks IS NOT NULL)
)
SELECT
  trace, rank, pg_name,
  coalesce(max(group_size), max(listed_ranks)) AS pg_size
FROM stated
GROUP BY trace, rank, pg_name;

-- The GPU communication kernels of kernel_class_rules `rules_version` with every
-- collective argument they carry.
CREATE OR REPLACE MACRO _collective_kernels_with(rules_version) AS TABLE
SELECT
  g.trace, g.rank, g.file_id, g.event_idx,
  g.name AS kernel_name, g.device, g.stream, g.ts_ns, g.dur_ns, g.end_ns,
  g.correlation, g.external_id, g.collective_name,
  coll_type_of(g.collective_name) AS arg_coll_type,
  -- without a Collective name, gpu_ops_classified's type is the kernel name's
  CASE WHEN coll_type_of(g.collective_name) IS NULL THEN g.coll_type END AS name_coll_type,
  e.in_msg_nelems, e.out_msg_nelems, e.dtype, e.group_size,
  e.pg_name, e.pg_desc, e.pg_ranks, e.seq, e.in_split_size, e.out_split_size
FROM gpu_ops_classified_with(rules_version) AS g
-- a kernel's own event is a kernel's (gpu_ops: kind 'kernel' is cat 'kernel'): the
-- filter goes into the Parquet scan, which otherwise fed every event of the trace to
-- the join (8 x 250 MB: 7.4 M rows of 14 columns for 82 k kernels)
JOIN (SELECT * FROM events WHERE cat = 'kernel') AS e USING (trace, rank, file_id, event_idx)
WHERE g.kind = 'kernel' AND g.kernel_class = 'comm';

-- One row per collective instance per rank. Columns:
--   coll_type   all_reduce | all_gather | reduce_scatter | all_to_all | broadcast
--               | reduce | send | recv | send_recv | barrier | gather | scatter
--               | NULL (unknown; see reason)
--   type_source where coll_type came from (kernel arg / cpu op ... / kernel name)
--   bytes       message size (nccl-tests: Out for all_gather, In otherwise);
--               size_source says how it was found
--   group_size  ranks in the group; group_size_source says how it was found
--   algbw_gbps  bytes / dur (GB/s = 1e9 B/s); busbw_gbps = algbw x nccl-tests
--               factor (coll_busbw_factor)
--   match_id    the cross-rank key (see the header)
--   reason      why coll_type, bytes or group_size is missing (NULL when none is)
-- The communication kernels are those kernel_class_rules `rules_version` calls
-- comm: version 2 adds DeepEP's dispatch/combine/notify kernels (all_to_all-like,
-- their barrier a barrier; no collective arguments, so no size) to version 1's.
CREATE OR REPLACE MACRO _collectives_from_kernels_with(rules_version) AS TABLE
-- `kernels` is read three times below (the launches, the External-id links, the
-- result): MATERIALIZED computes the classified comm kernels once, not three times.
WITH kernels AS MATERIALIZED (
  SELECT * FROM _collective_kernels_with(rules_version)
),
-- The collective CPU ops linked to each comm kernel. `via` = 'launch': the op
-- contains the start of the runtime call that launched the kernel (same file,
-- process and thread); 'External id': the launch is not in the trace and the
-- kernel's External id names the op. `depth_key` orders ops outermost ->
-- innermost (later start, then earlier end).
launches AS MATERIALIZED (  -- read three times
  SELECT
    k.trace, k.rank, k.file_id, k.event_idx,
    -- the first launch record; at equal times the first in the file, so pid and tid are one record's
    arg_min(r.pid, (r.ts_ns, r.event_idx)) AS pid,
    arg_min(r.tid, (r.ts_ns, r.event_idx)) AS tid,
    min(r.ts_ns) AS launch_ns
  FROM kernels AS k
  JOIN slices AS r
    ON r.trace = k.trace AND r.rank = k.rank AND r.file_id = k.file_id
    AND r.correlation = k.correlation
    AND r.cat IN ('cuda_runtime', 'cuda_driver', 'hip_runtime', 'xpu_runtime', 'privateuse1_runtime')
  GROUP BY ALL
),
-- The ops around each launch (ts_ns <= launch_ns < end_ns, same file, process and
-- thread), found in time linear in the ops and launches. One thread launches all of a
-- rank's collectives, so an equality join on the thread with the times as a residual
-- compared every launch with every op of the rank (quadratic: minutes on a 1 GB rank).
-- Instead one sweep per thread: ops' starts (+1) and ends (-1) and the launches in time
-- order (at one time: ends, then starts, longer ops first, then launches) give each op
-- its nesting depth (the running count at its start) and each launch the number of ops
-- open at it (`open_ops`). Where the ops nest (a thread's ops are a call stack), the
-- ops around a launch are, for each depth 1 .. open_ops, the op of that depth that
-- started last at or before the launch: an ASOF join on (thread, depth). It found
-- them all when every op it found holds the launch and there are open_ops of them
-- (ops of different depths are different ops); a launch where ops overlap without
-- nesting fails that check and is matched by the plain join instead, so the rows are
-- those of the containment join in every case.
coll_ops AS MATERIALIZED (  -- the ops that can hold a launch; read three times
  SELECT trace, rank, file_id, pid, tid, event_idx, name, coll_type, group_size, pg_name, seq, ts_ns, end_ns
  FROM _collective_cpu_ops
  WHERE pid IS NOT NULL AND tid IS NOT NULL AND end_ns > ts_ns
),
swept AS (
  SELECT
    *,
    sum(delta) OVER (PARTITION BY trace, rank, file_id, pid, tid ORDER BY t, mark, tie, event_idx
                     ROWS UNBOUNDED PRECEDING)::BIGINT AS depth
  FROM (
    SELECT trace, rank, file_id, pid, tid, event_idx, ts_ns AS t, 1 AS mark, -end_ns AS tie, 1::INTEGER AS delta FROM coll_ops
    UNION ALL
    SELECT trace, rank, file_id, pid, tid, event_idx, end_ns, 0, 0, -1 FROM coll_ops
    UNION ALL
    SELECT trace, rank, file_id, pid, tid, event_idx, launch_ns, 2, 0, 0 FROM launches
    WHERE pid IS NOT NULL AND tid IS NOT NULL AND launch_ns IS NOT NULL
  )
),
op_depths AS (
  SELECT o.*, d.depth
  FROM coll_ops AS o
  JOIN (SELECT trace, rank, file_id, event_idx, depth FROM swept WHERE mark = 1) AS d
    USING (trace, rank, file_id, event_idx)
),
launch_levels AS (
  SELECT trace, rank, file_id, pid, tid, event_idx, t AS launch_ns, depth AS open_ops,
         unnest(range(1, depth + 1)) AS level
  FROM swept
  WHERE mark = 2 AND depth > 0
),
stacked AS (
  SELECT x.trace, x.rank, x.file_id, x.pid, x.tid, x.event_idx, x.launch_ns, x.open_ops, o.event_idx AS op_idx,
         o.name AS op_name, o.coll_type, o.group_size, o.pg_name, o.seq, o.ts_ns AS op_ts_ns, o.end_ns AS op_end_ns
  FROM launch_levels AS x
  ASOF JOIN op_depths AS o
    ON o.trace = x.trace AND o.rank = x.rank AND o.file_id = x.file_id AND o.pid = x.pid AND o.tid = x.tid
    AND o.depth = x.level AND x.launch_ns >= o.ts_ns
),
stack_checked AS (
  SELECT *, count(*) FILTER (WHERE launch_ns < op_end_ns) OVER (PARTITION BY trace, rank, file_id, event_idx) AS held
  FROM stacked
),
-- the launches with ops open around them that do not nest; MATERIALIZED, so that the
-- plain join below reads these few launches, not every launch (filtered after it)
unnested AS MATERIALIZED (
  SELECT DISTINCT trace, rank, file_id, pid, tid, event_idx, launch_ns FROM stack_checked WHERE held <> open_ops
),
by_launch AS (
  SELECT trace, rank, file_id, event_idx, launch_ns, 'launch' AS via, op_idx,
         op_name, coll_type, group_size, pg_name, seq, [op_ts_ns, -op_end_ns] AS depth_key
  FROM stack_checked
  WHERE held = open_ops
  UNION ALL
  SELECT l.trace, l.rank, l.file_id, l.event_idx, l.launch_ns, 'launch' AS via, o.event_idx AS op_idx,
         o.name AS op_name, o.coll_type, o.group_size, o.pg_name, o.seq, [o.ts_ns, -o.end_ns] AS depth_key
  FROM unnested AS l
  JOIN coll_ops AS o
    ON o.trace = l.trace AND o.rank = l.rank AND o.file_id = l.file_id
    AND o.pid = l.pid AND o.tid = l.tid
    AND o.ts_ns <= l.launch_ns AND l.launch_ns < o.end_ns
),
by_external_id AS (
  SELECT k.trace, k.rank, k.file_id, k.event_idx, NULL::BIGINT AS launch_ns, 'External id' AS via, o.event_idx AS op_idx,
         o.name AS op_name, o.coll_type, o.group_size, o.pg_name, o.seq, [o.ts_ns, -o.end_ns] AS depth_key
  FROM kernels AS k
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
),
kernel_ops AS (
  SELECT * FROM by_launch
  UNION ALL SELECT * FROM by_external_id
  UNION ALL SELECT * FROM no_op
),
-- Per comm kernel: what its linked CPU ops say. Type, group size, process
-- group and Seq come from the innermost op that has them; the size from the
-- op with the best size_preference, innermost among equals (`size_key` sorts
-- that way under max_by: a higher -preference first, then depth_key).
linked AS (
  SELECT
    l.*,
    s.size_kind, s.in_nelems, s.out_nelems, s.in_bytes, s.out_bytes, s.dtype,
    list_prepend(-s.size_preference, l.depth_key) AS size_key
  FROM kernel_ops AS l
  LEFT JOIN _collective_cpu_op_sizes AS s
    ON s.trace = l.trace AND s.rank = l.rank AND s.file_id = l.file_id AND s.event_idx = l.op_idx
),
kernel_cpu AS (
  SELECT
    trace, rank, file_id, event_idx,
    max(launch_ns) AS launch_ns,
    max(via) FILTER (WHERE op_idx IS NOT NULL) AS via,
    max_by(coll_type, depth_key) FILTER (WHERE coll_type IS NOT NULL) AS cpu_coll_type,
    max_by(op_name, depth_key) FILTER (WHERE coll_type IS NOT NULL) AS type_op,
    max_by(op_name, size_key) FILTER (WHERE size_kind IS NOT NULL) AS size_op,
    max_by(size_kind, size_key) FILTER (WHERE size_kind IS NOT NULL) AS size_kind,
    max_by(in_nelems, size_key) FILTER (WHERE size_kind IS NOT NULL) AS in_nelems,
    max_by(out_nelems, size_key) FILTER (WHERE size_kind IS NOT NULL) AS out_nelems,
    max_by(in_bytes, size_key) FILTER (WHERE size_kind IS NOT NULL) AS in_bytes,
    max_by(out_bytes, size_key) FILTER (WHERE size_kind IS NOT NULL) AS out_bytes,
    max_by(dtype, size_key) FILTER (WHERE size_kind IS NOT NULL) AS dtype,
    max_by(group_size, depth_key) FILTER (WHERE group_size IS NOT NULL) AS group_size,
    max_by(op_name, depth_key) FILTER (WHERE group_size IS NOT NULL) AS group_size_op,
    max_by(pg_name, depth_key) FILTER (WHERE pg_name IS NOT NULL) AS pg_name,
    max_by(seq, depth_key) FILTER (WHERE seq IS NOT NULL) AS seq,
    bool_or(op_idx IS NOT NULL) AS has_op
  FROM linked
  GROUP BY trace, rank, file_id, event_idx
),
joined AS (
  SELECT
    k.*,
    c.launch_ns, c.via, c.cpu_coll_type, c.type_op, c.size_op, c.size_kind,
    c.in_nelems AS cpu_in_nelems, c.out_nelems AS cpu_out_nelems,
    c.in_bytes AS cpu_in_bytes, c.out_bytes AS cpu_out_bytes, c.dtype AS cpu_dtype,
    c.group_size AS cpu_group_size, c.group_size_op,
    c.pg_name AS cpu_pg_name, c.seq AS cpu_seq,
    coalesce(c.has_op, false) AS has_op,
    d.dtype_bytes AS kernel_dtype_bytes,
    t.world_size
  FROM kernels AS k
  LEFT JOIN kernel_cpu AS c USING (trace, rank, file_id, event_idx)
  LEFT JOIN dtype_sizes AS d ON d.dtype_key = dtype_key(k.dtype)
  LEFT JOIN traces AS t USING (trace)
),
typed AS (
  SELECT
    j.*,
    coalesce(j.arg_coll_type, j.cpu_coll_type, j.name_coll_type) AS coll_type_,
    CASE
      WHEN j.arg_coll_type IS NOT NULL THEN 'kernel arg Collective name=' || j.collective_name
      WHEN j.cpu_coll_type IS NOT NULL THEN 'cpu op ' || j.type_op || ' (' || j.via || ')'
      WHEN j.name_coll_type IS NOT NULL THEN 'kernel name'
    END AS type_source,
    coalesce(j.pg_name, j.cpu_pg_name) AS pg_name_,
    p.pg_size,
    -- the kernel's own msg-nelems win when its dtype is known
    j.in_msg_nelems IS NOT NULL AND j.kernel_dtype_bytes IS NOT NULL AS kernel_sized
  FROM joined AS j
  LEFT JOIN _process_group_sizes AS p
    ON p.trace = j.trace AND p.rank = j.rank AND p.pg_name = coalesce(j.pg_name, j.cpu_pg_name)
),
ratios AS (
  SELECT
    *,
    -- an all_gather's output (a reduce_scatter's input) is n x the other side
    CASE WHEN coll_type_ IN ('all_gather', 'reduce_scatter')
      THEN _nelems_ratio(in_msg_nelems, out_msg_nelems) END AS kernel_ratio_group_size,
    CASE WHEN coll_type_ IN ('all_gather', 'reduce_scatter')
      THEN _nelems_ratio(cpu_in_nelems, cpu_out_nelems) END AS cpu_ratio_group_size,
    CASE coll_type_ WHEN 'all_gather' THEN 'Out/In' WHEN 'reduce_scatter' THEN 'In/Out' END AS ratio_sides
  FROM typed
),
grouped AS (
  SELECT
    *,
    coalesce(
      group_size, kernel_ratio_group_size, cpu_group_size, cpu_ratio_group_size, pg_size, world_size
    ) AS group_size_,
    CASE
      WHEN group_size IS NOT NULL THEN 'kernel arg Group size'
      WHEN kernel_ratio_group_size IS NOT NULL THEN 'kernel ' || ratio_sides || ' msg nelems'
      WHEN cpu_group_size IS NOT NULL THEN 'cpu ' || group_size_op || ' Group size'
      WHEN cpu_ratio_group_size IS NOT NULL AND size_kind = 'msg nelems'
        THEN 'cpu ' || size_op || ' ' || ratio_sides || ' msg nelems'
      WHEN cpu_ratio_group_size IS NOT NULL
        THEN 'cpu ' || size_op || ' Input Dims ' || CASE coll_type_ WHEN 'all_gather' THEN 'output/input' ELSE 'input/output' END
      WHEN pg_size IS NOT NULL THEN 'process group ' || pg_name_ || ' size'
      WHEN world_size IS NOT NULL THEN 'trace world size'
    END AS group_size_source
  FROM ratios
),
sized AS (
  SELECT
    *,
    CAST(CASE
      WHEN kernel_sized AND coll_type_ = 'all_gather' THEN out_msg_nelems * kernel_dtype_bytes
      WHEN kernel_sized THEN in_msg_nelems * kernel_dtype_bytes
      -- only the input is known: the gathered output is n x it
      WHEN size_kind = 'input tensors' AND coll_type_ = 'all_gather' THEN cpu_in_bytes * group_size_
      WHEN size_kind = 'execution trace tensors' AND coll_type_ = 'all_gather'
        THEN coalesce(cpu_out_bytes, cpu_in_bytes * group_size_)
      WHEN coll_type_ = 'all_gather' THEN cpu_out_bytes
      ELSE cpu_in_bytes
    END AS BIGINT) AS bytes_,
    CASE
      WHEN kernel_sized AND coll_type_ = 'all_gather' THEN 'kernel Out msg nelems x dtype'
      WHEN kernel_sized THEN 'kernel In msg nelems x dtype'
      WHEN size_kind = 'msg nelems' AND coll_type_ = 'all_gather' THEN 'cpu ' || size_op || ' Out msg nelems x dtype'
      WHEN size_kind = 'msg nelems' THEN 'cpu ' || size_op || ' In msg nelems x dtype'
      WHEN size_kind = 'output and input tensors' AND coll_type_ = 'all_gather'
        THEN 'cpu ' || size_op || ' Input Dims output x Input type'
      WHEN size_kind = 'output and input tensors' THEN 'cpu ' || size_op || ' Input Dims input x Input type'
      WHEN size_kind = 'input tensors' AND coll_type_ = 'all_gather' AND group_size_ IS NOT NULL
        THEN 'cpu ' || size_op || ' Input Dims x Input type x group_size'
      WHEN size_kind = 'input tensors' AND coll_type_ IS DISTINCT FROM 'all_gather'
        THEN 'cpu ' || size_op || ' Input Dims x Input type'
      WHEN size_kind = 'execution trace tensors' AND coll_type_ = 'all_gather' AND cpu_out_bytes IS NOT NULL
        THEN 'execution trace ' || size_op || ' output tensors'
      WHEN size_kind = 'execution trace tensors' AND coll_type_ = 'all_gather' AND group_size_ IS NOT NULL
        THEN 'execution trace ' || size_op || ' input tensors x group_size'
      WHEN size_kind = 'execution trace tensors' AND coll_type_ IS DISTINCT FROM 'all_gather'
        THEN 'execution trace ' || size_op || ' input tensors'
    END AS size_source
  FROM grouped
),
match_keys AS (
  SELECT
    *,
    coalesce(pg_name_, 'stream ' || stream) AS match_group,
    -- the size joins the key only where every rank moves the same message
    CASE
      WHEN coll_type_ IN ('all_reduce', 'all_gather', 'reduce_scatter', 'broadcast', 'reduce', 'barrier')
        THEN coalesce(bytes_ || ' B', 'size unknown')
    END AS match_size
  FROM sized
),
ordinals AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY trace, rank, match_group, coalesce(coll_type_, 'unknown'), match_size
      ORDER BY ts_ns, event_idx
    ) AS ordinal
  FROM match_keys
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
  pg_name_ AS pg_name,
  pg_desc,
  coalesce(seq, cpu_seq) AS seq,
  bytes_ / nullif(dur_ns, 0) AS algbw_gbps,  -- bytes per ns = GB/s
  bytes_ / nullif(dur_ns, 0) * coll_busbw_factor(coll_type_, group_size_) AS busbw_gbps,
  CASE
    WHEN coalesce(seq, cpu_seq) IS NOT NULL
      THEN coalesce(pg_name_, '?') || '/seq ' || coalesce(seq, cpu_seq)
    ELSE match_group || '/' || concat_ws(' ', coalesce(coll_type_, 'unknown'), match_size) || ' #' || ordinal
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
           WHEN size_kind = 'input tensors' AND group_size_ IS NULL THEN 'all_gather without group size'
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

-- The message of the typed CPU-side collective records (cpu_collectives_with
-- rules version 1) whose name is LIKE `name_like`, without their step: the body of `cpu_collective_messages`
-- (sql/views/cpu_collective_messages.sql documents its columns and how bytes and
-- group size are found), here so that `collectives` can read the backend's records
-- without requiring the step module.
-- `name_like`: a LIKE pattern on the record's name ('%': every record), applied
-- first, so that reading only Gloo's records costs little on traces without them.
-- `scope`: the name of a relation of the (trace, rank) pairs to read (`files`: all;
-- an empty one reads nothing).
CREATE OR REPLACE MACRO _cpu_collective_records_like(name_like, scope) AS TABLE
WITH ops AS (
  SELECT * FROM cpu_collectives_with(1, scope) WHERE coll_type IS NOT NULL AND name LIKE name_like
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
  o.size_in_nelems AS in_nelems,
  o.size_out_nelems AS out_nelems,
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
  o.collective_name,
  o.file_id,
  o.event_idx
FROM (
  SELECT s.*, e.args
  FROM sized AS s
  -- the events of `scope` only, as `ops` reads them: the join otherwise hashed every
  -- event's args (7.4 M on 8 ranks of 250 MB: 6.5 s) for an empty scope
  JOIN (SELECT * FROM events SEMI JOIN query_table(scope) USING (trace, rank)) AS e
    USING (trace, rank, file_id, event_idx)
) AS o;

-- Every collective: the GPU communication kernels above (classified by
-- kernel_class_rules `rules_version`), those of other records (`_collectives_extra`:
-- Horovod's tensor operations, collectives_horovod.sql), and on ranks with neither,
-- Gloo's CPU records (`_collectives_from_cpu_backend`). `source` says which:
-- 'gpu_kernel', 'horovod', 'cpu_backend'.
-- Extension point `_collectives_extra`: rows in the columns of
-- _collectives_from_kernels_with (by name; the missing ones NULL) and `source`.
-- Empty here; a module that extends this one replaces it.
CREATE OR REPLACE VIEW _collectives_extra AS
SELECT
  NULL::VARCHAR AS trace, NULL::INTEGER AS rank, NULL::VARCHAR AS coll_type, NULL::BIGINT AS ts_ns,
  NULL::BIGINT AS dur_ns, NULL::BIGINT AS end_ns, NULL::BIGINT AS bytes, NULL::BIGINT AS group_size,
  NULL::DOUBLE AS algbw_gbps, NULL::DOUBLE AS busbw_gbps, NULL::VARCHAR AS match_id,
  NULL::VARCHAR AS type_source, NULL::VARCHAR AS size_source, NULL::VARCHAR AS group_size_source,
  NULL::VARCHAR AS reason, NULL::VARCHAR AS dtype, NULL::VARCHAR AS collective_name,
  NULL::VARCHAR AS file_id, NULL::BIGINT AS event_idx, NULL::VARCHAR AS source
WHERE false;

-- The collectives of the ranks not in `covered` (the name of a relation of trace,
-- rank: collectives_with passes the ranks with GPU communication kernels or
-- collectives from other records, `_collectives_extra`): there
-- the backend's CPU records are the collectives. Only Gloo's (`gloo:*`, the one
-- c10d backend that runs without a GPU): Gloo runs each collective on a worker
-- thread inside its record, so the record's duration is the communication time
-- (waits for late peers included, as a kernel's is). NCCL's CPU records (`nccl:*`)
-- are left out: they only enqueue the kernel, their duration is the launch, not the
-- transfer. `coll_type` is what Gloo ran, which is not always what was called
-- (reduce_scatter_tensor runs as a gloo:all_reduce of the whole input, and counts
-- as that all_reduce here). Gloo writes no process group name and no sequence
-- number, so instances are matched across ranks by their rank-local ordinal per
-- (type, bytes), as kernels without Seq are: '<pg or gloo>/<type> <bytes> B #<n>'.
CREATE OR REPLACE MACRO _collectives_from_cpu_backend(covered) AS TABLE
WITH uncovered AS (  -- none on a GPU trace: then no CPU record is read
  SELECT trace, rank FROM trace_ranks
  EXCEPT
  SELECT trace, rank FROM query_table(covered)
),
records AS (
  SELECT r.*
  FROM _cpu_collective_records_like('gloo:%', uncovered) AS r
  WHERE r.role = 'backend'
),
keyed AS (
  SELECT
    *,
    coalesce(pg_name, 'gloo') AS match_group,
    CASE
      WHEN coll_type IN ('all_reduce', 'all_gather', 'reduce_scatter', 'broadcast', 'reduce', 'barrier')
        THEN coalesce(bytes || ' B', 'size unknown')
    END AS match_size
  FROM records
)
SELECT
  trace, rank, coll_type, ts_ns, dur_ns, end_ns, bytes, group_size, pg_name, seq,
  bytes / nullif(dur_ns, 0) AS algbw_gbps,  -- bytes per ns = GB/s
  bytes / nullif(dur_ns, 0) * coll_busbw_factor(coll_type, group_size) AS busbw_gbps,
  CASE
    WHEN seq IS NOT NULL THEN coalesce(pg_name, '?') || '/seq ' || seq
    ELSE match_group || '/' || concat_ws(' ', coll_type, match_size) || ' #' || row_number() OVER (
      PARTITION BY trace, rank, match_group, coll_type, match_size ORDER BY ts_ns, file_id, event_idx)
  END AS match_id,
  'cpu backend record ' || name AS type_source,
  CASE WHEN size_source IS NOT NULL THEN 'cpu ' || name || ' ' || size_source END AS size_source,
  group_size_source,
  reason,
  in_nelems, out_nelems, dtype, collective_name,
  file_id, event_idx,
  'cpu_backend' AS source
FROM keyed;

-- batch: shared always
--   read several times over by one query: see _collective_cpu_ops.
CREATE OR REPLACE MACRO collectives_with(rules_version) AS TABLE
-- each source is computed once: it is both a part of the result and what decides
-- which ranks the CPU records are read for
WITH from_kernels AS MATERIALIZED (
  SELECT *, 'gpu_kernel' AS source FROM _collectives_from_kernels_with(rules_version)
),
from_extra AS MATERIALIZED (
  SELECT * FROM _collectives_extra
),
covered AS (
  SELECT DISTINCT trace, rank FROM from_kernels
  UNION
  SELECT DISTINCT trace, rank FROM from_extra
)
SELECT * FROM from_kernels
UNION ALL BY NAME
SELECT * FROM from_extra
UNION ALL BY NAME
SELECT * FROM _collectives_from_cpu_backend(covered);

-- Every collective on every rank (version 2 of collectives_with: the current rules,
-- what every current collective metric reads; version 1 is collectives_with(1)): one row per collective instance per rank, from the GPU
-- communication kernels and Horovod's tensor operations, and on ranks with neither
-- from Gloo's CPU records (`source` says which), with its type, message
-- size, group size, bandwidths and the cross-rank `match_id` (the head of
-- sql/views/collectives.sql says where each fact comes from).
-- columns:
--   trace              the trace
--   rank               the rank that ran it
--   coll_type          all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | send | recv | ... (NULL: unknown)
--   ts_ns              start of the kernel (or Horovod operation), ns
--   dur_ns             its duration, ns
--   end_ns             its end, ns
--   bytes              message bytes as nccl-tests counts them (all_gather its output, reduce_scatter its input, else the input)
--   group_size         ranks in the collective's group (n)
--   pg_name            process group name
--   pg_desc            process group description
--   seq                c10d's sequence number within the group
--   algbw_gbps         bytes / duration, GB/s
--   busbw_gbps         algbw x nccl-tests' bus factor for the type and n, GB/s
--   match_id           the key equal for the instances of one collective on different ranks
--   type_source        where coll_type comes from
--   size_source        where bytes come from
--   group_size_source  where group_size comes from
--   reason             what is unknown about it, and why
--   in_nelems          input elements
--   out_nelems         output elements
--   dtype              element type
--   in_split_size      all_to_allv input splits (text)
--   out_split_size     all_to_allv output splits (text)
--   pg_ranks           the group's ranks (text, may be truncated)
--   collective_name    the collective's name as recorded (c10d name; a Horovod tensor)
--   kernel_name        the communication kernel's name
--   device             the GPU
--   stream             the stream
--   launch_ns          when the runtime call launched the kernel, ns
--   correlation        CUPTI correlation id of the kernel
--   external_id        the kernel's External id (link to its CPU op)
--   file_id            the source file of the kernel (or Horovod operation)
--   event_idx          its position in that file
--   source             gpu_kernel | horovod | cpu_backend (Gloo's CPU record, on ranks without GPU ones)
-- batch: shared always
--   read several times over by one query: see _collective_cpu_ops.
CREATE OR REPLACE VIEW collectives AS
SELECT * FROM collectives_with(2);

-- One row per matched collective (trace, match_id, coll_type) of collectives_with(
-- `rules_version`) over the ranks of `scope` (a relation with trace, rank: pass
-- `metric_scope` in a metric).
-- Per rank, an instance starts at its first kernel's start and ends at its last
-- kernel's end (Seq-matched collectives may launch several kernels).
--   start_skew_ns  latest start - earliest start across the ranks that ran it
--   end_skew_ns    latest end - earliest end
--   straggler_rank the rank that started last (ties: the lowest rank)
--   min_dur_ns     the shortest instance: the collective's own latency once
--                  every rank has arrived (TraceLens' comm_latency)
CREATE OR REPLACE MACRO collective_matches_with(rules_version, scope) AS TABLE
WITH per_rank AS (
  SELECT
    c.trace, c.match_id, c.coll_type, c.rank,
    min(c.ts_ns) AS start_ns,
    max(c.end_ns) AS end_ns,
    max(c.bytes) AS bytes,
    max(c.group_size) AS group_size
  FROM collectives_with(rules_version) AS c
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

-- The current rules (version 2 of collective_matches_with: collective_skew v2,
-- straggler_rank v2), for ad-hoc queries.
CREATE OR REPLACE MACRO collective_matches(scope) AS TABLE
SELECT * FROM collective_matches_with(2, scope);
