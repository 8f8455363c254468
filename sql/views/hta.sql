-- Holistic Trace Analysis (HTA 0.5.0) compatibility layer: the rows HTA's
-- TraceAnalysis keeps after loading a trace, with HTA's time values, kernel
-- classes and CPU<->GPU links, so that the `hta_*` metrics reproduce HTA's
-- numbers to the microsecond. Everything HTA-specific (its quirks included)
-- lives here, once; the metrics only aggregate. Each reproduced quirk is marked
-- "HTA quirk". Reference: ../shared/reference/hta-semantics.md §1-3.
--
-- Scope of the emulation (documented limits):
--  * HTA takes one file per rank; a (trace, rank) here is one ingested file
--    (ingest refuses a second file for a taken (trace, rank)).
--  * HTA orders ties with pandas' unstable quicksort; where a tie could change a
--    result we use the order a stable sort of HTA's row order gives (see
--    `row_order`), which reproduced every golden value we have.
--  * Events without `ts` (which HTA would keep with ts = NaN) are not in the
--    warehouse; their presence still switches on HTA's rounding (see below).
--
-- How the pipeline is built (for speed and memory):
--   hta_raw          events + each file's base time, per-event HTA attributes
--                    (a plain view: DuckDB reads only the columns a user needs)
--   scan             (in each view) the raw rows HTA loads, plus the rows that
--                    only matter for the file clock, with just the columns that
--                    view needs, MATERIALIZED: the one read of the Parquet files
--                    (hta_events reads them again instead on large data: see there)
--   hta_clock(scan)  per file: does HTA round to whole µs
--   hta_load(scan, clock)      the loaded rows with HTA's µs times
--   hta_analyse(loaded)        HTA's tail filter, copies, row order and links
-- The views hta_loaded, hta_events, hta_gpu_rows and hta_rank_facts wire these
-- up; internally files are keyed by small integers (`hta_files`) rather than by
-- their trace/rank/file_id strings.
-- requires: intervals

-- One row per ingested file: its base time and two integer keys used inside the
-- pipeline (`file_no` stands for (trace, rank) and file_id, which are 1:1;
-- `trace_no` for trace). Tiny (one row per file): the build side of every join
-- that attaches per-file facts to events. `rank` has the type of the events'
-- rank (the hive partition, INTEGER; `files.rank` may be BIGINT).
CREATE OR REPLACE VIEW hta_files AS
SELECT
  file_id,
  trace,
  CAST(rank AS INTEGER) AS rank,
  coalesce(base_time_ns, 0) AS base_time_ns,
  CAST(row_number() OVER (ORDER BY file_id) AS INTEGER) AS file_no,
  CAST(dense_rank() OVER (ORDER BY trace) AS INTEGER) AS trace_no
FROM files
WHERE format <> 'nsys';  -- HTA reads Kineto JSON; an nsys file may hold several ranks

-- HTA 0.5.0's kernel class of a GPU row name (hta/utils/utils.py; Python
-- re.match, i.e. anchored at the start), tested in this order:
--   COMMUNICATION  ^nccl.*Kernel
--   MEMORY         (^Memcpy)|(^Memset)|(^dma)
--   COMPUTATION    NOT (^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)
--                  -- by precedence: starts nccl..Kernel, contains Memcpy,
--                  -- starts Memset, or contains Sync
--   OTHER          the rest (Event/Stream/Context Sync).
-- HTA quirk: `Stream Wait Event` does not contain "Sync", so it is COMPUTATION.
-- The regular expressions run only where a plain string test cannot decide (a WHEN
-- is tested on the rows no earlier WHEN took, and AND's right side on the rows its
-- left side passes): every GPU row's name scanned by `.*Memcpy|.*Sync` took 1.0 s of
-- the 1 M GPU rows of 8 ranks of 250 MB (names of ~230 characters), the string
-- tests 0.1 s. A name without "Memcpy" and "Sync" that is neither of the first two
-- classes cannot match the third pattern (its other alternatives are theirs).
CREATE OR REPLACE MACRO hta_kernel_type(kernel_name) AS
CASE
  WHEN starts_with(kernel_name, 'nccl') AND regexp_matches(kernel_name, '^nccl.*Kernel') THEN 'COMMUNICATION'
  WHEN starts_with(kernel_name, 'Memcpy') OR starts_with(kernel_name, 'Memset') OR starts_with(kernel_name, 'dma')
    THEN 'MEMORY'
  WHEN NOT (contains(kernel_name, 'Memcpy') OR contains(kernel_name, 'Sync')) THEN 'COMPUTATION'
  WHEN NOT regexp_matches(kernel_name, '^(nccl.*Kernel|.*Memcpy|Memset|.*Sync)') THEN 'COMPUTATION'
  ELSE 'OTHER'
END;

-- The events of an ingested file that HTA's load can see: every row HTA
-- loads (`is_loaded`) plus the rows whose only role is to switch on the
-- rounding of their file (a ts that is not a whole µs of the file's clock, see
-- hta_clock). Grain: one row per such event. A plain view: each user selects
-- what it needs, so the Parquet reader decodes only those columns, and the
-- per-row attributes below are computed after the filter.
--  * `rel_ns`: HTA reads the file's own `ts` values (it ignores
--    baseTimeNanoseconds), so the file value is ts_ns - base_time_ns.
--  * `is_loaded`: HTA's load filter: drop rows with no `dur` or no `cat`, drop
--    cat "Trace" (this drops metadata, flows, instants, counters). Chrome B/E
--    pairs carry no `dur` in the file, so HTA drops them too (ingest merged
--    them into `B`).
--  * `cat` is the category as written (legacy `Kernel`/`Memcpy`/... included).
--  * `stream` / `correlation`: HTA's defaults -1 when absent; a stream that is
--    not an integer ("0x0" on ROCm runtime rows) is -1 too (ingest leaves NULL).
--    HTA quirk: `device` is not read; streams are keyed by their number alone
--    (one GPU per rank file is assumed), and a stream of 4294967295 (Kineto's
--    Context Sync) is a GPU row like any other.
--  * `is_gpu_side`: HTA's GPUKernelFilter: stream >= 0 and correlation >= 0,
--    or the name is `Event Sync` / `Context Sync` (device-wide syncs). Every
--    other row is "CPU" for HTA's linking and filtering. (NULL for a nameless
--    row that fails the stream test: such a row is on neither side, as in HTA's
--    pandas masks, and HTA's filter drops it.)
--  * `kernel_type`: HTA 0.5.0 class of the rows with stream <> -1 (HTA's "GPU
--    rows": kernels, memcpys, memsets, cuda_sync events (they carry a stream),
--    MTIA ccp events), NULL for the other rows.
--  * `step_name` / `step_cat`: the name / category when it contains
--    "ProfilerStep" (the symbols HTA's tail filter counts), else NULL.
CREATE OR REPLACE VIEW hta_raw AS
WITH typed AS (
  SELECT
    e.trace,
    e.rank,
    e.file_id,
    f.file_no,
    f.trace_no,
    e.event_idx,
    coalesce(e.cat_raw, e.cat) AS cat,
    e.name,
    coalesce(e.stream, -1) AS stream,
    coalesce(e.correlation, -1) AS correlation,
    e.ts_ns - f.base_time_ns AS rel_ns,
    e.dur_ns,
    -- carried for the analyses in hta_analyses.sql (queue length, memory bandwidth, call stacks)
    e.pid,
    e.tid,
    coalesce(e.memory_bw_gbps, 0.0) AS memory_bw_gbps,
    coalesce(
      e.dur_ns IS NOT NULL AND e.ph IS DISTINCT FROM 'B' AND e.cat IS NOT NULL AND coalesce(e.cat_raw, e.cat) <> 'Trace',
      false
    ) AS is_loaded
  FROM events AS e
  JOIN hta_files AS f USING (file_id)
),
seen AS (
  SELECT * FROM typed WHERE is_loaded OR rel_ns % 1000 <> 0
)
SELECT
  *,
  (stream >= 0 AND correlation >= 0) OR name IN ('Event Sync', 'Context Sync') AS is_gpu_side,
  CASE WHEN stream <> -1 THEN hta_kernel_type(name) END AS kernel_type,
  CASE WHEN contains(name, 'ProfilerStep') THEN name END AS step_name,
  CASE WHEN contains(cat, 'ProfilerStep') THEN cat END AS step_cat
FROM seen;

-- How HTA sees each file's clock, from a relation of raw rows (file_no, rel_ns)
-- that holds at least every row whose ts is not a whole µs of the file's clock
-- (hta_raw, or the rows a view materialized from it).
-- HTA quirk: pandas makes the `ts` column float64 as soon as one event has a
-- fractional ts or lacks ts; only then does HTA round to whole microseconds
-- (ceil ts, floor end; trace_parser.round_down_time_stamps).
CREATE OR REPLACE MACRO hta_clock(raw_rows) AS TABLE
SELECT
  f.file_no,
  coalesce(fr.any_fractional_ts, false) OR coalesce(nt.ts_missing, false) AS rounds_to_us
FROM hta_files AS f
LEFT JOIN (
  SELECT file_no, bool_or(rel_ns % 1000 <> 0) AS any_fractional_ts
  FROM query_table(raw_rows)
  GROUP BY file_no
) AS fr USING (file_no)
LEFT JOIN (
  SELECT file_id, sum("count") > 0 AS ts_missing
  FROM ingest_stats
  WHERE stat = 'no ts'
  GROUP BY file_id
) AS nt USING (file_id);

-- The value a float64 `ts` column holds for a file value of rel_ns ns: the
-- double nearest to the exact decimal rel_ns / 1000 (json's correctly rounded
-- parse). A double division of int64 ns would round twice at epoch magnitudes,
-- so (clever, hence this proof):
--  * |rel_ns| <= 2^53: rel_ns is exact as a double and one IEEE division is
--    correctly rounded.
--  * 2^53 < |rel_ns| < 1000 * 2^53: q = |rel_ns| // 1000 is an exact double
--    (>= 2^43, < 2^53) and r = |rel_ns| % 1000; q + r / 1000.0 is correctly
--    rounded. The sum's ulp u is >= 2^-9 and q is a multiple of it, so only
--    r / 1000 matters; a rounding midpoint (2k+1) u / 2 lies at least
--    1 / (1000 * 2^10) from r / 1000 unless r / 1000 is that (dyadic, hence
--    exact) midpoint, while fl(r / 1000) is within 2^-54 of it: both round alike.
--  * beyond (years after 2255 in epoch ns) the decimal text is parsed, exact.
CREATE OR REPLACE MACRO hta_us_f64(rel_ns) AS
CASE
  WHEN abs(rel_ns) <= 9007199254740992 THEN CAST(rel_ns AS DOUBLE) / 1000.0::DOUBLE
  WHEN abs(rel_ns) < 9007199254740992000 THEN
    sign(rel_ns) * (CAST(abs(rel_ns) // 1000 AS DOUBLE) + CAST(abs(rel_ns) % 1000 AS DOUBLE) / 1000.0::DOUBLE)
  ELSE CAST(
    (CASE WHEN rel_ns < 0 THEN '-' ELSE '' END)
    || printf('%d.%03d', abs(rel_ns) // 1000, abs(rel_ns) % 1000) AS DOUBLE
  )
END;

-- The loaded rows of `scan` (raw rows with is_loaded, file_no, rel_ns, dur_ns)
-- with HTA's times in µs; `clock` is hta_clock(scan). Every other column of
-- `scan` is passed through.
--  * When the file's ts column is float64, HTA applies ceil(ts) and
--    floor(ts + dur) to the float64 values json parsed (hta_us_f64); dur_ns <
--    2^53 so dur_ns / 1000.0 is already correctly rounded. Then the addition
--    happens in double, as in pandas. HTA quirk: a sub-µs event can end up
--    with dur = -1.
--  * Files with integer ts keep exact values (end may be fractional if a dur
--    is): rel_ns // 1000 is exact, and so is its double; int64 ts + float64
--    dur is a double addition in pandas too.
CREATE OR REPLACE MACRO hta_load(scan, clock) AS TABLE
SELECT
  s.* EXCLUDE (is_loaded, rel_ns, dur_ns),
  CASE WHEN c.rounds_to_us THEN ceil(hta_us_f64(s.rel_ns)) ELSE CAST(s.rel_ns // 1000 AS DOUBLE) END AS ts_us,
  CASE
    WHEN c.rounds_to_us THEN floor(hta_us_f64(s.rel_ns) + s.dur_ns / 1000.0)
    ELSE CAST(s.rel_ns // 1000 AS DOUBLE) + s.dur_ns / 1000.0
  END AS end_us
FROM query_table(scan) AS s
JOIN query_table(clock) AS c USING (file_no)
WHERE s.is_loaded;

-- The rows HTA analyses, from `loaded` (hta_load's rows with at least file_no,
-- trace_no, event_idx, stream, correlation, ts_us, is_gpu_side, step_name,
-- step_cat; other columns are passed through). Grain: one row per kept event;
-- `copies` says how many times HTA holds it.
--  * Tail filter (trace._filter_irrelevant_gpu_kernels). With the DuckDB
--    variable hta_include_last_profiler_step true (TraceAnalysis(...,
--    include_last_profiler_step=True)) HTA keeps the CPU rows with ts <= the
--    last end of a ProfilerStep row instead; HTA quirk: it compares the aligned
--    ts with that end as parsed (unaligned), so every CPU row of a trace whose
--    clock does not start near 0 is kept. HTA quirk: it counts
--    the symbols that merely contain "ProfilerStep" in the symbol table shared
--    by all ranks (names and categories); with at most one, HTA analyses the
--    whole trace (`filtered` false). Otherwise, per rank, CPU-side rows are
--    kept when they start before the start of the last ProfilerStep row on the
--    CPU side, and GPU-side rows when their correlation matches a kept CPU-side
--    row, even if they run later. The warm-up before the first step is kept,
--    the last step is dropped. HTA quirk: a rank with no ProfilerStep row of
--    its own keeps nothing.
--  * HTA quirk: the GPU side is an inner merge with the kept CPU rows'
--    correlation column, so a GPU row is held once per matching CPU row
--    (`copies`); unions do not see copies, the idle-time breakdown walks each.
--  * `row_order`: the position in HTA's frame (after the filter, the kept GPU
--    side comes first, then the CPU side, each in file order); ties in HTA's
--    sorts are broken by it, as a stable sort would.
--  * `partner_idx`: HTA's `index_correlation` (transform_correlation_to_index,
--    computed on the loaded rows before the filter): among the rows of the other
--    side with the same correlation (correlation <> -1), the last one in file
--    order (pandas assigns once per merged pair; the last assignment wins).
--    HTA quirk: a row with correlation >= 0 and no partner gets 0, and later
--    joins raw event #0 as if it were its launch; -1 joins nothing.
--  * `ts_runtime_us`: ts of the row `partner_idx` points at, if HTA kept it.
-- One aggregate per (file, correlation) serves both the filter (how many CPU
-- rows with that correlation are kept) and the links (the last row of each
-- side and its ts), so each row needs one lookup and no index of all analysed
-- rows is built: a CPU partner is kept when it starts before the last step; the
-- GPU partner of a kept CPU row has that row's correlation, so the filter kept
-- it too.
CREATE OR REPLACE MACRO hta_analyse(loaded) AS TABLE
WITH
-- the rows naming a ProfilerStep, held (a few per step): both uses below read them,
-- where each reading `loaded` scanned every name of the events again
step_rows AS MATERIALIZED (
  SELECT trace_no, file_no, step_name, step_cat, is_gpu_side, ts_us, end_us
  FROM query_table(loaded)
  WHERE step_name IS NOT NULL OR step_cat IS NOT NULL
),
step_symbols AS (
  SELECT trace_no, count(DISTINCT symbol) >= 2 AS filtered
  FROM (
    SELECT trace_no, unnest([step_name, step_cat]) AS symbol
    FROM step_rows
  )
  GROUP BY trace_no
),
last_step_start AS (
  SELECT file_no, max(ts_us) AS last_start_us, max(end_us) AS last_end_us
  FROM step_rows
  WHERE NOT is_gpu_side AND step_name IS NOT NULL
  GROUP BY file_no
),
-- the trace's time origin (HTA aligns ts to it before its filter; see file_window)
origin AS (
  SELECT trace_no, min(ts_us) AS origin_us
  FROM query_table(loaded)
  GROUP BY trace_no
),
-- each file's window as lists indexed by file_no (1, 2, ... in hta_files), read by
-- every row without a join, as event_zero below: a join of the rows with these few
-- was planned, when the estimates went wrong, with the rows as its hash table, every
-- one under the same key (the launch statistics on the 1 GB rank: 7.3 s to probe
-- 2.5 M rows with one)
file_window AS (
  SELECT
    list(coalesce(s.filtered, false) ORDER BY f.file_no) AS filtered,
    list(l.last_start_us ORDER BY f.file_no) AS last_start_us,
    -- HTA compares the aligned ts with the step's end as parsed (not aligned)
    list(l.last_end_us + o.origin_us ORDER BY f.file_no) AS last_end_us,
    coalesce(getvariable('hta_include_last_profiler_step'), false) AS include_last
  FROM hta_files AS f
  LEFT JOIN origin AS o USING (trace_no)
  LEFT JOIN step_symbols AS s USING (trace_no)
  LEFT JOIN last_step_start AS l USING (file_no)
),
-- (NOT MATERIALIZED here and below: DuckDB would otherwise store a copy of the
-- rows of each CTE used twice; re-deriving them from the view's one
-- materialized scan is cheaper, and lets a caller's filter reach the scan)
windowed AS NOT MATERIALIZED (
  SELECT
    l.*,
    w.filtered[l.file_no] AS filtered,
    w.last_start_us[l.file_no] AS last_start_us,
    w.last_end_us[l.file_no] AS last_end_us,
    w.include_last
  FROM query_table(loaded) AS l
  CROSS JOIN file_window AS w
),
flagged AS NOT MATERIALIZED (
  SELECT
    *,
    NOT is_gpu_side AND (
      NOT filtered
      OR CASE WHEN include_last THEN coalesce(ts_us <= last_end_us, false)
              ELSE coalesce(ts_us < last_start_us, false) END
    ) AS cpu_kept
  FROM windowed
),
-- (a row on neither side, is_gpu_side NULL, counts on neither side)
by_correlation AS MATERIALIZED (
  SELECT
    file_no,
    correlation,
    count(*) FILTER (WHERE cpu_kept) AS n_kept_cpu,
    max(event_idx) FILTER (WHERE NOT is_gpu_side) AS cpu_last_idx,
    arg_max(ts_us, event_idx) FILTER (WHERE NOT is_gpu_side) AS cpu_last_ts_us,
    max(event_idx) FILTER (WHERE is_gpu_side) AS gpu_last_idx,
    arg_max(ts_us, event_idx) FILTER (WHERE is_gpu_side) AS gpu_last_ts_us
  FROM flagged
  GROUP BY file_no, correlation
),
analysed AS NOT MATERIALIZED (
  SELECT
    f.* EXCLUDE (cpu_kept),
    CASE WHEN f.is_gpu_side AND f.filtered THEN c.n_kept_cpu ELSE 1 END AS copies,
    CASE WHEN NOT f.is_gpu_side AND f.filtered THEN f.event_idx + (1::BIGINT << 40) ELSE f.event_idx END AS row_order,
    CASE WHEN f.is_gpu_side THEN c.cpu_last_idx ELSE c.gpu_last_idx END AS partner_last_idx,
    CASE
      -- a GPU row's partner: the CPU row, kept if it starts before the last step
      WHEN f.is_gpu_side THEN
        CASE
          WHEN NOT f.filtered THEN c.cpu_last_ts_us
          WHEN f.include_last THEN CASE WHEN c.cpu_last_ts_us <= f.last_end_us THEN c.cpu_last_ts_us END
          WHEN c.cpu_last_ts_us < f.last_start_us THEN c.cpu_last_ts_us
        END
      -- a kept CPU row's partner: a GPU row of the same correlation, kept with it
      ELSE c.gpu_last_ts_us
    END AS partner_ts_us
  FROM flagged AS f
  LEFT JOIN by_correlation AS c USING (file_no, correlation)
  WHERE (f.is_gpu_side AND (NOT f.filtered OR c.n_kept_cpu > 0))
    OR f.cpu_kept
),
-- ts of each file's raw event #0 if HTA kept it, as one list indexed by file_no
-- (1, 2, ... in hta_files): a join of every row with these few would be planned
-- with the rows as its hash table (the CTEs' row estimates are unknown), 0.8 s of
-- hta_events over 3.66 M events
event_zero AS (
  SELECT list(z.ts_us ORDER BY f.file_no) AS ts_by_file
  FROM hta_files AS f
  LEFT JOIN (SELECT file_no, ts_us FROM analysed WHERE event_idx = 0) AS z USING (file_no)
)
SELECT
  a.* EXCLUDE (filtered, last_start_us, last_end_us, include_last, partner_last_idx, partner_ts_us),
  CASE WHEN a.correlation <> -1 THEN coalesce(a.partner_last_idx, least(a.correlation, 0)) ELSE -1 END AS partner_idx,
  CASE
    WHEN a.correlation = -1 THEN NULL
    WHEN a.partner_last_idx IS NOT NULL THEN a.partner_ts_us
    -- no partner: index 0, raw event #0 (if HTA kept it)
    WHEN a.correlation >= 0 THEN z.ts_by_file[a.file_no]
  END AS ts_runtime_us
FROM analysed AS a
CROSS JOIN event_zero AS z;

-- Every row HTA keeps when it parses a file, before its ProfilerStep filter,
-- with HTA's times in µs (see hta_raw and hta_load). Grain: one row per kept
-- trace event.
CREATE OR REPLACE VIEW hta_loaded AS
WITH scan AS MATERIALIZED (
  SELECT trace, rank, file_id, file_no, event_idx, cat, name, stream, correlation, is_gpu_side, is_loaded, rel_ns, dur_ns
  FROM hta_raw
),
clock AS MATERIALIZED (
  SELECT * FROM hta_clock(scan)
)
SELECT trace, rank, file_id, event_idx, cat, name, stream, correlation, ts_us, end_us, is_gpu_side
FROM hta_load(scan, clock);

-- Per file, its base time and whether HTA rounds its times to whole µs.
CREATE OR REPLACE VIEW hta_file_clock AS
SELECT f.file_id, f.trace, f.rank, h.base_time_ns, c.rounds_to_us
FROM files AS f
JOIN hta_files AS h USING (file_id)
JOIN hta_clock(hta_raw) AS c USING (file_no);

-- The rows HTA analyses: what its TraceAnalysis holds after load_traces(), with
-- names, categories and links (see hta_analyse). Grain: one row per kept event.
-- `scan` is held (MATERIALIZED: one read of the Parquet files) while the DuckDB
-- variable hta_hold_scan is true or unset; false, each step of hta_analyse reads
-- the files again (7 reads, most of a few columns). cclq.query.settings sets it
-- false once a session's events would take more than a quarter of its memory
-- limit held (17 columns, ~160 bytes an event): the 7.4 M events of 8 ranks of
-- 250 MB held took 1.2 GB and spilled to disk under the default limit (15.6 s;
-- read again 8.9-10.3 s), the 1 GB rank 4.1-6.8 s at 1.34 GB peak (read again
-- 4.6-5.4 s at 0.89 GB); small traces are faster held (the shared traces 0.9-1.2 s
-- against 1.3-2.1 s, 320 small files 1.6-3.5 s against 2.6-3.6 s).
-- batch: shared
CREATE OR REPLACE VIEW hta_events AS
WITH raw AS NOT MATERIALIZED (
  SELECT
    file_no, trace_no, event_idx, cat, name, stream, correlation, is_gpu_side, kernel_type, step_name, step_cat,
    pid, tid, memory_bw_gbps, is_loaded, rel_ns, dur_ns
  FROM hta_raw
),
-- the variable is a constant when DuckDB plans the query: one branch is left
held AS MATERIALIZED (
  SELECT * FROM raw WHERE coalesce(getvariable('hta_hold_scan'), true)
),
scan AS NOT MATERIALIZED (
  SELECT * FROM held
  UNION ALL
  SELECT * FROM raw WHERE NOT coalesce(getvariable('hta_hold_scan'), true)
),
clock AS MATERIALIZED (
  SELECT * FROM hta_clock(scan)
),
loaded AS NOT MATERIALIZED (
  SELECT * FROM hta_load(scan, clock)
)
SELECT
  f.trace,
  f.rank,
  f.file_id,
  a.event_idx,
  a.row_order,
  a.copies,
  a.cat,
  a.name,
  a.stream,
  a.correlation,
  a.ts_us,
  a.end_us,
  a.end_us - a.ts_us AS dur_us,
  a.is_gpu_side,
  a.kernel_type,
  a.partner_idx,
  a.ts_runtime_us,
  a.pid,
  a.tid,
  a.memory_bw_gbps
FROM hta_analyse(loaded) AS a
JOIN hta_files AS f USING (file_no);

-- HTA's GPU rows (stream <> -1, both sides) among the rows it analyses: the
-- input of every hta_* metric; the columns of hta_events, less names, CPU rows
-- and partner_idx. The lean path: one read of the events, and the materialized
-- rows hold only small columns (`cat` only where a row has a stream).
-- batch: shared from hta_events via hta_gpu_rows_from_events without event_idx, correlation
--   HTA's GPU rows among hta_events: loading the events again took 1.7 s of a
--   500-workload board, the filter of hta_events' shared table 0.17 s.
--   tests/query/test_run_metrics.py checks that the stand-in gives the same rows.
CREATE OR REPLACE VIEW hta_gpu_rows AS
WITH scan AS MATERIALIZED (
  SELECT
    file_no, trace_no, event_idx, stream, correlation, is_gpu_side, kernel_type, step_name, step_cat,
    -- only GPU rows leave this view: the other rows' categories are not needed
    CASE WHEN stream <> -1 THEN cat END AS cat,
    is_loaded, rel_ns, dur_ns
  FROM hta_raw
),
clock AS MATERIALIZED (
  SELECT * FROM hta_clock(scan)
),
loaded AS NOT MATERIALIZED (
  SELECT * FROM hta_load(scan, clock)
)
SELECT
  f.trace,
  f.rank,
  a.event_idx,
  a.row_order,
  a.copies,
  a.cat,
  a.stream,
  a.correlation,
  a.ts_us,
  a.end_us,
  a.is_gpu_side,
  a.kernel_type,
  a.ts_runtime_us
FROM hta_analyse(loaded) AS a
JOIN hta_files AS f USING (file_no)
WHERE a.stream <> -1;

-- hta_gpu_rows as a filter of hta_events: the same rows (tests/query/
-- test_run_metrics.py compares them). A batch that already holds hta_events
-- computes hta_gpu_rows from this (its `-- batch: shared from hta_events via ...` line), not with
-- a second load of the events (0.17 s instead of 1.7 s over 3.66 M events).
CREATE OR REPLACE VIEW hta_gpu_rows_from_events AS
SELECT
  trace, rank, event_idx, row_order, copies, cat, stream, correlation, ts_us, end_us, is_gpu_side, kernel_type,
  ts_runtime_us
FROM hta_events
WHERE stream <> -1;

-- Per rank, what HTA holds after loading (the numbers of the golden
-- loaded_facts.csv): rows, GPU rows (stream <> -1), GPU streams, first ts and
-- last end relative to HTA's alignment origin (the smallest loaded ts of all
-- ranks of the trace, before the tail filter), and that origin.
CREATE OR REPLACE VIEW hta_rank_facts AS
WITH scan AS MATERIALIZED (
  SELECT file_no, trace_no, event_idx, stream, correlation, is_gpu_side, step_name, step_cat, is_loaded, rel_ns, dur_ns
  FROM hta_raw
),
clock AS MATERIALIZED (
  SELECT * FROM hta_clock(scan)
),
loaded AS NOT MATERIALIZED (
  SELECT * FROM hta_load(scan, clock)
),
origin AS (
  SELECT trace_no, min(ts_us) AS origin_us FROM loaded GROUP BY trace_no
)
SELECT
  f.trace,
  f.rank,
  sum(e.copies) AS n_rows,
  sum(e.copies) FILTER (WHERE e.stream <> -1) AS n_gpu_rows,
  count(DISTINCT e.stream) FILTER (WHERE e.stream <> -1) AS n_streams,
  min(e.ts_us) - any_value(o.origin_us) AS min_ts_us,
  max(e.end_us) - any_value(o.origin_us) AS max_end_us,
  any_value(o.origin_us) AS origin_us
FROM hta_analyse(loaded) AS e
JOIN hta_files AS f USING (file_no)
JOIN origin AS o ON o.trace_no = f.trace_no
GROUP BY f.trace, f.rank;

-- HTA's interval merge (utils.merge_kernel_intervals) over a relation with
-- columns (trace, rank, key, ts_us, end_us, row_order): rows sorted by ts; a row
-- opens a new interval when it starts after the furthest end seen so far, so
-- touching intervals merge. Unlike `intervals_union`, zero- and negative-length
-- rows are kept, as in HTA: a lone dur = -1 row is an interval of length -1,
-- and a zero-length row can be the first or last interval. `seq` numbers the
-- merged intervals of a (trace, rank, key) in time order from 1.
-- The windows run over one integer per (trace, rank, key) (timeline_numbers, in
-- intervals.sql): partitioned by the three columns each window took twice as long (the
-- GPU rows of ../shared/traces, 142 k: the macro 186 -> 134 ms, on DuckDB 1.5.6 228 ->
-- 119 ms).
CREATE OR REPLACE MACRO hta_merge_intervals(tbl) AS TABLE
WITH input AS MATERIALIZED (
  SELECT trace, rank, key, ts_us, end_us, row_order FROM query_table(tbl)
),
numbers AS MATERIALIZED (
  SELECT * FROM timeline_numbers(input)
),
ordered AS (
  SELECT
    timeline, ts_us, end_us,
    max(end_us) OVER (
      PARTITION BY timeline ORDER BY ts_us, row_order
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS prev_max_end,
    row_order
  FROM timeline_rows(input, numbers)
),
grouped AS (
  SELECT
    *,
    sum(CASE WHEN ts_us > prev_max_end THEN 1 ELSE 0 END) OVER (
      PARTITION BY timeline ORDER BY ts_us, row_order ROWS UNBOUNDED PRECEDING
    ) AS grp
  FROM ordered
),
merged AS (
  SELECT timeline, grp + 1 AS seq, min(ts_us) AS ts_us, max(end_us) AS end_us
  FROM grouped
  GROUP BY timeline, grp
)
SELECT n.trace, n.rank, n.key, m.seq, m.ts_us, m.end_us
FROM merged AS m
JOIN numbers AS n USING (timeline);

-- HTA's GPU rows (stream <> -1) of each class, merged per class: the input of
-- the temporal breakdown, the overlap and the kernel-type breakdown.
-- key = 'ALL' (every GPU row, OTHER included) or the kernel_type; each row of
-- hta_gpu_rows feeds both keys (one read of the rows).
-- batch: shared
CREATE OR REPLACE VIEW hta_gpu_merged AS
WITH gpu_rows AS (
  SELECT trace, rank, unnest(['ALL', kernel_type]) AS key, ts_us, end_us, row_order
  FROM hta_gpu_rows
)
SELECT * FROM hta_merge_intervals(gpu_rows);

-- HTA's sweep line (breakdown_analysis._get_gpu_kernel_type_time,
-- communication_analysis.get_comm_comp_overlap) over boundary rows
-- (trace, rank, time_us, delta, sort_key): rows in time order, `running` = the
-- cumulative delta including this row, `next_time_us` = the next row's time.
-- A row stands for the stretch [time_us, next_time_us). On stretches of
-- positive length `running` does not depend on how ties are ordered; the
-- zero-length stretches between tied rows do, and `sort_key` decides them.
CREATE OR REPLACE MACRO hta_sweep(tbl) AS TABLE
SELECT
  trace,
  rank,
  time_us,
  delta,
  sum(delta) OVER (
    PARTITION BY trace, rank ORDER BY time_us, sort_key ROWS UNBOUNDED PRECEDING
  ) AS running,
  lead(time_us) OVER (PARTITION BY trace, rank ORDER BY time_us, sort_key) AS next_time_us
FROM query_table(tbl);

-- numpy's round(x, decimals) as pandas applies it (np.around: scale, round half
-- to even, unscale), so that HTA's rounded columns compare exactly.
CREATE OR REPLACE MACRO hta_round(x, decimals) AS
round_even(x * pow(10, decimals), 0) / pow(10, decimals);
