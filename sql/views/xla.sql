-- XLA / TPU traces (xprof trace-viewer JSON, or an xplane.pb that ingest converted
-- to it): planes (devices), lines (threads), the XLA ops each device ran with
-- their kind, collective type, message size and device time, steps, and the
-- framework collectives that host threads ran.
--
-- How xprof lays a profile out (see shared/reference/trace-formats.md §5): one
-- pid per plane, named by its `process_name` (`/device:TPU:3`, `/device:GPU:0`,
-- `/host:CPU`, optionally behind a host-name prefix); one tid per line, named by
-- its `thread_name` (`XLA Ops`, `XLA Modules`, `Steps`, `Stream #7(Compute)`, or
-- a host thread's name). Device metrics read device planes only, never host
-- threads, with one exception: a host-only profile (JAX on CPU devices) has no
-- device plane, and there the host threads' XLA ops (events carrying `hlo_op`,
-- device from their `device_ordinal` argument) stand in for the devices.
-- requires: names, slices, kernel_classes, dtypes

-- One row per (trace, rank, pid) whose process name is an xprof plane.
-- `device_kind`: TPU | GPU (device planes, `is_device`), host, or the plane's own
-- word for anything else (`TPU_NON_CORE`, `CUSTOM`, ...). `device` is the index in
-- `/device:TPU:3` (NULL for the host).
CREATE OR REPLACE VIEW xla_planes AS
SELECT
  trace,
  rank,
  pid,
  process_name AS plane,
  CASE
    WHEN regexp_matches(process_name, '/device:[A-Za-z_]+:\d+')
      THEN regexp_extract(process_name, '/device:([A-Za-z_]+):\d+', 1)
    ELSE 'host'
  END AS device_kind,
  TRY_CAST(regexp_extract(process_name, '/device:[A-Za-z_]+:(\d+)', 1) AS INTEGER) AS device,
  regexp_matches(process_name, '/device:(TPU|GPU):\d+') AS is_device
FROM process_names
WHERE regexp_matches(process_name, '/device:[A-Za-z_]+:\d+|/host:');

-- One row per line (tid) of an xprof plane, with what the line holds.
-- `line_kind`: xla_ops | xla_modules | steps | framework_ops | name_scope |
-- gpu_stream | traceme | sparse_core | source_code | counters | host_thread | other.
-- (`TensorFlow Ops` / `TensorFlow Name Scope` are the older names of the
-- framework lines.)
CREATE OR REPLACE VIEW xla_lines AS
SELECT
  t.trace,
  t.rank,
  t.pid,
  t.tid,
  t.thread_name AS line,
  p.plane,
  p.device_kind,
  p.device,
  p.is_device,
  CASE
    WHEN t.thread_name = 'XLA Ops' THEN 'xla_ops'
    WHEN t.thread_name = 'XLA Modules' THEN 'xla_modules'
    WHEN t.thread_name = 'Steps' THEN 'steps'
    WHEN t.thread_name IN ('Framework Ops', 'TensorFlow Ops') THEN 'framework_ops'
    WHEN t.thread_name IN ('Framework Name Scope', 'TensorFlow Name Scope') THEN 'name_scope'
    WHEN regexp_matches(t.thread_name, '^Stream #\d+') THEN 'gpu_stream'
    WHEN t.thread_name = 'XLA TraceMe' THEN 'traceme'
    WHEN t.thread_name LIKE 'Sparse Core%' THEN 'sparse_core'
    WHEN t.thread_name = 'Source code' THEN 'source_code'
    WHEN t.thread_name = '_counters_' THEN 'counters'
    WHEN p.device_kind = 'host' THEN 'host_thread'
    ELSE 'other'
  END AS line_kind
FROM thread_names AS t
JOIN xla_planes AS p USING (trace, rank, pid);

-- Bytes of one element of an XLA primitive type (NULL when unknown, e.g. s4), from
-- the one dtype table (sql/views/dtypes.sql).
CREATE OR REPLACE MACRO xla_dtype_bytes(dt) AS dtype_bytes(lower(dt));

-- Bytes of one array shape such as `bf16[8,1024]` (layout suffix ignored).
-- A scalar (`f32[]`) is one element; a dynamic bound `<=10` counts as 10.
CREATE OR REPLACE MACRO _xla_array_bytes(arr) AS
xla_dtype_bytes(regexp_extract(arr, '^([a-z][a-z0-9]*)\[', 1))
* CASE
    WHEN regexp_extract(arr, '\[([^\]]*)\]', 1) = '' THEN 1
    ELSE list_reduce(
      list_transform(
        string_split(regexp_extract(arr, '\[([^\]]*)\]', 1), ','),
        lambda d: TRY_CAST(regexp_replace(d, '[^0-9]', '', 'g') AS BIGINT)
      ),
      lambda a, b: a * b
    )
  END;

-- Bytes of an XLA `shape_with_layout`: `bf16[8,1024,4096]{2,1,0}` -> 67108864.
-- A tuple `(f32[1024]{0}, bf16[8]{0})` is the sum of its arrays (4112): what a
-- combined collective moves. NULL when the text holds no array or an element
-- type of unknown size.
CREATE OR REPLACE MACRO xla_shape_bytes(shape) AS
CASE
  WHEN list_bool_or(list_transform(regexp_extract_all(shape, '[a-z][a-z0-9]*\[[^\]]*\]'),
                                   lambda arr: _xla_array_bytes(arr) IS NULL))
    THEN NULL
  ELSE list_sum(list_transform(regexp_extract_all(shape, '[a-z][a-z0-9]*\[[^\]]*\]'),
                               lambda arr: _xla_array_bytes(arr)))
END;

-- How XLA ops are classified, version 1: ONE table, first match (lowest
-- priority) wins. `target` says what the RE2 pattern is matched against, always
-- lower-cased: `category` = hlo_category, `name` = the op name without a leading
-- `%` and without its `.N` suffix (`all-gather-start.3` -> `all-gather-start`),
-- `either` = name || ' ' || hlo_category. Ops no rule matches are `other`
-- (copies, data formatting, control flow, ...). The category rules follow
-- xprof's own collective categories (incl. `all-reduce fusion`, `megacore fusion`
-- and host send/recv); the name rules also know JAX's primitive-named ops
-- (`psum.7`, `all_gather.3`, `ppermute`, `psum_scatter`). The compute keywords are
-- CCL-Bench group 21's (`dot convolution gemm matmul fusion compute custom-call`);
-- note that this makes xprof's `non-fusion elementwise` category compute.
CREATE OR REPLACE VIEW xla_op_rules AS
SELECT * FROM (VALUES
  (10, 'category', '^all-reduce-scatter', 'comm', 'reduce_scatter'),
  (11, 'category', '^all-reduce', 'comm', 'all_reduce'),
  (12, 'category', '^all-gather', 'comm', 'all_gather'),
  (13, 'category', '^reduce-scatter', 'comm', 'reduce_scatter'),
  (14, 'category', '^(ragged-)?all-to-all', 'comm', 'all_to_all'),
  (15, 'category', '^collective-permute', 'comm', 'collective_permute'),
  (16, 'category', '^collective-broadcast', 'comm', 'broadcast'),
  (17, 'category', '^megacore fusion', 'comm', 'megacore'),
  (18, 'category', '^host send', 'comm', 'send'),
  (19, 'category', '^host recv', 'comm', 'recv'),
  (30, 'name', 'all-reduce-scatter', 'comm', 'reduce_scatter'),
  (31, 'name', 'reduce-scatter|reduce_scatter|reducescatter|^psum_scatter', 'comm', 'reduce_scatter'),
  (32, 'name', 'all-reduce|all_reduce|allreduce|^p(sum|max|min)(_|$)', 'comm', 'all_reduce'),
  (33, 'name', 'all-gather|all_gather|allgather', 'comm', 'all_gather'),
  (34, 'name', 'all-to-all|all_to_all|alltoall', 'comm', 'all_to_all'),
  (35, 'name', 'collective-permute|collective_permute|^ppermute', 'comm', 'collective_permute'),
  (36, 'name', 'collective-broadcast', 'comm', 'broadcast'),
  (37, 'name', '^send(-done)?$', 'comm', 'send'),
  (38, 'name', '^recv(-done)?$', 'comm', 'recv'),
  (39, 'name', 'nccl', 'comm', NULL),
  (60, 'either', 'dot|convolution|gemm|matmul|fusion|compute|custom-call', 'compute', NULL)
) AS rules(priority, target, pattern, op_kind, coll_type);

-- Every XLA op event of a device, one row per event, classified. Sources, per
-- (trace, rank): `xla_ops_line` (events on a device plane's `XLA Ops` line), else
-- for GPU planes without that line `gpu_stream` (kernels on `Stream #N` lines,
-- classified by the 'gpu_activity' rules of the shared table kernel_class_rules,
-- version 1; compute by default;
-- memcpy/memset activities are not ops), else, when the profile has no device
-- plane op at all, `host_thunk` (host events with `hlo_op`: JAX/XLA on CPU).
-- `device_ps` = device_duration_ps, else dur (exact integer picoseconds).
-- `async_part` = start | done for `<collective>-start[.N]` / `-done[.N]`, whose
-- `pair_key` (`all-gather.N`) matches the two halves (see xla_ops).
CREATE OR REPLACE VIEW xla_op_events AS
WITH device_line_ops AS (
  SELECT s.* EXCLUDE (device), l.plane, l.device_kind, l.device, 'xla_ops_line' AS op_source
  FROM slices AS s
  JOIN xla_lines AS l USING (trace, rank, pid, tid)
  WHERE l.is_device AND l.line_kind = 'xla_ops'
),
stream_ops AS (
  SELECT s.* EXCLUDE (device), l.plane, l.device_kind, l.device, 'gpu_stream' AS op_source
  FROM slices AS s
  JOIN xla_lines AS l USING (trace, rank, pid, tid)
  WHERE l.is_device AND l.line_kind = 'gpu_stream'
    AND NOT regexp_matches(s.name, '^(Memcpy|Memset)')
    AND NOT EXISTS (
      SELECT 1 FROM xla_lines AS x
      WHERE x.trace = l.trace AND x.rank = l.rank AND x.pid = l.pid AND x.line_kind = 'xla_ops'
    )
),
device_ops AS (
  SELECT * FROM device_line_ops
  UNION ALL BY NAME
  SELECT * FROM stream_ops
),
host_ops AS (
  SELECT
    s.* EXCLUDE (device), p.plane, p.device_kind,
    TRY_CAST(s.args ->> 'device_ordinal' AS INTEGER) AS device,
    'host_thunk' AS op_source
  FROM slices AS s
  JOIN xla_planes AS p USING (trace, rank, pid)
  WHERE p.device_kind = 'host' AND s.hlo_op IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM device_ops AS d WHERE d.trace = s.trace AND d.rank = s.rank)
),
ops AS (
  SELECT
    trace, rank, pid, tid, plane, device_kind, device, op_source, name,
    -- `%all-gather-start.3` -> `all-gather-start`
    regexp_replace(lower(ltrim(name, '%')), '\.\d+$', '') AS name_base,
    hlo_op, hlo_module, hlo_category, long_name, ts_ns, dur_ns, end_ns,
    coalesce(device_duration_ps, dur_ns * 1000) AS device_ps,
    flops, model_flops, bytes_accessed, raw_bytes_accessed, shape_with_layout,
    group_id, run_id, program_id, args, file_id, event_idx
  FROM (
    SELECT * FROM device_ops
    UNION ALL BY NAME
    SELECT * FROM host_ops
  )
),
-- rules run once per distinct (name, category), not per event
xla_class AS (
  SELECT
    n.name_base,
    n.hlo_category,
    arg_min(r.op_kind, r.priority) AS op_kind,
    arg_min(r.coll_type, r.priority) AS coll_type
  FROM (SELECT DISTINCT name_base, hlo_category FROM ops WHERE op_source <> 'gpu_stream') AS n
  JOIN xla_op_rules AS r
    ON regexp_matches(
      CASE r.target
        WHEN 'category' THEN lower(coalesce(n.hlo_category, ''))
        WHEN 'name' THEN n.name_base
        ELSE n.name_base || ' ' || lower(coalesce(n.hlo_category, ''))
      END,
      r.pattern
    )
  GROUP BY ALL
),
stream_class AS (
  SELECT
    n.name,
    arg_min(r.kernel_class, r.priority) AS kernel_class,
    arg_min(r.coll_type, r.priority) AS coll_type
  FROM (
    SELECT name, unnest(kernel_class_matches(name, 1, 'gpu_activity')) AS priority
    FROM (SELECT DISTINCT name FROM ops WHERE op_source = 'gpu_stream')
  ) AS n
  JOIN kernel_class_rules AS r
    ON r.version = 1 AND r.applies_to = 'gpu_activity' AND r.priority = n.priority
  GROUP BY ALL
),
classified AS (
  SELECT
    o.*,
    CASE
      WHEN o.op_source = 'gpu_stream' THEN
        CASE WHEN sc.kernel_class = 'comm' THEN 'comm' ELSE 'compute' END
      ELSE coalesce(xc.op_kind, 'other')
    END AS op_kind,
    CASE
      WHEN o.op_source = 'gpu_stream' THEN CASE WHEN sc.kernel_class = 'comm' THEN sc.coll_type END
      ELSE xc.coll_type
    END AS coll_type
  FROM ops AS o
  LEFT JOIN xla_class AS xc
    ON o.op_source <> 'gpu_stream' AND xc.name_base = o.name_base
    AND xc.hlo_category IS NOT DISTINCT FROM o.hlo_category
  LEFT JOIN stream_class AS sc ON o.op_source = 'gpu_stream' AND sc.name = o.name
),
-- shapes repeat as much as names: parse each distinct one once
shapes AS (
  SELECT shape_with_layout, xla_shape_bytes(shape_with_layout) AS shape_bytes
  FROM (SELECT DISTINCT shape_with_layout FROM ops WHERE shape_with_layout IS NOT NULL)
)
SELECT
  c.* EXCLUDE (name_base),
  CASE
    WHEN c.op_kind = 'comm' AND c.op_source <> 'gpu_stream'
      THEN nullif(regexp_extract(c.name_base, '-(start|done)$', 1), '')
  END AS async_part,
  -- `all-gather-start.3` and `all-gather-done.3` -> `all-gather.3`
  regexp_replace(lower(ltrim(c.name, '%')), '-(start|done)(\.\d+)?$', '\2') AS pair_key,
  sh.shape_bytes
FROM classified AS c
LEFT JOIN shapes AS sh USING (shape_with_layout);

-- One row per XLA op execution on a device: xla_op_events with each async
-- collective's `-start` and `-done` events merged into ONE row (`async_part` =
-- 'pair') that runs from the start's ts to the done's end. A start is paired
-- with the first done of the same pair key on the same device at or after it,
-- unless another start of that key comes first; halves left without a partner
-- (cut by the profiling window) stay single rows with `async_part` start/done.
--   device_ps      device time in ps: device_duration_ps, else dur; for a pair
--                  the span start.ts -> done.end (the transfer runs between them,
--                  overlapped with the ops in between), not the halves' own times.
--   message_bytes  result bytes from shape_with_layout (xla_shape_bytes; for a
--                  pair the done's shape, the collective's result, then the
--                  start's), else raw_bytes_accessed, else bytes_accessed.
--   op_kind        comm | compute | other (xla_op_rules); coll_type for comm.
--   flops, model_flops  the op's arguments; for a pair the halves' sum, NULL
--                  (not 0) when neither half carries the argument.
-- batch: shared
CREATE OR REPLACE VIEW xla_ops AS
WITH ev AS (
  SELECT *, coalesce(device, -1) AS device_key FROM xla_op_events
),
starts AS (
  SELECT
    *,
    lead(ts_ns) OVER (PARTITION BY trace, rank, pid, device_key, pair_key ORDER BY ts_ns, event_idx) AS next_start_ns
  FROM ev
  WHERE async_part = 'start'
),
dones AS (
  SELECT * FROM ev WHERE async_part = 'done'
),
candidate_pairs AS (
  SELECT
    s.*,
    d.event_idx AS done_idx,
    d.ts_ns AS done_ts_ns,
    d.end_ns AS done_end_ns,
    d.flops AS done_flops,
    d.model_flops AS done_model_flops,
    d.shape_bytes AS done_shape_bytes,
    d.raw_bytes_accessed AS done_raw_bytes,
    d.bytes_accessed AS done_bytes
  FROM starts AS s
  ASOF LEFT JOIN dones AS d
    ON d.trace = s.trace AND d.rank = s.rank AND d.pid = s.pid AND d.device_key = s.device_key
    AND d.pair_key = s.pair_key AND d.ts_ns >= s.ts_ns
),
pairs AS (
  SELECT
    * EXCLUDE (done_idx),
    -- a done after the next start belongs to that start
    CASE WHEN next_start_ns IS NULL OR done_ts_ns < next_start_ns THEN done_idx END AS done_idx
  FROM candidate_pairs
),
merged AS (
  SELECT
    trace, rank, pid, tid, plane, device_kind, device, op_source, name, hlo_op, hlo_module,
    hlo_category, long_name, op_kind, coll_type,
    CASE WHEN done_idx IS NULL THEN 'start' ELSE 'pair' END AS async_part,
    pair_key,
    ts_ns,
    CASE WHEN done_idx IS NULL THEN end_ns ELSE done_end_ns END AS end_ns,
    CASE WHEN done_idx IS NULL THEN device_ps ELSE (done_end_ns - ts_ns) * 1000 END AS device_ps,
    -- a pair's FLOPs are the halves' sum; NULL (not 0) when neither half has any,
    -- so that a pair without model_flops is not counted as an op that carries them
    CASE
      WHEN done_idx IS NULL OR (flops IS NULL AND done_flops IS NULL) THEN flops
      ELSE coalesce(flops, 0) + coalesce(done_flops, 0)
    END AS flops,
    CASE
      WHEN done_idx IS NULL OR (model_flops IS NULL AND done_model_flops IS NULL) THEN model_flops
      ELSE coalesce(model_flops, 0) + coalesce(done_model_flops, 0)
    END AS model_flops,
    CASE
      WHEN done_idx IS NULL THEN coalesce(shape_bytes, raw_bytes_accessed, bytes_accessed)
      ELSE coalesce(done_shape_bytes, shape_bytes, done_raw_bytes, raw_bytes_accessed, done_bytes, bytes_accessed)
    END AS message_bytes,
    shape_with_layout, group_id, run_id, program_id, args, file_id, event_idx, done_idx AS done_event_idx
  FROM pairs
),
unmatched_dones AS (
  SELECT d.*
  FROM dones AS d
  ANTI JOIN merged AS m
    ON m.trace = d.trace AND m.rank = d.rank AND m.file_id = d.file_id AND m.done_event_idx = d.event_idx
)
SELECT
  trace, rank, pid, tid, plane, device_kind, device, op_source, name, hlo_op, hlo_module,
  hlo_category, long_name, op_kind, coll_type, async_part, pair_key, ts_ns, end_ns, device_ps,
  flops, model_flops, coalesce(shape_bytes, raw_bytes_accessed, bytes_accessed) AS message_bytes,
  shape_with_layout, group_id, run_id, program_id, args, file_id, event_idx,
  CAST(NULL AS BIGINT) AS done_event_idx
FROM ev
WHERE async_part IS NULL
UNION ALL BY NAME
SELECT * FROM merged
UNION ALL BY NAME
SELECT
  trace, rank, pid, tid, plane, device_kind, device, op_source, name, hlo_op, hlo_module,
  hlo_category, long_name, op_kind, coll_type, async_part, pair_key, ts_ns, end_ns, device_ps,
  flops, model_flops, coalesce(shape_bytes, raw_bytes_accessed, bytes_accessed) AS message_bytes,
  shape_with_layout, group_id, run_id, program_id, args, file_id, event_idx,
  CAST(NULL AS BIGINT) AS done_event_idx
FROM unmatched_dones;

-- Per device (trace, rank, pid, device) of xla_ops: op time by kind and the
-- device's busy span. The building block of the per-device XLA metrics.
--   span_ns  max(end) - min(ts) over the device's ops
--   *_ps     summed device time (ops on one XLA Ops line do not overlap, so the
--            sum is the busy time; an async pair's span overlaps the ops it hides)
CREATE OR REPLACE VIEW xla_device_totals AS
SELECT
  trace,
  rank,
  pid,
  device,
  any_value(device_kind) AS device_kind,
  any_value(op_source) AS op_source,
  count(*) AS ops,
  count(*) FILTER (WHERE op_kind = 'comm') AS comm_ops,
  sum(device_ps) AS all_ps,
  coalesce(sum(device_ps) FILTER (WHERE op_kind = 'comm'), 0) AS comm_ps,
  coalesce(sum(device_ps) FILTER (WHERE op_kind = 'compute'), 0) AS compute_ps,
  coalesce(sum(device_ps) FILTER (WHERE op_kind = 'other'), 0) AS other_ps,
  min(ts_ns) AS start_ns,
  max(end_ns) AS end_ns,
  max(end_ns) - min(ts_ns) AS span_ns
FROM xla_ops
GROUP BY trace, rank, pid, device;

-- Steps of an XLA profile, one row per (trace, rank, pid, step); the first source
-- a (trace, rank) has wins:
--   device_steps     events on device planes' `Steps` line (one per device and
--                    step); step = step_num, else the name as a number, else group_id
--   host_annotation  host step annotations: StepTraceAnnotation events (they
--                    carry step_num; xprof names them e.g. `train 3`) or `train N`
--   step_markers     else torch_xla `StepMarker`s longer than 10% of the longest
--                    one (CCL-Bench's filter), numbered in time order
--   module_runs      each run of the device's busiest `XLA Modules` module (the
--                    training jit), numbered in time order per device
-- `pid` / `device` are the device plane's, or the host plane's for annotations.
CREATE OR REPLACE VIEW xla_steps AS
WITH device_steps AS (
  SELECT
    s.trace, s.rank, s.pid, l.device,
    coalesce(s.step_num, TRY_CAST(s.name AS BIGINT), s.group_id) AS step,
    s.ts_ns, s.end_ns, 'device_steps' AS source
  FROM slices AS s
  JOIN xla_lines AS l USING (trace, rank, pid, tid)
  WHERE l.is_device AND l.line_kind = 'steps'
),
host_slices AS (
  -- Only the columns used below (the CTE is read twice, so DuckDB materialises it,
  -- and `s.*` would read every column, args included), and no filter on the slices
  -- themselves: with one, DuckDB estimated them the smaller side and hashed every
  -- slice of a Kineto trace (no host plane) to join them to nothing. Unclosed
  -- slices (dur NULL) are left out by the users.
  SELECT s.trace, s.rank, s.pid, s.name, s.ts_ns, s.dur_ns, s.end_ns, s.step_num
  FROM slices AS s
  JOIN xla_planes AS p USING (trace, rank, pid)
  WHERE p.device_kind = 'host'
),
annotated AS (
  SELECT
    trace, rank, pid, CAST(NULL AS INTEGER) AS device,
    coalesce(step_num, TRY_CAST(regexp_extract(name, '^train\s+(\d+)$', 1) AS BIGINT)) AS step,
    ts_ns, end_ns, 'host_annotation' AS source
  FROM host_slices
  WHERE (step_num IS NOT NULL OR regexp_matches(name, '^train\s+\d+$')) AND dur_ns IS NOT NULL
),
step_markers AS (
  SELECT
    trace, rank, pid, CAST(NULL AS INTEGER) AS device,
    row_number() OVER (PARTITION BY trace, rank ORDER BY ts_ns) - 1 AS step,
    ts_ns, end_ns, 'step_markers' AS source
  FROM (
    SELECT *, max(dur_ns) OVER (PARTITION BY trace, rank) AS longest
    FROM host_slices
    WHERE name = 'StepMarker' AND dur_ns IS NOT NULL
  )
  WHERE dur_ns > 0.1 * longest
),
module_events AS (
  SELECT
    s.trace, s.rank, s.pid, l.device, s.ts_ns, s.end_ns, s.dur_ns,
    regexp_replace(s.name, '\(\d+\)$', '') AS module
  FROM slices AS s
  JOIN xla_lines AS l USING (trace, rank, pid, tid)
  WHERE l.is_device AND l.line_kind = 'xla_modules'
),
busiest_module AS (
  -- equal totals: the first module name, so the choice does not depend on row order
  SELECT trace, rank, pid, arg_min(module, (-total_ns, module)) AS module
  FROM (SELECT trace, rank, pid, module, sum(dur_ns) AS total_ns FROM module_events GROUP BY ALL)
  GROUP BY ALL
),
module_runs AS (
  SELECT
    m.trace, m.rank, m.pid, m.device,
    row_number() OVER (PARTITION BY m.trace, m.rank, m.pid ORDER BY m.ts_ns) - 1 AS step,
    m.ts_ns, m.end_ns, 'module_runs' AS source
  FROM module_events AS m
  JOIN busiest_module AS b USING (trace, rank, pid, module)
),
candidates AS (
  SELECT *, 1 AS preference FROM device_steps
  UNION ALL
  SELECT *, 2 FROM annotated
  UNION ALL
  SELECT *, 3 FROM step_markers
  UNION ALL
  SELECT *, 4 FROM module_runs
),
chosen AS (
  SELECT trace, rank, min(preference) AS preference
  FROM candidates
  GROUP BY ALL
)
SELECT
  c.trace, c.rank, c.pid, c.device, c.step,
  min(c.ts_ns) AS ts_ns,
  max(c.end_ns) AS end_ns,
  max(c.end_ns) - min(c.ts_ns) AS dur_ns,
  any_value(c.source) AS source
FROM candidates AS c
JOIN chosen AS h
  ON h.trace = c.trace AND h.rank = c.rank AND h.preference = c.preference
GROUP BY c.trace, c.rank, c.pid, c.device, c.step;

-- Framework collectives run by host threads of an xprof profile (TensorFlow's
-- CollectiveReduce/Gather/Bcast/AllToAll ops, NcclAllReduce, ...). They are
-- host-side work: listed for inspection, never counted in device metrics.
CREATE OR REPLACE VIEW xla_host_collectives AS
SELECT
  l.trace, l.rank, l.pid, l.tid, l.line AS thread_name, s.name,
  CASE
    WHEN regexp_matches(s.name, 'ReduceScatter') THEN 'reduce_scatter'
    WHEN regexp_matches(s.name, 'AllToAll') THEN 'all_to_all'
    WHEN regexp_matches(s.name, 'Gather') THEN 'all_gather'
    WHEN regexp_matches(s.name, 'Bcast|Broadcast') THEN 'broadcast'
    WHEN regexp_matches(s.name, 'NcclReduce') THEN 'reduce'
    ELSE 'all_reduce'
  END AS coll_type,
  s.ts_ns, s.dur_ns, s.end_ns, s.args
FROM slices AS s
JOIN xla_lines AS l USING (trace, rank, pid, tid)
WHERE l.device_kind = 'host'
  AND regexp_matches(
    s.name,
    '(^|[/:])(Collective(Reduce|ReduceScatter|Gather|BcastSend|BcastRecv|AllToAll)|Nccl(AllReduce|Reduce|Broadcast))(V\d+)?$'
  );

-- Per (trace, rank) of an XLA profile: how long the devices were active.
--   device_span_ns      max(end) - min(ts) over every slice on a device plane
--                       (any line); a host-only profile: over its host XLA ops
--   span_source         device_planes | host_xla_ops
--   all_events_span_ns  the same over every slice, host threads included
--                       (CCL-Bench group 21's wall time)
CREATE OR REPLACE VIEW xla_wall_time AS
WITH device_events AS (
  SELECT s.trace, s.rank, min(s.ts_ns) AS start_ns, max(s.end_ns) AS end_ns
  FROM slices AS s
  JOIN xla_planes AS p USING (trace, rank, pid)
  WHERE p.is_device AND s.dur_ns IS NOT NULL
  GROUP BY ALL
),
host_ops AS (
  SELECT trace, rank, min(ts_ns) AS start_ns, max(end_ns) AS end_ns
  FROM xla_ops
  WHERE op_source = 'host_thunk'
  GROUP BY ALL
),
all_events AS (
  SELECT s.trace, s.rank, min(s.ts_ns) AS start_ns, max(s.end_ns) AS end_ns
  FROM slices AS s
  SEMI JOIN (SELECT DISTINCT trace, rank FROM xla_planes) AS p USING (trace, rank)
  WHERE s.dur_ns IS NOT NULL
  GROUP BY ALL
)
SELECT
  a.trace,
  a.rank,
  coalesce(d.start_ns, h.start_ns) AS start_ns,
  coalesce(d.end_ns, h.end_ns) AS end_ns,
  coalesce(d.end_ns - d.start_ns, h.end_ns - h.start_ns) AS device_span_ns,
  CASE WHEN d.trace IS NOT NULL THEN 'device_planes' WHEN h.trace IS NOT NULL THEN 'host_xla_ops' END AS span_source,
  a.end_ns - a.start_ns AS all_events_span_ns
FROM all_events AS a
LEFT JOIN device_events AS d USING (trace, rank)
LEFT JOIN host_ops AS h USING (trace, rank);

-- Per trace: whether it has XLA ops at all (ranks of `scope` only), the common
-- first test of every XLA metric. `scope` is a relation of (trace, rank).
CREATE OR REPLACE MACRO xla_scope_ops(scope) AS TABLE
SELECT
  t.trace,
  count(o.trace) AS xla_ops,
  CASE WHEN count(o.trace) = 0 THEN 'no XLA ops (not an XLA/xprof profile)' END AS no_ops_reason
FROM (SELECT DISTINCT trace FROM query_table(scope)) AS t
LEFT JOIN (
  SELECT o.trace FROM xla_ops AS o JOIN query_table(scope) AS m USING (trace, rank)
) AS o USING (trace)
GROUP BY t.trace;

-- The Hockney fit of CCL-Bench group 21, per trace. Samples: every all-reduce
-- op (xla_ops, coll_type all_reduce) with message_bytes > 0 and device time > 0,
-- on every device. With n = n_chips (from `params`, a relation of (trace,
-- n_chips)) the ring model T = 2(n-1)*alpha + 2(n-1)/n * S * beta is linear in
-- x = S/n with y = T/(2(n-1)): ordinary least squares with an intercept gives
-- alpha (s) = intercept and beta (s/byte) = slope. It needs >= 5 samples and >= 2
-- distinct sizes; `reason` says why there is no fit.
CREATE OR REPLACE MACRO xla_hockney_fit(scope, params) AS TABLE
WITH samples AS (
  SELECT o.trace, o.message_bytes, o.device_ps
  FROM xla_ops AS o
  JOIN query_table(scope) AS m USING (trace, rank)
  WHERE o.op_kind = 'comm' AND o.coll_type = 'all_reduce' AND o.message_bytes > 0 AND o.device_ps > 0
),
fits AS (
  SELECT
    s.trace,
    count(*) AS samples,
    count(DISTINCT s.message_bytes) AS distinct_sizes,
    regr_intercept(s.device_ps / 1e12 / (2 * (p.n_chips - 1)), s.message_bytes / p.n_chips) AS alpha_s,
    regr_slope(s.device_ps / 1e12 / (2 * (p.n_chips - 1)), s.message_bytes / p.n_chips) AS beta_s_per_byte,
    regr_r2(s.device_ps / 1e12 / (2 * (p.n_chips - 1)), s.message_bytes / p.n_chips) AS r2
  FROM samples AS s
  JOIN query_table(params) AS p USING (trace)
  WHERE p.n_chips >= 2
  GROUP BY s.trace
),
judged AS (
  SELECT
    x.trace,
    p.n_chips,
    coalesce(f.samples, 0) AS samples,
    coalesce(f.distinct_sizes, 0) AS distinct_sizes,
    f.alpha_s,
    f.beta_s_per_byte,
    f.r2,
    CASE
      WHEN x.no_ops_reason IS NOT NULL THEN x.no_ops_reason
      WHEN p.n_chips IS NULL THEN 'no n_chips (--param n_chips=N, or the card''s total_count)'
      WHEN p.n_chips < 2 THEN 'n_chips < 2: no communication to model'
      WHEN coalesce(f.samples, 0) < 5 OR coalesce(f.distinct_sizes, 0) < 2 THEN
        coalesce(f.samples, 0) || ' all-reduce ops with size and time in '
        || coalesce(f.distinct_sizes, 0) || ' distinct sizes: the fit needs >= 5 in >= 2'
    END AS reason
  FROM xla_scope_ops(scope) AS x
  LEFT JOIN query_table(params) AS p USING (trace)
  LEFT JOIN fits AS f USING (trace)
)
SELECT
  trace, n_chips, samples, distinct_sizes, reason, r2,
  CASE WHEN reason IS NULL THEN alpha_s END AS alpha_s,
  CASE WHEN reason IS NULL THEN beta_s_per_byte END AS beta_s_per_byte
FROM judged;

-- Tokens from FLOPs, CCL-Bench group 21's estimate, per trace:
--   flops_per_token = 6 * model_params for training (2 * model_params when the
--                     card's phase is inference or serving; group 21 always 6)
--   tokens          = sum of model_flops over the device XLA ops / flops_per_token
--   tokens_per_s    = tokens / wall time (xla_wall_time.device_span_ns, longest host)
-- `params` is a relation of (trace, model_params).
CREATE OR REPLACE MACRO xla_token_estimate(scope, params) AS TABLE
WITH flops AS (
  SELECT o.trace, sum(o.model_flops) AS model_flops, count(o.model_flops) AS ops_with_model_flops
  FROM xla_ops AS o
  JOIN query_table(scope) AS m USING (trace, rank)
  GROUP BY ALL
),
wall AS (
  SELECT w.trace, max(w.device_span_ns) AS wall_ns
  FROM xla_wall_time AS w
  JOIN query_table(scope) AS m USING (trace, rank)
  GROUP BY ALL
),
basis AS (
  SELECT
    p.trace,
    p.model_params,
    c.phase,
    CASE WHEN lower(c.phase) IN ('inference', 'serving') THEN 2 ELSE 6 END AS flops_per_param
  FROM query_table(params) AS p
  LEFT JOIN cards AS c USING (trace)
)
SELECT
  x.trace,
  b.model_params,
  b.phase,
  b.flops_per_param,
  b.flops_per_param * b.model_params AS flops_per_token,
  f.model_flops AS total_model_flops,
  f.model_flops / (b.flops_per_param * b.model_params) AS tokens,
  w.wall_ns / 1e9 AS wall_time_s,
  f.model_flops / (b.flops_per_param * b.model_params) / (w.wall_ns / 1e9) AS tokens_per_s,
  CASE
    WHEN x.no_ops_reason IS NOT NULL THEN x.no_ops_reason
    WHEN b.model_params IS NULL THEN 'no model_params (--param model_params=N, or the card''s num_params)'
    WHEN b.model_params <= 0 THEN 'model_params <= 0'
    WHEN coalesce(f.ops_with_model_flops, 0) = 0 THEN 'no XLA op carries model_flops'
    WHEN f.model_flops <= 0 THEN 'the ops'' model_flops sum to 0'
    WHEN coalesce(w.wall_ns, 0) <= 0 THEN 'no device time span'
  END AS reason
FROM xla_scope_ops(scope) AS x
LEFT JOIN basis AS b USING (trace)
LEFT JOIN flops AS f USING (trace)
LEFT JOIN wall AS w USING (trace);
