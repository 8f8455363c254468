-- HTA 0.5.0's analyses beyond the four breakdowns, as building blocks over the
-- rows HTA analyses (hta_events): the queue length and memory bandwidth counters
-- (hta/analyzers/trace_counters.py), the CUDA kernel launch pairs
-- (cuda_kernel_analysis.cuda_kernel_launch_stats), the idle intervals between
-- kernels (breakdown_analysis._analyze_idle_time_for_stream) and the
-- name/duration aggregation with HTA's "others" bucketing
-- (breakdown_analysis._aggr_gpu_kernel_time). The hta_* metrics that summarise
-- them are in sql/metrics/hta_*; golden checks in tests/query/test_hta_analyses.py.
--
-- Ties in HTA's sorts. HTA sorts these series with pandas' default
-- (`sort_values(by="ts")`, numpy's unstable quicksort, a SIMD sort on recent
-- CPUs), so the order of rows with the same timestamp is not defined and its
-- summaries move with it (the reference: ../shared/reference/hta-semantics.md
-- 3.5). We use the order a stable sort of HTA's concatenation gives (launches
-- before kernel starts, counter increments before decrements) and, where the
-- order could matter, also give the other extreme (`*_low` columns): whatever
-- order HTA's sort picked, each of its order statistics and its mean lie
-- between the two (at a tied timestamp, putting every +1 first maximises each
-- running value, putting every -1 first minimises it).
-- requires: hta

-- The runtime calls HTA 0.5.0 counts as enqueueing work on a stream
-- (TraceSymbolTable.get_runtime_launch_events_query). cudaGraphLaunch is not one.
CREATE OR REPLACE MACRO hta_is_queue_launch(name) AS
name IN (
  'cudaLaunchKernel', 'cudaLaunchKernelExC', 'cuLaunchKernel', 'cudaMemcpyAsync', 'cudaMemsetAsync',
  'runFunction - job_prep_and_submit_for_execution', 'hipLaunchKernel', 'hipExtModuleLaunchKernel',
  'hipMemcpyAsync', 'hipMemsetAsync', 'hipMemcpyWithStream'
);

-- The change points of hta_queue_length, before its running sums: one row per
-- point (`part` 0 for a launch's +1, 1 for a GPU row's -1, then the tie keys).
-- A caller that needs the series of some ranks only (the report's figure: the
-- first rank of each trace) filters these and calls hta_queue_series on them:
-- DuckDB cannot push such a filter through the series' window functions.
CREATE OR REPLACE VIEW hta_queue_points AS
WITH ev AS MATERIALIZED (
  -- the name as the one test it is read for (every correlated row's name held, read
  -- twice: 0.53-0.64 -> 0.45-0.47 s for the points of the 1 GB rank)
  SELECT trace, rank, row_order, copies, hta_is_queue_launch(name) AS is_launch, stream, correlation, ts_us,
    partner_idx, pid, tid
  FROM hta_events
  WHERE correlation <> -1
),
launches AS (
  SELECT trace, rank, correlation, ts_us, row_order
  FROM ev
  WHERE is_launch AND partner_idx > 0
),
gpu AS (
  SELECT trace, rank, correlation, stream, pid, tid, ts_us, row_order, unnest(range(copies)) AS copy_no
  FROM ev
  WHERE stream <> -1
)
SELECT l.trace, l.rank, g.stream, g.pid, g.tid, l.ts_us, 1 AS delta, 0 AS part, l.row_order, g.row_order AS row_order2, g.copy_no
FROM launches AS l
JOIN gpu AS g USING (trace, rank, correlation)
UNION ALL
SELECT g.trace, g.rank, g.stream, g.pid, g.tid, g.ts_us, -1, 1, g.row_order, 0, g.copy_no
FROM gpu AS g
SEMI JOIN launches AS l USING (trace, rank, correlation);

-- hta_queue_length's columns from change points (`points`: rows of
-- hta_queue_points): the running sums per (trace, rank, stream).
CREATE OR REPLACE MACRO hta_queue_series(points) AS TABLE
-- (the windows partition by a number per (trace, rank, stream): see timeline_numbers)
WITH input AS MATERIALIZED (
  SELECT *, stream AS key FROM query_table(points)
),
numbers AS (
  SELECT * FROM timeline_numbers(input)
)
SELECT
  trace,
  rank,
  stream,
  pid,
  tid,
  ts_us,
  delta,
  row_number() OVER (
    PARTITION BY timeline ORDER BY ts_us, part, row_order, row_order2, copy_no
  ) AS seq,
  CAST(sum(delta) OVER (
    PARTITION BY timeline ORDER BY ts_us, part, row_order, row_order2, copy_no
    ROWS UNBOUNDED PRECEDING
  ) AS BIGINT) AS queue_length,
  CAST(sum(delta) OVER (
    PARTITION BY timeline ORDER BY ts_us, part DESC, row_order, row_order2, copy_no
    ROWS UNBOUNDED PRECEDING
  ) AS BIGINT) AS queue_length_low
FROM timeline_rows(input, numbers);

-- HTA's queue length time series (TraceCounters.get_queue_length_time_series),
-- every rank. Grain: one row per change point, as HTA returns it: +1 at the ts
-- of a launch call (hta_is_queue_launch, with a GPU partner: index_correlation
-- > 0) on the stream of its GPU row, -1 at the start of that GPU row; a running
-- sum per (rank, stream) in ts order.
--  * `queue_length`: ties ordered as HTA's concatenation (launches, then GPU
--    rows, each in HTA's row order) under a stable sort.
--  * `queue_length_low`: the value with GPU starts first at a tied ts; HTA's
--    own order (unstable) lies between the two (see the file header).
--  * `pid`, `tid`: of the GPU row (HTA takes them from the correlated kernel).
--  * `seq`: position in the stream's series (1-based), in the stable order.
-- HTA quirk kept: a GPU row HTA holds twice (hta_events.copies) counts twice,
-- on both sides.
-- batch: shared without pid, tid, delta
CREATE OR REPLACE VIEW hta_queue_length AS
SELECT * FROM hta_queue_series(hta_queue_points);

-- HTA's trace duration of a rank (Trace.get_trace_duration): last ts - first
-- ts over the rows it analyses (starts, not ends).
-- batch: shared
CREATE OR REPLACE VIEW hta_rank_duration AS
SELECT trace, rank, max(ts_us) - min(ts_us) AS duration_us
FROM hta_events
GROUP BY trace, rank;

-- HTA 0.5.0's memory-operation type of a MEMORY row's name
-- (utils.get_memory_kernel_type): "Memset", else the first 11 characters of a
-- "Memcpy ..." name ("Memcpy HtoD", "Memcpy DtoH", "Memcpy DtoD", ...), else
-- "Memcpy Unknown" (a MEMORY row named dma...).
CREATE OR REPLACE MACRO hta_memory_kind(name) AS
CASE
  WHEN left(name, 6) = 'Memset' THEN 'Memset'
  WHEN left(name, 6) <> 'Memcpy' THEN 'Memcpy Unknown'
  ELSE left(name, 11)
END;

-- HTA's memory bandwidth time series (TraceCounters.get_memory_bw_time_series),
-- every rank. Grain: one row per change point. HTA's MEMORY rows (stream <> -1,
-- 0.5.0 name classes) add Kineto's `memory bandwidth (GB/s)` arg at their start
-- and remove it at start + dur (HTA quirk: dur 0 is taken as 1 µs; a dur of -1
-- from HTA's rounding stays -1); `memory_bw_gbps` = the running sum per (rank,
-- memory kind) in ts order.
--  * ties: starts before ends, each in HTA's row order (HTA's concatenation
--    under a stable sort); `memory_bw_gbps_low` with ends first.
--  * the running sums are double sums in series order; HTA's residues (a
--    1e-16 GB/s where the exact value is 0, which its summary counts as a
--    point > 0) come out the same on every golden trace.
-- batch: shared
CREATE OR REPLACE VIEW hta_memory_bw AS
WITH mem AS (
  SELECT
    trace, rank, pid, row_order, ts_us,
    CASE WHEN dur_us = 0 THEN 1 ELSE dur_us END AS dur_us,
    hta_memory_kind(name) AS kind,
    memory_bw_gbps,
    unnest(range(copies)) AS copy_no
  FROM hta_events
  WHERE stream <> -1 AND kernel_type = 'MEMORY'
),
points AS (
  SELECT trace, rank, kind, pid, ts_us, memory_bw_gbps AS delta, 0 AS part, row_order, copy_no FROM mem
  UNION ALL
  SELECT trace, rank, kind, pid, ts_us + dur_us, -memory_bw_gbps, 1, row_order, copy_no FROM mem
)
SELECT
  trace,
  rank,
  kind AS name,
  pid,
  ts_us,
  delta,
  row_number() OVER (PARTITION BY trace, rank, kind ORDER BY ts_us, part, row_order, copy_no) AS seq,
  sum(delta) OVER (
    PARTITION BY trace, rank, kind ORDER BY ts_us, part, row_order, copy_no
    ROWS UNBOUNDED PRECEDING
  ) AS memory_bw_gbps,
  sum(delta) OVER (
    PARTITION BY trace, rank, kind ORDER BY ts_us, part DESC, row_order, copy_no
    ROWS UNBOUNDED PRECEDING
  ) AS memory_bw_gbps_low
FROM points;

-- HTA's CUDA kernel launch pairs (CudaKernelAnalysis.cuda_kernel_launch_stats),
-- every rank. Grain: one row per (runtime call, GPU row) pair of HTA's inner
-- merge on correlation: CPU rows (stream = -1) and GPU rows (stream <> -1)
-- whose correlation is one of a launch call's (cudaLaunchKernel,
-- cudaLaunchKernelExC, MTIA runFunction; `memory_launch`: cudaMemcpyAsync /
-- cudaMemsetAsync only, counted when include_memory_events). Not counted by
-- HTA 0.5.0: cuLaunchKernel, cudaGraphLaunch, hip* calls (so ROCm traces have
-- none).
--  * cpu_duration_us = the runtime call's dur, gpu_duration_us = the GPU row's,
--    launch_delay_us = max(0, gpu ts - cpu ts - cpu dur).
--  * `cpu_name` / `gpu_name` for the reader; HTA returns only the numbers.
-- batch: shared without cpu_name, gpu_name, correlation, stream, cpu_ts_us, cpu_row_order, gpu_row_order
--   a batch's readers (the launch statistics and the report's delay figure) read
--   only the durations and the delay: without the names 195 -> ~60 MB at 1 GB.
CREATE OR REPLACE VIEW hta_kernel_launches AS
WITH launch_correlations AS MATERIALIZED (
  SELECT
    trace, rank, correlation,
    bool_or(name IN ('cudaLaunchKernel', 'cudaLaunchKernelExC', 'runFunction - job_prep_and_submit_for_execution'))
      AS kernel_launch
  FROM hta_events
  WHERE name IN ('cudaLaunchKernel', 'cudaLaunchKernelExC', 'runFunction - job_prep_and_submit_for_execution',
                 'cudaMemcpyAsync', 'cudaMemsetAsync')
  GROUP BY ALL
),
-- only the rows of a launch's correlation, the two sides of the merge (every row HTA
-- analyses, held, took 0.9 GB of spill on 8 ranks of 250 MB)
ev AS MATERIALIZED (
  SELECT e.trace, e.rank, e.row_order, e.copies, e.name, e.stream, e.correlation, e.ts_us, e.dur_us, l.kernel_launch
  FROM hta_events AS e
  JOIN launch_correlations AS l USING (trace, rank, correlation)
),
cpu AS (
  SELECT * FROM ev WHERE stream = -1
),
gpu AS (
  SELECT *, unnest(range(copies)) AS copy_no FROM ev WHERE stream <> -1
)
SELECT
  c.trace,
  c.rank,
  c.correlation,
  c.name AS cpu_name,
  g.name AS gpu_name,
  g.stream,
  c.ts_us AS cpu_ts_us,
  c.dur_us AS cpu_duration_us,
  g.dur_us AS gpu_duration_us,
  greatest(g.ts_us - c.ts_us - c.dur_us, 0) AS launch_delay_us,
  NOT c.kernel_launch AS memory_launch,
  c.row_order AS cpu_row_order,
  g.row_order AS gpu_row_order
FROM cpu AS c
JOIN gpu AS g USING (trace, rank, correlation);

-- HTA's idle intervals between consecutive kernels of a stream
-- (get_idle_time_breakdown with show_idle_interval_stats, consecutive kernel
-- delay 30 µs), every rank: the rows the hta_idle_time_breakdown metric sums
-- (its rules, repeated here for the per-interval statistics). Grain: one row
-- per kernel HTA walks (kernel, memcpy, memset, MTIA ccp rows with a stream;
-- cuda_sync excluded); `idle_interval_us` = ts - end of the previous kernel in
-- ts order (NULL for the first: HTA's NaN), `idle_category` host_wait /
-- kernel_wait / other as in hta_idle_time_breakdown.
CREATE OR REPLACE VIEW hta_idle_intervals AS
WITH kernels AS (
  SELECT trace, rank, stream, ts_us, end_us, ts_runtime_us, row_order, unnest(range(copies)) AS copy_no
  FROM hta_gpu_rows
  WHERE cat IN ('kernel', 'Kernel', 'gpu_memset', 'Memset', 'gpu_memcpy', 'Memcpy', 'mtia_ccp_events')
),
gaps AS (
  SELECT
    *,
    lag(end_us) OVER (PARTITION BY trace, rank, stream ORDER BY ts_us, row_order, copy_no) AS prev_end_us
  FROM kernels
)
SELECT
  trace,
  rank,
  stream,
  ts_us,
  end_us,
  prev_end_us,
  ts_runtime_us,
  ts_us - prev_end_us AS idle_interval_us,
  -- NULL comparisons (first kernel, no runtime call) fall through to other,
  -- as NaN comparisons do in pandas
  CASE
    WHEN ts_runtime_us > prev_end_us THEN 'host_wait'
    WHEN ts_us - prev_end_us < 30 THEN 'kernel_wait'
    ELSE 'other'
  END AS idle_category
FROM gaps;

-- HTA's aggregation of durations by name with its "others" bucket
-- (breakdown_analysis._aggr_gpu_kernel_time), over `tbl` (trace, rank, key,
-- name, dur_us): per (trace, rank, key), the names' sum / max / min / mean /
-- sample std (0 for a single row) of dur, sorted by sum, largest first. When a
-- group has more than `num_kernels` names, a name goes to "others" when the
-- running total of the sorted sums passes the `duration_ratio` quantile of
-- those running totals (pandas' linear quantile; HTA quirk: a quantile of the
-- cumulative series, not that share of the time), or when it is the
-- num_kernels-th or later; HTA then re-aggregates only the per-name sums, so
-- (HTA quirk) a kept name's max = min = mean = its sum and std = 0, and the
-- "others" row's max / min / mean / std are statistics of the bucketed names'
-- sums. Ties in the sort by sum (pandas' unstable sort) are broken by name.
-- `names` = how many names a row stands for.
CREATE OR REPLACE MACRO hta_aggregate_by_name(tbl, num_kernels, duration_ratio) AS TABLE
WITH per_name AS (
  SELECT
    trace, rank, key, name,
    sum(dur_us) AS sum_us,
    max(dur_us) AS max_us,
    min(dur_us) AS min_us,
    avg(dur_us) AS mean_us,
    coalesce(stddev_samp(dur_us), 0) AS std_us
  FROM query_table(tbl)
  GROUP BY ALL
),
ranked AS (
  SELECT
    *,
    row_number() OVER w - 1 AS pos,
    sum(sum_us) OVER (w ROWS UNBOUNDED PRECEDING) AS cum_us,
    count(*) OVER (PARTITION BY trace, rank, key) AS n_names
  FROM per_name
  WINDOW w AS (PARTITION BY trace, rank, key ORDER BY sum_us DESC, name)
),
-- pandas' Series.quantile (linear): h = (n - 1) * ratio over the sorted values,
-- x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])
sorted_cum AS (
  SELECT
    trace, rank, key, cum_us,
    row_number() OVER (PARTITION BY trace, rank, key ORDER BY cum_us) - 1 AS i,
    (n_names - 1) * duration_ratio AS h
  FROM ranked
  WHERE n_names > num_kernels
),
cum_quantile AS (
  SELECT
    trace, rank, key,
    any_value(cum_us) FILTER (WHERE i = floor(h)) AS x_lo,
    coalesce(any_value(cum_us) FILTER (WHERE i = floor(h) + 1), any_value(cum_us) FILTER (WHERE i = floor(h))) AS x_hi,
    any_value(h - floor(h)) AS frac
  FROM sorted_cum
  GROUP BY ALL
),
cut AS (
  SELECT r.*, q.x_lo + q.frac * (q.x_hi - q.x_lo) AS cum_quantile
  FROM ranked AS r
  LEFT JOIN cum_quantile AS q USING (trace, rank, key)
),
bucketed AS (
  SELECT
    *,
    n_names > num_kernels AND (cum_us > cum_quantile OR pos >= num_kernels) AS to_others
  FROM cut
)
SELECT trace, rank, key, name, sum_us, max_us, min_us, mean_us, std_us, 1 AS names
FROM bucketed
WHERE n_names <= num_kernels
UNION ALL
SELECT
  trace, rank, key,
  CASE WHEN to_others THEN 'others' ELSE name END AS name,
  sum(sum_us), max(sum_us), min(sum_us), avg(sum_us), coalesce(stddev_samp(sum_us), 0), count(*)
FROM bucketed
WHERE n_names > num_kernels
GROUP BY ALL;

-- HTA's iteration of each row it analyses (trace.add_iteration, run when a
-- file is parsed: on the loaded rows with HTA's µs times, before the tail
-- filter). Grain: one row per hta_events row.
--  * A row with stream < 0 (CPU side) takes N from a ProfilerStep#N row (any
--    loaded row whose name starts with "ProfilerStep", CPU or GPU annotation)
--    with step ts <= ts < step ts + dur; HTA quirk: the last such step row in
--    file order wins. None: -1.
--  * A row with stream > 0 takes the iteration of its launching row
--    (index_correlation, hta_events.partner_idx); no launch (0): -1.
--  * HTA quirk: a row on stream 0 (ROCm) gets neither: NULL (pandas NaN).
-- The step of a CPU row: a join on (trace, rank) with the two times as residuals
-- compares every CPU row of a rank with every step row of it (2 M rows x 20 k steps
-- on a 1 GB rank, issue 42). So the step rows of a rank are first cut into islands
-- (in start order, a row that starts at or after the furthest end before it opens
-- one): islands do not overlap, each is covered without a gap from its first start
-- to its furthest end, and every step row holding a CPU row is in the island that
-- holds it. Where an island's step rows all carry one number (sequential steps, and
-- the two nested ProfilerStep#N rows Kineto writes per step), that number is the
-- answer for any row inside it, found by an ASOF join on the islands' starts; only
-- the rows of an island with several numbers take the plain join, with that
-- island's step rows. An empty step (end <= ts) holds no row and is left out.
CREATE OR REPLACE VIEW hta_iterations AS
WITH loaded AS MATERIALIZED (
  SELECT trace, rank, event_idx, name, stream, ts_us, end_us
  FROM hta_loaded
),
step_rows AS (
  SELECT
    trace, rank, event_idx AS step_idx, ts_us AS step_ts_us, end_us AS step_end_us,
    CAST(regexp_extract(name, 'ProfilerStep\s*#\s*(\d+)', 1) AS BIGINT) AS iteration,
    -- the furthest end of the step rows before it (one order, step_idx breaking ties)
    max(end_us) OVER (
      PARTITION BY trace, rank ORDER BY ts_us, end_us, event_idx ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS before_end_us
  FROM loaded
  WHERE starts_with(name, 'ProfilerStep') AND ts_us < end_us
),
in_islands AS MATERIALIZED (
  SELECT
    *,
    sum(CASE WHEN before_end_us IS NULL OR step_ts_us >= before_end_us THEN 1 ELSE 0 END) OVER (
      PARTITION BY trace, rank ORDER BY step_ts_us, step_end_us, step_idx ROWS UNBOUNDED PRECEDING
    ) AS island
  FROM step_rows
),
islands AS MATERIALIZED (
  SELECT
    trace, rank, island,
    min(step_ts_us) AS island_ts_us,
    max(step_end_us) AS island_end_us,
    -- one number (or none) for every step row of the island
    count(DISTINCT iteration) <= 1 AND count(iteration) IN (0, count(*)) AS one_number,
    max(iteration) AS iteration
  FROM in_islands
  GROUP BY trace, rank, island
),
-- the step rows of islands with several numbers, stored first: as a subquery its
-- filter was planned after the join, which met every step row again
mixed_steps AS MATERIALIZED (
  SELECT * FROM in_islands SEMI JOIN (SELECT * FROM islands WHERE NOT one_number) USING (trace, rank, island)
),
cpu_iteration AS (
  SELECT l.trace, l.rank, l.event_idx, i.iteration
  FROM loaded AS l
  ASOF JOIN (SELECT * FROM islands WHERE one_number) AS i
    ON l.trace = i.trace AND l.rank = i.rank AND i.island_ts_us <= l.ts_us
  WHERE l.stream < 0 AND l.ts_us < i.island_end_us
  UNION ALL
  SELECT l.trace, l.rank, l.event_idx, arg_max(s.iteration, s.step_idx) AS iteration
  FROM loaded AS l
  JOIN mixed_steps AS s
    ON l.trace = s.trace AND l.rank = s.rank AND s.step_ts_us <= l.ts_us AND l.ts_us < s.step_end_us
  WHERE l.stream < 0
  GROUP BY ALL
),
loaded_iteration AS (
  SELECT l.trace, l.rank, l.event_idx, l.stream,
    CASE WHEN l.stream < 0 THEN coalesce(c.iteration, -1) END AS iteration
  FROM loaded AS l
  LEFT JOIN cpu_iteration AS c USING (trace, rank, event_idx)
)
SELECT
  e.trace,
  e.rank,
  e.event_idx,
  CASE
    WHEN e.stream < 0 THEN own.iteration
    WHEN e.stream > 0 THEN CASE WHEN e.partner_idx > 0 THEN partner.iteration ELSE -1 END
  END AS iteration
FROM hta_events AS e
LEFT JOIN loaded_iteration AS own
  ON own.trace = e.trace AND own.rank = e.rank AND own.event_idx = e.event_idx
LEFT JOIN loaded_iteration AS partner
  ON partner.trace = e.trace AND partner.rank = e.rank AND partner.event_idx = e.partner_idx;

-- HTA's profiler steps (TraceAnalysis.get_profiler_steps: the sorted distinct
-- iterations of the rows it analyses, -1 and NULL left out), per trace. After
-- the tail filter the last step is gone, so it is not listed.
CREATE OR REPLACE VIEW hta_profiler_steps AS
SELECT DISTINCT trace, iteration AS profiler_step
FROM hta_iterations
WHERE iteration >= 0;

-- HTA's TraceDiff.compare_traces (trace_diff.py) between two ingested traces:
-- per name, how often it occurs and its total µs in the control and the test
-- selection, and the differences (test - control). A selection is one rank
-- (default: the trace's first) and one iteration (default: the trace's first
-- ProfilerStep number among the names it loaded, the last step included, as
-- LabeledTrace.iterations() reads them from the symbol table) of the rows HTA
-- analyses (hta_events with hta_iterations), `device` 'CPU' (stream = -1),
-- 'GPU' (stream <> -1) or 'ALL'. HTA sums per (category, name) and then per
-- name (use_short_name = False: full names); names absent on one side count 0
-- there. `counts_change_categories`: '+' more in test, '-' fewer, '=' same
-- (ops_diff's added / deleted / increased / decreased / unchanged follow from
-- the counts). A GPU row HTA holds twice counts twice.
CREATE OR REPLACE MACRO hta_trace_diff(
  control_trace, test_trace,
  control_rank := NULL, test_rank := NULL,
  control_iteration := NULL, test_iteration := NULL,
  device := 'ALL'
) AS TABLE
WITH sides AS (
  SELECT 'control' AS side, control_trace AS trace, control_rank AS rank_arg, control_iteration AS iteration_arg
  UNION ALL
  SELECT 'test', test_trace, test_rank, test_iteration
),
first_iteration AS (
  SELECT trace, min(TRY_CAST(replace(symbol, 'ProfilerStep#', '') AS BIGINT)) AS iteration
  FROM (SELECT trace, unnest([name, cat]) AS symbol FROM hta_loaded)
  WHERE starts_with(symbol, 'ProfilerStep')
  GROUP BY trace
),
selected AS (
  SELECT
    s.side,
    s.trace,
    coalesce(s.rank_arg, (SELECT min(rank) FROM hta_files AS f WHERE f.trace = s.trace)) AS rank,
    coalesce(s.iteration_arg, fi.iteration) AS iteration
  FROM sides AS s
  LEFT JOIN first_iteration AS fi USING (trace)
),
ops AS (
  SELECT s.side, e.name, e.dur_us, e.copies
  FROM selected AS s
  JOIN hta_events AS e ON e.trace = s.trace AND e.rank = s.rank
  JOIN hta_iterations AS i ON i.trace = e.trace AND i.rank = e.rank AND i.event_idx = e.event_idx
  WHERE i.iteration = s.iteration
    AND (device = 'ALL' OR (device = 'CPU' AND e.stream = -1) OR (device = 'GPU' AND e.stream <> -1))
),
per_name AS (
  SELECT
    name,
    coalesce(sum(copies) FILTER (WHERE side = 'control'), 0) AS control_counts,
    coalesce(sum(dur_us * copies) FILTER (WHERE side = 'control'), 0) AS control_total_duration,
    coalesce(sum(copies) FILTER (WHERE side = 'test'), 0) AS test_counts,
    coalesce(sum(dur_us * copies) FILTER (WHERE side = 'test'), 0) AS test_total_duration
  FROM ops
  GROUP BY name
)
SELECT
  *,
  test_counts - control_counts AS diff_counts,
  test_total_duration - control_total_duration AS diff_duration,
  CASE WHEN test_counts > control_counts THEN '+' WHEN test_counts < control_counts THEN '-' ELSE '=' END
    AS counts_change_categories
FROM per_name;

-- HTA's call stacks (CallGraph / CallStackGraph, hta/common/trace_call_*.py):
-- the nesting of the CPU rows (stream = -1) of each (rank, pid, tid) thread.
-- Grain: one row per CPU row HTA puts on a call stack.
--  * Threads: every (pid, tid) group of a rank's rows except those HTA takes
--    for a GPU (all rows on a stream > 0, or pid 0, or tid 0); a GPU annotation
--    track (pid = device, tid = stream) is a thread of its own.
--  * Nesting: HTA sorts the open and close ends of the rows by time and at a
--    tied time by its comparator (closes before opens, shorter closes first,
--    longer opens first, then by row index; zero-length rows inside the rows
--    opening at that time) and keeps a stack: a row's parent is the top of the
--    stack when it opens; `depth_local` = the stack size then (first layer 0).
--    Difference: HTA's comparator is not a total order when a zero-length row,
--    a close and an open share a time (its result then depends on Python's sort
--    internals); we put zero-length rows after the other rows opening at that
--    time. HTA raises an error ("Unexpected case") on rows of -1 µs (its
--    rounding of sub-µs events): such threads are built here all the same.
--  * `open_pos` / `close_pos`: the positions of the two ends in that order;
--    for properly nested rows the descendants of a row are the rows of its
--    thread opening between them.
--  * Backward thread: when a rank has exactly one thread with a
--    "ProfilerStep#" row ("main") and one other with an "autograd::" row
--    ("bwd"), HTA hangs each first-layer bwd row under the first "## backward
--    ##" row of main (else ProfilerStep# row), in main's row order, whose span
--    contains it (`anchor_idx`); its subtree's depths shift by the anchor's
--    depth + 1. `depth` is the final depth.
CREATE OR REPLACE VIEW hta_call_stack AS
WITH ev AS MATERIALIZED (
  SELECT trace, rank, event_idx, row_order, name, stream, pid, tid, ts_us, end_us, dur_us
  FROM hta_events
),
threads AS (
  SELECT trace, rank, pid, tid
  FROM ev
  GROUP BY ALL
  HAVING NOT (bool_and(stream > 0) OR bool_and(pid = '0') OR bool_and(tid = '0'))
),
cpu AS (
  SELECT e.*
  FROM ev AS e
  SEMI JOIN threads AS t USING (trace, rank, pid, tid)
  WHERE e.stream = -1
),
ends AS (
  -- the sort key: time, then a class (0 close, 1 open, 2 zero-length row), then
  -- within a class HTA's tie rules
  SELECT trace, rank, pid, tid, event_idx, 1 AS delta, ts_us AS time_us,
    CASE WHEN dur_us = 0 THEN 2 ELSE 1 END AS class, CASE WHEN dur_us = 0 THEN 0 ELSE -dur_us END AS k1, event_idx AS k2
  FROM cpu
  UNION ALL
  SELECT trace, rank, pid, tid, event_idx, -1, end_us,
    CASE WHEN dur_us = 0 THEN 2 ELSE 0 END, CASE WHEN dur_us = 0 THEN 1 ELSE dur_us END, -event_idx
  FROM cpu
),
ordered AS (
  SELECT
    *,
    row_number() OVER w AS pos,
    coalesce(sum(delta) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS open_before
  FROM ends
  WINDOW w AS (PARTITION BY trace, rank, pid, tid ORDER BY time_us, class, k1, k2)
),
nodes AS (
  SELECT
    o.trace, o.rank, o.pid, o.tid, o.event_idx,
    o.pos AS open_pos,
    c.pos AS close_pos,
    o.open_before AS depth_local
  FROM ordered AS o
  JOIN ordered AS c ON c.trace = o.trace AND c.rank = o.rank AND c.pid = o.pid AND c.tid = o.tid
    AND c.event_idx = o.event_idx AND c.delta = -1
  WHERE o.delta = 1
),
labelled AS (
  SELECT
    trace, rank, pid, tid,
    bool_or(starts_with(name, 'ProfilerStep#')) AS is_main,
    bool_or(contains(name, 'autograd::')) AS has_autograd
  FROM cpu
  GROUP BY ALL
),
pair AS (
  -- HTA links the stacks only when exactly one main and one bwd thread exist
  SELECT
    trace, rank,
    any_value(pid) FILTER (WHERE is_main) AS main_pid, any_value(tid) FILTER (WHERE is_main) AS main_tid,
    any_value(pid) FILTER (WHERE NOT is_main AND has_autograd) AS bwd_pid,
    any_value(tid) FILTER (WHERE NOT is_main AND has_autograd) AS bwd_tid
  FROM labelled
  GROUP BY ALL
  HAVING count(*) FILTER (WHERE is_main) = 1 AND count(*) FILTER (WHERE NOT is_main AND has_autograd) = 1
),
anchors AS (
  -- "## backward ##" rows of main, else its ProfilerStep# rows
  SELECT c.trace, c.rank, c.event_idx AS anchor_idx, c.row_order, c.ts_us, c.end_us, n.depth_local AS anchor_depth
  FROM cpu AS c
  JOIN pair AS p ON p.trace = c.trace AND p.rank = c.rank AND p.main_pid = c.pid AND p.main_tid = c.tid
  JOIN nodes AS n ON n.trace = c.trace AND n.rank = c.rank AND n.pid = c.pid AND n.tid = c.tid AND n.event_idx = c.event_idx
  WHERE starts_with(c.name, '## backward ##')
     OR (starts_with(c.name, 'ProfilerStep#') AND NOT EXISTS (
          SELECT 1 FROM cpu AS b
          WHERE b.trace = c.trace AND b.rank = c.rank AND b.pid = c.pid AND b.tid = c.tid
            AND starts_with(b.name, '## backward ##')))
),
bwd_first_layer AS (
  SELECT n.trace, n.rank, n.pid, n.tid, n.event_idx, n.open_pos, n.close_pos,
    arg_min(a.anchor_idx, a.row_order) AS anchor_idx,
    arg_min(a.anchor_depth, a.row_order) AS anchor_depth
  FROM nodes AS n
  JOIN pair AS p ON p.trace = n.trace AND p.rank = n.rank AND p.bwd_pid = n.pid AND p.bwd_tid = n.tid
  JOIN cpu AS c ON c.trace = n.trace AND c.rank = n.rank AND c.pid = n.pid AND c.tid = n.tid AND c.event_idx = n.event_idx
  JOIN anchors AS a ON a.trace = n.trace AND a.rank = n.rank AND c.ts_us >= a.ts_us AND c.end_us <= a.end_us
  WHERE n.depth_local = 0
  GROUP BY ALL
)
SELECT
  n.trace, n.rank, n.pid, n.tid, n.event_idx, n.open_pos, n.close_pos, n.depth_local,
  f.anchor_idx,
  n.depth_local + coalesce(f.anchor_depth + 1, 0) AS depth
FROM nodes AS n
LEFT JOIN bwd_first_layer AS f
  ON f.trace = n.trace AND f.rank = n.rank AND f.pid = n.pid AND f.tid = n.tid
  AND f.open_pos <= n.open_pos AND n.open_pos < f.close_pos;

-- The roots of HTA's get_frequent_cuda_kernel_sequences(operator_name,
-- min_pattern_len) (CudaKernelAnalysis, 0.5.0), every rank, one row per root
-- with its pattern, GPU and CPU time and `stack_idx`, the event indices of its
-- stack (what HTA's overlay marks): the CPU rows whose name contains
-- `operator_name` at the smallest call-stack depth among such rows (a row on
-- no call stack has depth -1, as in HTA), with at least `min_pattern_len`
-- GPU rows launched from their subtree; each gives a pattern = its name and
-- the names of those GPU rows (stream > 0, launched by a row of the subtree)
-- in ts order, joined with "|". Per pattern: `count`, the GPU time of its
-- kernels (`gpu_kernel_duration_us`) and the CPU time of the roots
-- (`cpu_op_duration_us`), sorted by count (largest first) then pattern, as
-- HTA's DataFrame (its top_k only limits the plot and the overlaid trace).
-- The subtree includes the backward-thread rows HTA hangs under a root (see
-- hta_call_stack).
CREATE OR REPLACE MACRO hta_frequent_cuda_kernel_sequence_roots(operator_name, min_pattern_len := 3) AS TABLE
WITH stack AS MATERIALIZED (
  SELECT * FROM hta_call_stack
),
candidates AS (
  SELECT e.trace, e.rank, e.event_idx, e.name, e.dur_us, coalesce(s.depth, -1) AS depth, s.pid, s.tid, s.open_pos, s.close_pos
  FROM hta_events AS e
  LEFT JOIN stack AS s USING (trace, rank, event_idx)
  WHERE e.stream = -1 AND contains(e.name, operator_name)
),
roots AS (
  SELECT *
  FROM candidates
  QUALIFY depth = min(depth) OVER (PARTITION BY trace, rank)
),
members AS (
  -- the root's subtree: rows of its thread opening inside it, and the
  -- backward-thread rows hung under one of those
  SELECT r.trace, r.rank, r.event_idx AS root_idx, s.event_idx
  FROM roots AS r
  JOIN stack AS s ON s.trace = r.trace AND s.rank = r.rank AND s.pid = r.pid AND s.tid = r.tid
    AND s.open_pos >= r.open_pos AND s.open_pos < r.close_pos
  UNION
  SELECT r.trace, r.rank, r.event_idx, b.event_idx
  FROM roots AS r
  JOIN stack AS a ON a.trace = r.trace AND a.rank = r.rank AND a.pid = r.pid AND a.tid = r.tid
    AND a.open_pos >= r.open_pos AND a.open_pos < r.close_pos
  JOIN stack AS b ON b.trace = r.trace AND b.rank = r.rank AND b.anchor_idx = a.event_idx
),
kernels AS (
  SELECT m.trace, m.rank, m.root_idx, g.event_idx, g.name, g.ts_us, g.row_order, g.dur_us
  FROM members AS m
  JOIN hta_events AS g ON g.trace = m.trace AND g.rank = m.rank AND g.partner_idx = m.event_idx
  WHERE g.stream > 0
),
per_root AS (
  SELECT
    r.trace, r.rank, r.event_idx, r.dur_us,
    r.name || coalesce(string_agg('|' || k.name, '' ORDER BY k.ts_us, k.row_order), '') AS pattern,
    count(k.name) AS n_kernels,
    coalesce(sum(k.dur_us), 0) AS kernel_dur_us
  FROM roots AS r
  LEFT JOIN kernels AS k ON k.trace = r.trace AND k.rank = r.rank AND k.root_idx = r.event_idx
  GROUP BY r.trace, r.rank, r.event_idx, r.dur_us, r.name
),
-- every row of a root's stack: its subtree's CPU rows and the GPU rows they launch
stack_rows AS (
  SELECT trace, rank, root_idx, list(DISTINCT event_idx ORDER BY event_idx) AS stack_idx
  FROM (
    SELECT trace, rank, root_idx, event_idx FROM members
    UNION ALL
    SELECT trace, rank, root_idx, event_idx FROM kernels
  )
  GROUP BY ALL
)
SELECT
  p.trace,
  p.rank,
  p.event_idx AS root_idx,
  p.pattern,
  p.kernel_dur_us,
  p.dur_us AS cpu_op_duration_us,
  s.stack_idx
FROM per_root AS p
JOIN stack_rows AS s ON s.trace = p.trace AND s.rank = p.rank AND s.root_idx = p.event_idx
WHERE p.n_kernels >= min_pattern_len;

-- HTA's get_frequent_cuda_kernel_sequences table (see
-- hta_frequent_cuda_kernel_sequence_roots): per pattern, how often it occurs and
-- the GPU and CPU time it takes.
CREATE OR REPLACE MACRO hta_frequent_cuda_kernel_sequences(operator_name, min_pattern_len := 3) AS TABLE
SELECT
  trace,
  rank,
  pattern,
  count(*) AS count,
  sum(kernel_dur_us) AS gpu_kernel_duration_us,
  sum(cpu_op_duration_us) AS cpu_op_duration_us
FROM hta_frequent_cuda_kernel_sequence_roots(operator_name, min_pattern_len := min_pattern_len)
GROUP BY trace, rank, pattern
ORDER BY trace, rank, count DESC, pattern;
