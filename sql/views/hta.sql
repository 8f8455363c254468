-- Holistic Trace Analysis (HTA 0.5.0) compatibility layer: the rows HTA's
-- TraceAnalysis keeps after loading a trace, with HTA's time values, kernel
-- classes and CPU<->GPU links, so that the `hta_*` metrics reproduce HTA's
-- numbers to the microsecond. Everything HTA-specific (its quirks included)
-- lives here, once; the metrics only aggregate. Each reproduced quirk is marked
-- "HTA quirk". Reference: ../shared/reference/hta-semantics.md §1-3.
--
-- Scope of the emulation (documented limits):
--  * HTA takes one file per rank; a (trace, rank) here is one ingested file.
--  * HTA orders ties with pandas' unstable quicksort; where a tie could change a
--    result we use the order a stable sort of HTA's row order gives (see
--    `row_order`), which reproduced every golden value we have.
--  * Events without `ts` (which HTA would keep with ts = NaN) are not in the
--    warehouse; their presence still switches on HTA's rounding (see below).

-- How HTA sees each file's clock. HTA reads the file's own `ts` values (it
-- ignores baseTimeNanoseconds), so the file value is ts_ns - base_time_ns.
-- HTA quirk: pandas makes the `ts` column float64 as soon as one event has a
-- fractional ts or lacks ts; only then does HTA round to whole microseconds
-- (ceil ts, floor end; trace_parser.round_down_time_stamps).
CREATE OR REPLACE VIEW hta_file_clock AS
SELECT
  f.file_id,
  f.trace,
  f.rank,
  coalesce(f.base_time_ns, 0) AS base_time_ns,
  coalesce(fr.any_fractional_ts, false) OR coalesce(nt.ts_missing, false) AS rounds_to_us
FROM files AS f
LEFT JOIN (
  SELECT e.file_id, bool_or((e.ts_ns - coalesce(f2.base_time_ns, 0)) % 1000 <> 0) AS any_fractional_ts
  FROM events AS e
  JOIN files AS f2 USING (file_id)
  GROUP BY e.file_id
) AS fr USING (file_id)
LEFT JOIN (
  SELECT file_id, sum("count") > 0 AS ts_missing
  FROM ingest_stats
  WHERE stat = 'no ts'
  GROUP BY file_id
) AS nt USING (file_id);

-- HTA 0.5.0's kernel class of a GPU row name (hta/utils/utils.py; Python
-- re.match, i.e. anchored at the start), tested in this order:
--   COMMUNICATION  ^nccl.*Kernel
--   MEMORY         (^Memcpy)|(^Memset)|(^dma)
--   COMPUTATION    NOT (^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)
--                  -- by precedence: starts nccl..Kernel, contains Memcpy,
--                  -- starts Memset, or contains Sync
--   OTHER          the rest (Event/Stream/Context Sync).
-- HTA quirk: `Stream Wait Event` does not contain "Sync", so it is COMPUTATION.
CREATE OR REPLACE MACRO hta_kernel_type(kernel_name) AS
CASE
  WHEN regexp_matches(kernel_name, '^nccl.*Kernel') THEN 'COMMUNICATION'
  WHEN regexp_matches(kernel_name, '^(Memcpy|Memset|dma)') THEN 'MEMORY'
  WHEN NOT regexp_matches(kernel_name, '^(nccl.*Kernel|.*Memcpy|Memset|.*Sync)') THEN 'COMPUTATION'
  ELSE 'OTHER'
END;

-- Every row HTA keeps when it parses a file, before its ProfilerStep filter.
-- Grain: one row per kept trace event.
--  * HTA's load filter: drop rows with no `dur` or no `cat`, drop cat "Trace"
--    (this drops metadata, flows, instants, counters). Chrome B/E pairs carry
--    no `dur` in the file, so HTA drops them too (ingest merged them into `B`).
--  * `cat` is the category as written (legacy `Kernel`/`Memcpy`/... included).
--  * `stream` / `correlation`: HTA's defaults -1 when absent; a stream that is
--    not an integer ("0x0" on ROCm runtime rows) is -1 too (ingest leaves NULL).
--    HTA quirk: `device` is not read; streams are keyed by their number alone
--    (one GPU per rank file is assumed), and a stream of 4294967295 (Kineto's
--    Context Sync) is a GPU row like any other.
--  * Time, in µs as HTA computes it. When the file's ts column is float64, HTA
--    applies ceil(ts) and floor(ts + dur) to the float64 values json parsed: the
--    file value is the exact decimal (ts_ns - base)/1000, which we turn into the
--    same correctly rounded double by casting its decimal text (a double
--    division of int64 ns loses bits at epoch magnitudes); dur_ns < 2^53 so
--    dur_ns / 1000.0 is already correctly rounded. Then the addition happens in
--    double, as in pandas. HTA quirk: a sub-µs event can end up with dur = -1.
--    Files with integer ts keep exact values (end may be fractional if a dur is).
--  * `is_gpu_side`: HTA's GPUKernelFilter: stream >= 0 and correlation >= 0,
--    or the name is `Event Sync` / `Context Sync` (device-wide syncs). Every
--    other row is "CPU" for HTA's linking and filtering.
CREATE OR REPLACE VIEW hta_loaded AS
WITH kept AS (
  SELECT
    e.trace,
    e.rank,
    e.file_id,
    e.event_idx,
    coalesce(e.cat_raw, e.cat) AS cat,
    e.name,
    coalesce(e.stream, -1) AS stream,
    coalesce(e.correlation, -1) AS correlation,
    e.ts_ns - c.base_time_ns AS rel_ns,
    e.dur_ns,
    c.rounds_to_us
  FROM events AS e
  JOIN hta_file_clock AS c USING (file_id)
  WHERE e.dur_ns IS NOT NULL
    AND e.ph IS DISTINCT FROM 'B'
    AND e.cat IS NOT NULL
    AND coalesce(e.cat_raw, e.cat) <> 'Trace'
),
as_float AS (
  SELECT
    *,
    CAST(
      (CASE WHEN rel_ns < 0 THEN '-' ELSE '' END)
      || printf('%d.%03d', abs(rel_ns) // 1000, abs(rel_ns) % 1000) AS DOUBLE
    ) AS ts_f64,
    dur_ns / 1000.0 AS dur_f64
  FROM kept
)
SELECT
  trace,
  rank,
  file_id,
  event_idx,
  cat,
  name,
  stream,
  correlation,
  -- (without rounding every ts is a whole µs: rel_ns // 1000 is exact, and so
  -- is its double; int64 ts + float64 dur is a double addition in pandas too)
  CASE WHEN rounds_to_us THEN ceil(ts_f64) ELSE CAST(rel_ns // 1000 AS DOUBLE) END AS ts_us,
  CASE WHEN rounds_to_us THEN floor(ts_f64 + dur_f64) ELSE CAST(rel_ns // 1000 AS DOUBLE) + dur_f64 END AS end_us,
  (stream >= 0 AND correlation >= 0) OR name IN ('Event Sync', 'Context Sync') AS is_gpu_side
FROM as_float;

-- The rows HTA analyses: what its TraceAnalysis holds after load_traces().
-- Grain: one row per kept event; `copies` says how many times HTA holds it.
--  * Tail filter (trace._filter_irrelevant_gpu_kernels). HTA quirk: it counts
--    the symbols that merely contain "ProfilerStep" in the symbol table shared
--    by all ranks (names and categories); with at most one, HTA analyses the
--    whole trace. Otherwise, per rank, CPU-side rows are kept when they start
--    before the start of the last ProfilerStep row on the CPU side, and GPU-side
--    rows when their correlation matches a kept CPU-side row, even if they run
--    later. The warm-up before the first step is kept, the last step is dropped.
--    HTA quirk: a rank with no ProfilerStep row of its own keeps nothing.
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
--  * `kernel_type`: HTA 0.5.0 class of the rows with stream <> -1 (HTA's "GPU
--    rows": kernels, memcpys, memsets, cuda_sync events (they carry a stream),
--    MTIA ccp events), NULL for the other rows.
CREATE OR REPLACE VIEW hta_events AS
WITH loaded AS MATERIALIZED (
  SELECT * FROM hta_loaded
),
step_symbols AS (
  SELECT trace, count(DISTINCT symbol) AS n_symbols
  FROM (
    SELECT trace, name AS symbol FROM loaded WHERE contains(name, 'ProfilerStep')
    UNION ALL
    SELECT trace, cat FROM loaded WHERE contains(cat, 'ProfilerStep')
  )
  GROUP BY trace
),
flagged AS MATERIALIZED (
  SELECT l.*, coalesce(s.n_symbols, 0) >= 2 AS filtered
  FROM loaded AS l
  LEFT JOIN step_symbols AS s USING (trace)
),
last_step_start AS (
  SELECT trace, rank, max(ts_us) AS last_start_us
  FROM flagged
  WHERE filtered AND NOT is_gpu_side AND contains(name, 'ProfilerStep')
  GROUP BY ALL
),
cpu_kept AS MATERIALIZED (
  SELECT f.*
  FROM flagged AS f
  LEFT JOIN last_step_start AS s USING (trace, rank)
  WHERE NOT f.is_gpu_side
    AND (NOT f.filtered OR f.ts_us < s.last_start_us)
),
cpu_correlations AS (
  SELECT trace, rank, correlation, count(*) AS n_rows
  FROM cpu_kept
  WHERE filtered
  GROUP BY ALL
),
gpu_kept AS (
  SELECT f.*, CASE WHEN f.filtered THEN c.n_rows ELSE 1 END AS copies
  FROM flagged AS f
  LEFT JOIN cpu_correlations AS c USING (trace, rank, correlation)
  WHERE f.is_gpu_side
    AND (NOT f.filtered OR c.n_rows IS NOT NULL)
),
analysed AS MATERIALIZED (
  SELECT *, event_idx AS row_order FROM gpu_kept
  UNION ALL BY NAME
  SELECT
    *,
    1 AS copies,
    CASE WHEN filtered THEN event_idx + (1::BIGINT << 40) ELSE event_idx END AS row_order
  FROM cpu_kept
),
last_of_side AS (
  SELECT trace, rank, correlation, is_gpu_side, max(event_idx) AS last_idx
  FROM loaded
  WHERE correlation <> -1
  GROUP BY ALL
),
kept_ts AS (
  SELECT trace, rank, event_idx, min(ts_us) AS ts_us
  FROM analysed
  GROUP BY ALL
),
linked AS (
  SELECT
    a.*,
    CASE WHEN a.correlation <> -1 THEN coalesce(o.last_idx, least(a.correlation, 0)) ELSE -1 END AS partner_idx
  FROM analysed AS a
  LEFT JOIN last_of_side AS o
    ON o.trace = a.trace AND o.rank = a.rank AND o.correlation = a.correlation
    AND o.is_gpu_side <> a.is_gpu_side
)
SELECT
  l.trace,
  l.rank,
  l.file_id,
  l.event_idx,
  l.row_order,
  l.copies,
  l.cat,
  l.name,
  l.stream,
  l.correlation,
  l.ts_us,
  l.end_us,
  l.end_us - l.ts_us AS dur_us,
  l.is_gpu_side,
  CASE WHEN l.stream <> -1 THEN hta_kernel_type(l.name) END AS kernel_type,
  l.partner_idx,
  k.ts_us AS ts_runtime_us
FROM linked AS l
LEFT JOIN kept_ts AS k
  ON k.trace = l.trace AND k.rank = l.rank AND k.event_idx = l.partner_idx;

-- Per rank, what HTA holds after loading (the numbers of the golden
-- loaded_facts.csv): rows, GPU rows (stream <> -1), GPU streams, first ts and
-- last end relative to HTA's alignment origin (the smallest loaded ts of all
-- ranks of the trace, before the tail filter), and that origin.
CREATE OR REPLACE VIEW hta_rank_facts AS
WITH origin AS (
  SELECT trace, min(ts_us) AS origin_us FROM hta_loaded GROUP BY trace
)
SELECT
  e.trace,
  e.rank,
  sum(e.copies) AS n_rows,
  sum(e.copies) FILTER (WHERE e.stream <> -1) AS n_gpu_rows,
  count(DISTINCT e.stream) FILTER (WHERE e.stream <> -1) AS n_streams,
  min(e.ts_us) - any_value(o.origin_us) AS min_ts_us,
  max(e.end_us) - any_value(o.origin_us) AS max_end_us,
  any_value(o.origin_us) AS origin_us
FROM hta_events AS e
JOIN origin AS o USING (trace)
GROUP BY ALL;

-- HTA's interval merge (utils.merge_kernel_intervals) over a relation with
-- columns (trace, rank, key, ts_us, end_us, row_order): rows sorted by ts; a row
-- opens a new interval when it starts after the furthest end seen so far, so
-- touching intervals merge. Unlike `intervals_union`, zero- and negative-length
-- rows are kept, as in HTA: a lone dur = -1 row is an interval of length -1,
-- and a zero-length row can be the first or last interval. `seq` numbers the
-- merged intervals of a (trace, rank, key) in time order from 1.
CREATE OR REPLACE MACRO hta_merge_intervals(tbl) AS TABLE
WITH ordered AS (
  SELECT
    trace, rank, key, ts_us, end_us,
    max(end_us) OVER (
      PARTITION BY trace, rank, key ORDER BY ts_us, row_order
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS prev_max_end,
    row_order
  FROM query_table(tbl)
),
grouped AS (
  SELECT
    *,
    sum(CASE WHEN ts_us > prev_max_end THEN 1 ELSE 0 END) OVER (
      PARTITION BY trace, rank, key ORDER BY ts_us, row_order ROWS UNBOUNDED PRECEDING
    ) AS grp
  FROM ordered
)
SELECT trace, rank, key, grp + 1 AS seq, min(ts_us) AS ts_us, max(end_us) AS end_us
FROM grouped
GROUP BY trace, rank, key, grp;

-- HTA's GPU rows (stream <> -1) of each class, merged per class: the input of
-- the temporal breakdown, the overlap and the kernel-type breakdown.
-- key = 'ALL' (every GPU row, OTHER included) or the kernel_type.
CREATE OR REPLACE VIEW hta_gpu_merged AS
WITH gpu_rows AS (
  SELECT trace, rank, 'ALL' AS key, ts_us, end_us, row_order
  FROM hta_events WHERE stream <> -1
  UNION ALL
  SELECT trace, rank, kernel_type, ts_us, end_us, row_order
  FROM hta_events WHERE stream <> -1
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
