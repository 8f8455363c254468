-- HTA 0.5.0's critical path graph (hta/analyzers/critical_path_analysis.py,
-- CriticalPathAnalysis.critical_path_analysis with annotation "ProfilerStep",
-- instance 0), built in SQL from the rows HTA analyses (hta_events). The longest
-- path through it is computed in Python (cclq/query/critical_path.py, before the
-- metric hta_critical_path_breakdown runs): why that step is not SQL is written there.
--
-- The graph, as HTA builds it for one rank:
--  * Window: the first row (in HTA's frame order) whose name contains
--    "ProfilerStep"; [its ts, its ts + dur]. (cclq.TraceAnalysis's
--    critical_path_analysis(rank, annotation, instance_id) sets the DuckDB
--    variables hta_cp_annotation, hta_cp_first_instance, hta_cp_last_instance:
--    the rows whose name contains the annotation, instances first..last in
--    frame order, [smallest ts, largest end]; annotation '' is the whole rank,
--    as HTA takes it.) CPU rows (stream -1) starting in
--    the window with dur > 0, and GPU rows (stream <> -1) launched by such a
--    CPU row (the CPU row's index_correlation points at them).
--  * Nodes: a start and an end node for each of those rows that is a cpu_op,
--    cuda_runtime or cuda_driver row, or a GPU row with index_correlation >= 0.
--    `node_id` orders them by time (HTA sorts the concatenation of starts and
--    ends with an unstable sort; ties here: starts first, then row order).
--  * CPU edges, per thread (HTA's call stack of the window's CPU rows, visited
--    depth first, which for properly nested rows is the time order of their ends
--    with compare_events' tie rules, the key hta_call_stack uses): consecutive
--    node ends of one top-level operator are joined by an operator edge of
--    weight = time difference (0 into the end of a blocking call:
--    cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventQuery,
--    cudaEventSynchronize, cudaMemcpy, cudaMemcpyAsync); the end of a top-level
--    operator and the start of the next are joined by a dependency edge of
--    weight 0. Rows without nodes (user annotations) shape the stack only.
--  * GPU edges, per GPU row in ts order: its span (start -> end, weight dur);
--    then a launch edge (runtime start -> kernel start, weight = the delay)
--    when the stream's queue (HTA's queue length series over the whole rank,
--    as hta_queue_length but keyed by event) was 1 after the launch and 0
--    after the kernel started, and the stream's previous kernel ended before
--    the launch; otherwise a kernel-kernel edge from the stream's previous
--    kernel's end (weight = the gap).
--  * `bound_by` (HTA's bound_by()): operator edges on the CPU "cpu_bound", GPU
--    spans "gpu_communication_bound" (^nccl.*Kernel) or "gpu_compute_bound",
--    launch edges "gpu_kernel_launch_overhead", kernel-kernel edges
--    "gpu_kernel_kernel_overhead", dependency edges "" (HTA's empty label).
--  * `weight_us` is the edge's weight as HTA records it (the breakdown sums
--    it); `path_weight_us` the weight the longest path uses: HTA sets weights
--    <= -1 to 0 (nanosecond rounding can end a child after its parent).
--  * `edge_no` is HTA's insertion order (CPU edges thread by thread, then GPU
--    edges): networkx breaks ties between equally long paths by it.
--  * Sync edges (HTA's CUDA synchronization, rows of category cuda_sync: Event
--    Sync, Stream Sync, Context Sync, Stream Wait Event; Kineto writes them from
--    PyTorch 2.1 on when asked): weight 0, class '', built as the CTEs below say.
-- Not reproduced (a documented limit): HTA's repair of badly nested CPU rows (its
-- stack pops whatever is on top), where rows overlap without nesting.
--
-- Joins: a row of a rank is looked up by one row-valued key, (rk, event_idx) =
-- (rk, partner_idx). Written as two equalities, DuckDB derives rk = rk between two
-- lookups of different rows of the same edge (a kernel's start and the node before
-- it) and may join those first: every node of the rank with every other, 2e9 rows on
-- MTIA's trace when hta_events is a table (issue 41,
-- tests/query/test_hta_critical_path_at_size.py).
-- requires: hta_analyses

-- The window of each rank (see above): the rows whose name contains the annotation
-- (DuckDB variable hta_cp_annotation, default 'ProfilerStep'; '' is the whole rank),
-- instances hta_cp_first_instance .. hta_cp_last_instance (default 0 .. 0) in frame
-- order; [smallest ts, largest end].
CREATE OR REPLACE VIEW hta_critical_path_step AS
WITH annotated AS (
  SELECT
    e.trace, e.rank, e.ts_us, e.end_us,
    row_number() OVER (PARTITION BY e.trace, e.rank ORDER BY e.row_order) - 1 AS instance,
    coalesce(getvariable('hta_cp_annotation'), 'ProfilerStep') = '' AS whole_rank
  FROM hta_events AS e
  JOIN trace_ranks AS r USING (trace, rank)
  WHERE contains(e.name, coalesce(getvariable('hta_cp_annotation'), 'ProfilerStep'))
)
SELECT trace, rank, min(ts_us) AS start_us, max(end_us) AS end_us
FROM annotated
WHERE whole_rank
  OR instance BETWEEN coalesce(getvariable('hta_cp_first_instance'), 0)
                  AND coalesce(getvariable('hta_cp_last_instance'), 0)
GROUP BY trace, rank;

-- The rows of hta_events the graph reads, each view below with its own filter: the
-- window's CPU rows (dur > 0) and, from the whole rank, GPU rows, launch calls,
-- cudaEventRecord / cudaStreamWaitEvent calls and CUDA sync rows. The CPU ops outside
-- the window, most of a rank, are left out: with them the rows views held every row
-- HTA analyses (5 M on 8 ranks of 250 MB, spilled to disk). cclq.query.critical_path
-- stores this view (and the step) once for the views that read it.
CREATE OR REPLACE VIEW hta_critical_path_events AS
SELECT
  e.trace, e.rank, e.file_id, e.event_idx, e.row_order, e.cat, e.name, e.stream, e.correlation, e.ts_us,
  e.end_us, e.dur_us, e.partner_idx, e.ts_runtime_us, e.pid, e.tid,
  coalesce(e.ts_us >= s.start_us AND e.ts_us <= s.end_us AND e.dur_us > 0, false) AS in_window
FROM hta_events AS e
LEFT JOIN hta_critical_path_step AS s USING (trace, rank)
WHERE e.stream <> -1
  OR e.cat = 'cuda_sync'
  OR hta_is_queue_launch(e.name)
  OR e.name IN ('cudaEventRecord', 'cudaStreamWaitEvent')
  OR in_window;

-- The window's rows (see above) of each rank: `side` 'cpu' (CPU rows starting in
-- the window, dur > 0) or 'gpu' (GPU rows they launched, and every Stream Wait Event);
-- `rk` numbers the ranks by (trace, rank), as the views below do.
CREATE OR REPLACE VIEW hta_critical_path_rows AS
WITH ranks AS MATERIALIZED (
  SELECT trace, rank, row_number() OVER (ORDER BY trace, rank) AS rk FROM trace_ranks
),
-- the rows the window can hold: its CPU rows (stream -1, starting in it, dur > 0)
-- and every GPU row (a GPU row is in when a CPU row in the window launched it).
-- Read twice, not held: held, it was every GPU row of the rank with all its columns
-- (1 M on 8 ranks of 250 MB) for the few hundred the window keeps.
ev AS NOT MATERIALIZED (
  SELECT r.rk, e.* EXCLUDE (trace, rank, in_window)
  FROM hta_critical_path_events AS e
  JOIN ranks AS r USING (trace, rank)
  WHERE e.stream <> -1 OR e.in_window
),
cpu_in AS MATERIALIZED (
  SELECT e.*
  FROM ev AS e
  WHERE e.stream = -1
),
gpu_in AS (
  SELECT g.*
  FROM ev AS g
  WHERE g.stream <> -1
    AND (EXISTS (
      SELECT 1 FROM cpu_in AS c
      WHERE (c.rk, c.partner_idx) = (g.rk, g.event_idx)
    ) OR g.name = 'Stream Wait Event')  -- HTA keeps every one, in the window or not
)
SELECT r.trace, r.rank, 'cpu' AS side, c.* FROM cpu_in AS c JOIN ranks AS r USING (rk)
UNION ALL
SELECT r.trace, r.rank, 'gpu' AS side, g.* FROM gpu_in AS g JOIN ranks AS r USING (rk);

-- Whether a row of hta_critical_path_rows has nodes (see the top of this file): a
-- CPU row of a cpu_op, cuda_runtime or cuda_driver, or a GPU row with a launch.
CREATE OR REPLACE MACRO hta_critical_path_is_node(side, cat, partner_idx) AS
(side = 'cpu' AND cat IN ('cpu_op', 'cuda_runtime', 'cuda_driver')) OR (side = 'gpu' AND partner_idx >= 0);

-- HTA's CPGraph.BLOCKING_SYNC_CALLS: the calls whose end is reached by a CPU edge of
-- weight 0. The one list: cclq.api.hta_critical_path asks it for CPNode.is_blocking.
CREATE OR REPLACE MACRO hta_critical_path_is_blocking_call(name) AS
coalesce(
  name IN ('cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventQuery', 'cudaEventSynchronize',
           'cudaMemcpy', 'cudaMemcpyAsync'),
  false
);

-- The graph's nodes among `window_rows` (rows of hta_critical_path_rows): a start and an
-- end per node row (see above), `node_id` in time order per rank. A macro, so that the
-- edges build them from the rows they hold already (each read of the plain view expands
-- the rank's hta_events again).
CREATE OR REPLACE MACRO hta_critical_path_nodes_of(window_rows) AS TABLE
WITH node_rows AS MATERIALIZED (
  SELECT rk, trace, rank, event_idx, row_order, name, ts_us, end_us
  FROM query_table(window_rows)
  WHERE hta_critical_path_is_node(side, cat, partner_idx)
),
nodes AS (
  SELECT
    rk, trace, rank, event_idx, name, is_end, time_us,
    row_number() OVER (PARTITION BY rk ORDER BY time_us, is_end, row_order) - 1 AS node_id
  FROM (
    SELECT rk, trace, rank, event_idx, name, row_order, false AS is_end, ts_us AS time_us FROM node_rows
    UNION ALL
    SELECT rk, trace, rank, event_idx, name, row_order, true, end_us FROM node_rows
  )
)
SELECT trace, rank, rk, node_id, event_idx, is_end, time_us, name FROM nodes;

CREATE OR REPLACE VIEW hta_critical_path_nodes AS
SELECT * FROM hta_critical_path_nodes_of(hta_critical_path_rows);

-- The edges of the graph of `graph_events` (rows of hta_critical_path_events) and
-- `window_rows` (rows of hta_critical_path_rows over those): hta_critical_path_edges
-- below, and what cclq.query.critical_path runs on its stored copies of the two; with
-- one more column than the view, `rk`, the rank's number in (trace, rank) order (the
-- longest path reads the edges in that order: sorted by the strings, 63 ms instead of 18
-- on the shared traces).
CREATE OR REPLACE MACRO hta_critical_path_edges_of(graph_events, window_rows) AS TABLE
WITH ranks AS MATERIALIZED (
  SELECT trace, rank, row_number() OVER (ORDER BY trace, rank) AS rk FROM trace_ranks
),
-- the whole rank's rows that the graph looks up beyond its window: GPU rows, launch
-- calls, cudaEventRecord / cudaStreamWaitEvent calls and CUDA sync rows (each use of
-- `ev` below reads only these), with the columns those uses read: the names and the
-- category as the flags they are tested for (read eight times, 2.2 M rows on 8 ranks
-- of 250 MB: with the names, 291 MB held, and spilled in the report)
ev AS MATERIALIZED (
  SELECT
    r.rk, e.file_id, e.event_idx, e.row_order, e.stream, e.correlation, e.ts_us, e.partner_idx, e.pid, e.tid,
    hta_is_queue_launch(e.name) AS is_launch,
    e.name = 'cudaEventRecord' AS is_event_record,
    e.name = 'cudaStreamWaitEvent' AS is_stream_wait,
    e.cat = 'cuda_sync' AS is_sync
  FROM query_table(graph_events) AS e
  JOIN ranks AS r USING (trace, rank)
  WHERE e.stream <> -1
    OR e.cat = 'cuda_sync'
    OR hta_is_queue_launch(e.name)
    OR e.name IN ('cudaEventRecord', 'cudaStreamWaitEvent')
),
cpu_in AS MATERIALIZED (
  SELECT * EXCLUDE (trace, rank, side) FROM query_table(window_rows) WHERE side = 'cpu'
),
gpu_in AS MATERIALIZED (
  SELECT * EXCLUDE (trace, rank, side) FROM query_table(window_rows) WHERE side = 'gpu'
),
nodes AS MATERIALIZED (
  SELECT rk, event_idx, is_end, time_us, node_id FROM hta_critical_path_nodes_of(window_rows)
),
-- CPU: the ends of the window's CPU rows per thread in call-stack order
-- (time; closes before opens; opens longest first; then row), keeping those
-- with nodes, with the number of node rows open after each. A close says whether it
-- ends a blocking call (the edge into it weighs 0): carried through the sort, not
-- looked up after it (a join of every CPU edge with its row, 40 of the edges' 380 ms
-- on the shared traces)
cpu_ends AS (
  SELECT rk, pid, tid, event_idx, 1 AS delta, ts_us AS time_us, 1 AS class, -dur_us AS k1, event_idx AS k2,
    false AS ends_blocking_call
  FROM cpu_in
  UNION ALL
  SELECT rk, pid, tid, event_idx, -1, end_us, 0, dur_us, -event_idx, hta_critical_path_is_blocking_call(name)
  FROM cpu_in
),
-- each rank's threads in (pid, tid) order: the edges' order between threads (a number
-- over the few threads, not a second sort of every CPU end: 0.06 of the edges' 0.66 s
-- on the shared traces); a thread whose rows have no nodes only leaves a gap
cpu_threads AS (
  SELECT rk, pid, tid, row_number() OVER (PARTITION BY rk ORDER BY pid, tid) AS thread_no
  FROM (SELECT DISTINCT rk, pid, tid FROM cpu_in)
),
-- how many CPU edges each thread (numbered as in cpu_threads) has, and the rank's threads
-- before it: an edge into each of its node ends but the first, 2 per node row less 1. An
-- edge's number is then known from its thread and position, without a sort of every edge
-- (`edges`). (Not cpu_threads itself with a count: the join of every CPU end with a held
-- table of threads was planned first on DuckDB 1.5, and its window took 3x as long.)
cpu_thread_edges AS MATERIALIZED (
  SELECT
    rk, thread_no, n_edges,
    CAST(sum(n_edges) OVER (PARTITION BY rk ORDER BY thread_no ROWS UNBOUNDED PRECEDING) - n_edges AS BIGINT)
      AS edges_before
  FROM (
    SELECT
      rk,
      row_number() OVER (PARTITION BY rk ORDER BY pid, tid) AS thread_no,
      greatest(2 * count(*) FILTER (WHERE hta_critical_path_is_node('cpu', cat, partner_idx)) - 1, 0) AS n_edges
    FROM cpu_in
    GROUP BY rk, pid, tid
  )
),
cpu_seq AS (
  -- one sort per thread: the previous end in the same order (lag), and the depth
  -- before this end, which is the depth after it less its own step
  SELECT
    c.rk, c.pid, c.tid, c.event_idx, c.delta, c.time_us, n.node_id, c.ends_blocking_call,
    t.thread_no,
    row_number() OVER w AS pos,
    lag(n.node_id) OVER w AS prev_node,
    lag(c.event_idx) OVER w AS prev_event_idx,
    lag(c.time_us) OVER w AS prev_time_us,
    lag(c.delta) OVER w AS prev_delta,
    sum(c.delta) OVER (w ROWS UNBOUNDED PRECEDING) - c.delta AS prev_depth_after
  FROM cpu_ends AS c
  JOIN nodes AS n
    ON (n.rk, n.event_idx) = (c.rk, c.event_idx) AND n.is_end = (c.delta = -1)
  JOIN cpu_threads AS t
    ON t.rk = c.rk AND t.pid IS NOT DISTINCT FROM c.pid AND t.tid IS NOT DISTINCT FROM c.tid
  WINDOW w AS (PARTITION BY c.rk, t.thread_no ORDER BY c.time_us, c.class, c.k1, c.k2)
),
cpu_edges AS (
  SELECT
    p.rk,
    t.edges_before + p.pos - 1 AS edge_no,
    p.prev_node AS src_node, p.node_id AS dst_node,
    p.prev_event_idx AS src_event_idx, p.prev_delta = -1 AS src_is_end,
    p.event_idx AS dst_event_idx, p.delta = -1 AS dst_is_end,
    CASE
      WHEN p.prev_delta = -1 AND p.prev_depth_after = 0 THEN 0
      WHEN p.ends_blocking_call THEN 0
      ELSE p.time_us - p.prev_time_us
    END AS weight_us,
    CASE WHEN p.prev_delta = -1 AND p.prev_depth_after = 0 THEN 'dependency' ELSE 'operator' END AS edge_type,
    CASE WHEN p.prev_delta = -1 AND p.prev_depth_after = 0 THEN '' ELSE 'cpu_bound' END AS bound_by,
    p.event_idx
  FROM cpu_seq AS p
  JOIN cpu_thread_edges AS t ON (t.rk, t.thread_no) = (p.rk, p.thread_no)
  WHERE p.prev_node IS NOT NULL
),
-- HTA's queue length series (TraceCounters, whole rank), keyed by the event
-- that changes it: +1 at a launch call, -1 at its GPU row's start
launches AS (
  SELECT rk, event_idx, correlation, ts_us, row_order
  FROM ev
  WHERE is_launch AND partner_idx > 0
),
-- the window's kernels: its GPU rows with a launch index, less the sync rows
kernel_rows AS (
  SELECT * FROM gpu_in WHERE partner_idx >= 0 AND cat IS DISTINCT FROM 'cuda_sync'
),
-- The series is read only at the window's kernels (`kernels` below) and at their
-- launch calls. Its sums run in time order, so a point later than the last of those
-- cannot reach a value read: the points stop there. HTA's default window, the first
-- ProfilerStep, needs the rank's first few thousand points, not the 2 M of 8 ranks
-- of 250 MB (2.1 s of the report's critical path); a whole-rank window keeps them all.
queue_until AS (
  SELECT g.rk, max(greatest(g.ts_us, coalesce(l.ts_us, g.ts_us))) AS last_us
  FROM kernel_rows AS g
  LEFT JOIN ev AS l ON (l.rk, l.event_idx) = (g.rk, g.partner_idx)
  GROUP BY g.rk
),
queue_points AS (
  SELECT l.rk, g.stream, l.event_idx, l.ts_us, 1 AS delta, 0 AS part, l.row_order, g.row_order AS row_order2
  FROM launches AS l
  JOIN queue_until AS u ON u.rk = l.rk AND l.ts_us <= u.last_us
  JOIN ev AS g ON (g.rk, g.correlation) = (l.rk, l.correlation) AND g.stream <> -1
  UNION ALL
  SELECT g.rk, g.stream, g.event_idx, g.ts_us, -1, 1, g.row_order, 0
  FROM ev AS g
  JOIN queue_until AS u ON u.rk = g.rk AND g.ts_us <= u.last_us
  WHERE g.stream <> -1 AND g.correlation <> -1
    AND EXISTS (SELECT 1 FROM launches AS l WHERE (l.rk, l.correlation) = (g.rk, g.correlation))
),
queue AS (
  SELECT rk, event_idx, any_value(queue_length) AS queue_length
  FROM (
    SELECT
      rk, event_idx,
      sum(delta) OVER (
        PARTITION BY rk, stream ORDER BY ts_us, part, row_order, row_order2 ROWS UNBOUNDED PRECEDING
      ) AS queue_length
    FROM queue_points
  )
  GROUP BY rk, event_idx
),
kernels AS (
  SELECT
    g.rk, g.event_idx, g.row_order, g.name, g.stream, g.ts_us, g.end_us, g.partner_idx, g.ts_runtime_us,
    row_number() OVER (PARTITION BY g.rk ORDER BY g.ts_us, g.row_order) AS kernel_no,
    lag(g.end_us) OVER s AS prev_end_us,
    lag(g.event_idx) OVER s AS prev_idx,
    qr.queue_length AS queue_length_runtime,
    qk.queue_length AS queue_length_kernel
  FROM kernel_rows AS g
  LEFT JOIN queue AS qr ON (qr.rk, qr.event_idx) = (g.rk, g.partner_idx)
  LEFT JOIN queue AS qk ON (qk.rk, qk.event_idx) = (g.rk, g.event_idx)
  WINDOW s AS (PARTITION BY g.rk, g.stream ORDER BY g.ts_us, g.row_order)
),
-- CUDA synchronization (HTA's _construct_graph_from_kernels, handle_cuda_sync).
-- The sync rows of the window: those on a stream (Stream Sync, Stream Wait Event)
-- among the GPU rows, the device-wide ones (Event Sync, Context Sync, stream -1)
-- among the CPU rows; each with its wait_on_* args (-1 when absent)
-- the args of the rank's cuda_sync rows, read from the events table filtered first (a
-- join of the events table itself would hash every event's args)
sync_args AS MATERIALIZED (
  SELECT
    r.rk, x.file_id, x.event_idx,
    coalesce(TRY_CAST(json_extract(x.args, '$.wait_on_stream') AS BIGINT), -1) AS wait_on_stream,
    coalesce(TRY_CAST(json_extract(x.args, '$.wait_on_cuda_event_record_corr_id') AS BIGINT), -1) AS wait_on_corr
  FROM (SELECT trace, rank, file_id, event_idx, args FROM events WHERE cat = 'cuda_sync') AS x
  JOIN ranks AS r ON r.trace = x.trace AND r.rank = x.rank
),
sync_rows AS MATERIALIZED (
  SELECT
    y.rk, y.event_idx, y.row_order, y.name, y.stream, y.ts_us, y.end_us, y.partner_idx, y.pid,
    coalesce(x.wait_on_stream, -1) AS wait_on_stream,
    coalesce(x.wait_on_corr, -1) AS wait_on_corr
  FROM (
    SELECT * FROM gpu_in WHERE cat = 'cuda_sync'
    UNION ALL
    SELECT * FROM cpu_in WHERE cat = 'cuda_sync' AND name IN ('Event Sync', 'Context Sync')
  ) AS y
  LEFT JOIN sync_args AS x ON (x.rk, x.file_id, x.event_idx) = (y.rk, y.file_id, y.event_idx)
  WHERE y.partner_idx >= 0
),
-- the whole rank's launch calls with their GPU row (stream, device), numbered in
-- time order (HTA's launch_id); read only for the sync rows below, so only on the
-- ranks that have any (every rank's 1 M launches numbered took 0.7 s of the report's
-- critical path on 8 ranks of 250 MB, which have none)
launch_calls AS MATERIALIZED (
  SELECT
    l.rk, l.event_idx, l.pid, l.tid, l.ts_us, g.event_idx AS kernel_idx, g.stream AS k_stream, g.pid AS k_gpu,
    row_number() OVER (PARTITION BY l.rk ORDER BY l.ts_us, l.row_order) AS launch_id
  FROM ev AS l
  JOIN ev AS g ON (g.rk, g.event_idx) = (l.rk, l.partner_idx) AND g.stream <> -1 AND g.partner_idx > 0
  WHERE l.is_launch AND l.rk IN (SELECT rk FROM ev WHERE is_sync)
),
-- each cudaEventRecord a sync waits on (wait_on_cuda_event_record_corr_id), on the
-- stream and device the sync names, and the kernel of the last launch to that
-- stream and device at or before it: the kernel the event marks
record_kernels AS (
  SELECT
    rec.rk, rec.correlation,
    (SELECT arg_max(c.kernel_idx, c.launch_id) FROM launch_calls AS c
     WHERE c.rk = rec.rk AND c.k_gpu = rs.gpu AND c.k_stream = rs.stream AND c.ts_us <= rec.ts_us) AS kernel_idx
  FROM ev AS rec
  JOIN (
    SELECT DISTINCT s.rk, s.wait_on_corr AS correlation, s.wait_on_stream AS stream, e.pid AS gpu
    FROM sync_args AS s
    JOIN ev AS e ON (e.rk, e.file_id, e.event_idx) = (s.rk, s.file_id, s.event_idx)
    WHERE s.wait_on_stream > -1
  ) AS rs ON (rs.rk, rs.correlation) = (rec.rk, rec.correlation)
  WHERE rec.is_event_record
),
-- a Stream Wait Event's destination: the first launch after its cudaStreamWaitEvent
-- call on the same CPU thread to the stream that waits; its kernel waits for the
-- recorded one
wait_targets AS (
  SELECT
    w.rk, w.event_idx,
    (SELECT arg_min(c.kernel_idx, c.launch_id) FROM launch_calls AS c
     WHERE c.rk = w.rk AND c.pid = call.pid AND c.tid = call.tid AND c.k_stream = w.stream AND c.ts_us > call.ts_us)
      AS dest_kernel_idx
  FROM sync_rows AS w
  JOIN ev AS call ON (call.rk, call.event_idx) = (w.rk, w.partner_idx) AND call.is_stream_wait
  WHERE w.name = 'Stream Wait Event'
),
-- HTA's loop order over kernels and sync rows: kernels by start, syncs by end
loop_order AS MATERIALIZED (
  SELECT rk, event_idx, false AS is_sync, ts_us AS sort_ts, row_order FROM kernels
  UNION ALL
  SELECT rk, event_idx, true, end_us, row_order FROM sync_rows
),
positions AS MATERIALIZED (
  SELECT rk, event_idx, is_sync, row_number() OVER (PARTITION BY rk ORDER BY sort_ts, row_order) AS pos
  FROM loop_order
),
kernel_pos AS MATERIALIZED (
  SELECT k.rk, k.event_idx, k.stream, k.end_us, p.pos
  FROM kernels AS k JOIN positions AS p ON (p.rk, p.event_idx) = (k.rk, k.event_idx) AND NOT p.is_sync
),
-- GPU -> GPU: the kernel a Stream Wait Event makes wait, and the recorded kernel
-- (set when the loop reaches the wait, taken when it reaches that kernel; a later
-- wait for the same kernel replaces it; the recorded kernel must be in the graph)
gpu_waits AS (
  SELECT rk, dest_kernel_idx, arg_max(src_kernel_idx, pos) AS src_kernel_idx
  FROM (
    SELECT w.rk, t.dest_kernel_idx, rk2.kernel_idx AS src_kernel_idx, p.pos
    FROM sync_rows AS w
    JOIN wait_targets AS t ON (t.rk, t.event_idx) = (w.rk, w.event_idx)
    JOIN record_kernels AS rk2 ON (rk2.rk, rk2.correlation) = (w.rk, w.wait_on_corr)
    JOIN positions AS p ON (p.rk, p.event_idx) = (w.rk, w.event_idx) AND p.is_sync
    JOIN kernel_pos AS dk ON (dk.rk, dk.event_idx) = (w.rk, t.dest_kernel_idx)
    WHERE w.wait_on_corr > -1 AND rk2.kernel_idx IS NOT NULL AND t.dest_kernel_idx IS NOT NULL AND p.pos < dk.pos
  )
  GROUP BY rk, dest_kernel_idx
),
kernel_waits AS (
  SELECT g.rk, g.dest_kernel_idx, g.src_kernel_idx, src.end_us AS src_end_us
  FROM gpu_waits AS g
  JOIN kernel_pos AS src ON (src.rk, src.event_idx) = (g.rk, g.src_kernel_idx)
),
-- GPU -> CPU: the end of a sync's runtime call waits for a kernel's end: Event Sync
-- for the recorded kernel; Stream Sync for the stream's last kernel before it in the
-- loop; Context Sync for every stream's (in the order the streams first appear)
cpu_waits AS (
  SELECT w.rk, p.pos, 0 AS sub, rk2.kernel_idx AS src_kernel_idx, w.partner_idx AS runtime_idx
  FROM sync_rows AS w
  JOIN record_kernels AS rk2 ON (rk2.rk, rk2.correlation) = (w.rk, w.wait_on_corr)
  JOIN positions AS p ON (p.rk, p.event_idx) = (w.rk, w.event_idx) AND p.is_sync
  WHERE w.name = 'Event Sync' AND w.wait_on_corr > -1 AND rk2.kernel_idx IS NOT NULL
  UNION ALL
  SELECT w.rk, p.pos, f.first_pos AS sub, arg_max(k.event_idx, k.pos) AS src_kernel_idx, w.partner_idx
  FROM sync_rows AS w
  JOIN positions AS p ON (p.rk, p.event_idx) = (w.rk, w.event_idx) AND p.is_sync
  JOIN kernel_pos AS k ON k.rk = w.rk AND k.pos < p.pos
    AND (w.name = 'Context Sync' OR (w.name = 'Stream Sync' AND k.stream = w.stream))
  JOIN (SELECT rk, stream, min(pos) AS first_pos FROM kernel_pos GROUP BY rk, stream) AS f
    ON (f.rk, f.stream) = (k.rk, k.stream)
  WHERE w.name IN ('Stream Sync', 'Context Sync')
  GROUP BY w.rk, p.pos, f.first_pos, k.stream, w.partner_idx
),
-- a launch edge needs the kernel it waits for (if any) to have ended before the
-- launch; otherwise a kernel-kernel edge from the stream's previous kernel, if that
-- one ended after the kernel waited for
kernel_links AS (
  SELECT
    k.*,
    p.pos,
    w.src_kernel_idx AS wait_idx,
    coalesce(k.queue_length_runtime = 1 AND k.queue_length_kernel = 0
             AND (k.prev_idx IS NULL OR k.prev_end_us < k.ts_runtime_us)
             AND (w.src_end_us IS NULL OR w.src_end_us < k.ts_runtime_us), false) AS is_launch,
    k.prev_idx IS NOT NULL AND (w.src_end_us IS NULL OR w.src_end_us < k.prev_end_us) AS follows_prev
  FROM kernels AS k
  JOIN kernel_pos AS p ON (p.rk, p.event_idx) = (k.rk, k.event_idx)
  LEFT JOIN kernel_waits AS w ON (w.rk, w.dest_kernel_idx) = (k.rk, k.event_idx)
),
gpu_edges AS (
  -- the kernel's span
  SELECT k.rk, k.pos AS part, 0 AS sub,
    s.node_id AS src_node, e.node_id AS dst_node,
    s.event_idx AS src_event_idx, s.is_end AS src_is_end, e.event_idx AS dst_event_idx, e.is_end AS dst_is_end,
    k.end_us - k.ts_us AS weight_us, 'operator' AS edge_type,
    CASE WHEN regexp_matches(k.name, '^nccl.*Kernel') THEN 'gpu_communication_bound' ELSE 'gpu_compute_bound' END AS bound_by,
    k.event_idx
  FROM kernel_links AS k
  JOIN nodes AS s ON (s.rk, s.event_idx) = (k.rk, k.event_idx) AND NOT s.is_end
  JOIN nodes AS e ON (e.rk, e.event_idx) = (k.rk, k.event_idx) AND e.is_end
  UNION ALL
  -- the kernel it waits for (a sync edge, weight 0)
  SELECT k.rk, k.pos, 1, src.node_id, dst.node_id, src.event_idx, src.is_end, dst.event_idx, dst.is_end,
    0.0, 'sync', '', NULL
  FROM kernel_links AS k
  JOIN nodes AS src ON (src.rk, src.event_idx) = (k.rk, k.wait_idx) AND src.is_end
  JOIN nodes AS dst ON (dst.rk, dst.event_idx) = (k.rk, k.event_idx) AND NOT dst.is_end
  UNION ALL
  -- its launch delay, or the gap after the stream's previous kernel
  SELECT k.rk, k.pos, 2,
    src.node_id, dst.node_id, src.event_idx, src.is_end, dst.event_idx, dst.is_end, dst.time_us - src.time_us,
    CASE WHEN k.is_launch THEN 'launch_delay' ELSE 'kernel_kernel_delay' END,
    CASE WHEN k.is_launch THEN 'gpu_kernel_launch_overhead' ELSE 'gpu_kernel_kernel_overhead' END,
    CASE WHEN k.is_launch THEN k.partner_idx ELSE k.prev_idx END
  FROM kernel_links AS k
  JOIN nodes AS dst ON (dst.rk, dst.event_idx) = (k.rk, k.event_idx) AND NOT dst.is_end
  -- one equality key for either source (an OR of two keys would join every node of the rank)
  JOIN nodes AS src ON (src.rk, src.event_idx) = (k.rk, CASE WHEN k.is_launch THEN k.partner_idx ELSE k.prev_idx END)
    AND src.is_end = NOT k.is_launch
  WHERE k.is_launch OR k.follows_prev
  UNION ALL
  -- a sync's runtime call ends after the kernels it waits for (sync edges, weight 0)
  SELECT w.rk, w.pos, w.sub, src.node_id, dst.node_id, src.event_idx, src.is_end, dst.event_idx, dst.is_end,
    0.0, 'sync', '', NULL
  FROM cpu_waits AS w
  JOIN nodes AS src ON (src.rk, src.event_idx) = (w.rk, w.src_kernel_idx) AND src.is_end
  JOIN nodes AS dst ON (dst.rk, dst.event_idx) = (w.rk, w.runtime_idx) AND dst.is_end
),
sync_events AS (
  SELECT rk, count(*) > 0 AS has_sync_events
  FROM ev
  WHERE is_sync
  GROUP BY rk
),
cpu_edge_counts AS (
  SELECT rk, sum(n_edges) AS n_cpu_edges FROM cpu_thread_edges GROUP BY rk
),
-- HTA's insertion order: the CPU edges thread by thread (numbered in cpu_edges), then
-- the GPU edges in kernel order (a sort of these few only: numbering every edge with
-- one window sorted all of them, 0.07 s of the edges' 0.45 s on the shared traces)
edges AS (
  SELECT * FROM cpu_edges
  UNION ALL BY NAME
  SELECT
    g.* EXCLUDE (part, sub),
    CAST(coalesce(c.n_cpu_edges, 0) + row_number() OVER (PARTITION BY g.rk ORDER BY g.part, g.sub) AS BIGINT) AS edge_no
  FROM gpu_edges AS g
  LEFT JOIN cpu_edge_counts AS c USING (rk)
)
SELECT
  r.trace,
  r.rank,
  e.edge_no,
  e.src_node,
  e.dst_node,
  e.weight_us,
  CASE WHEN e.weight_us <= -1 THEN 0.0 ELSE e.weight_us END AS path_weight_us,
  e.edge_type,
  e.bound_by,
  e.event_idx,
  coalesce(y.has_sync_events, false) AS has_sync_events,
  e.src_event_idx,
  e.src_is_end,
  e.dst_event_idx,
  e.dst_is_end,
  rk
-- each edge carries its nodes' rows from where it is built: joining `nodes` twice here,
-- on (rk, node_id) each, let DuckDB derive sn.rk = dn.rk and join the two first, every
-- node of a rank with every other (8e9 rows on MTIA's 90k nodes: issue 41)
FROM edges AS e
JOIN ranks AS r USING (rk)
LEFT JOIN sync_events AS y USING (rk);

-- HTA's critical path graph's edges (see the top of this file). The window's rows are
-- read once: the CPU side, the GPU side and the nodes are all built from them (three
-- reads of the plain view expanded hta_events again each, 18 times in all with those of
-- the nodes: 6.8 s of an ad-hoc count of the edges over ../shared/traces, now 2 s).
CREATE OR REPLACE VIEW hta_critical_path_edges AS
WITH window_rows AS MATERIALIZED (
  SELECT * FROM hta_critical_path_rows
)
SELECT * EXCLUDE (rk) FROM hta_critical_path_edges_of(hta_critical_path_events, window_rows);

-- The ranks that have a critical path window (a row whose name contains
-- "ProfilerStep"; HTA fails without one).
CREATE OR REPLACE VIEW hta_critical_path_windows AS
SELECT trace, rank, arg_min(ts_us, row_order) AS start_us, arg_min(end_us, row_order) AS end_us
FROM hta_events
WHERE contains(name, 'ProfilerStep')
GROUP BY trace, rank;
